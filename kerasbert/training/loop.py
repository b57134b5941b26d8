"""A resumable training loop: the model's own `train_step` under a `tf.distribute` strategy,
with the model, optimizer, step and data iterator checkpointed together.

Killed and restarted with the same arguments, training continues from the
last checkpoint at the same step and the same position in the data (the
`tf.data` iterator is part of the checkpoint, so the pipeline must be free of
stateful ops). A loss that is not finite stops training with an error naming
the step.
"""

import math
import os

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

# What TensorBoard's scalar summaries carry, written with TensorFlow's own `tf.summary.write`
# (so logging needs no `tensorboard` package; TensorBoard shows them as scalars).
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")).SerializeToString()


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite."""


def train(model, strategy, dataset_fn, model_dir, train_steps, *, steps_per_loop=100,
          checkpoint_interval=1000, jit_compile=False, progress=True, log=print):
    """Train a compiled `model` (built under `strategy.scope()`) for `train_steps` steps.

    Args:
        model: a compiled Keras model whose `train_step` takes the dataset's
            elements (e.g. a `PretrainingModel` with pretraining batches).
        strategy: the `tf.distribute.Strategy` the model was built under.
        dataset_fn: `input_context -> tf.data.Dataset` that never ends
            (`kerasbert.data.pretraining_dataset(..., epochs=None)`). The
            context's "replicas" are the workers: its per-replica batch size is
            this worker's share of the global batch, which the worker splits
            among its devices. (The worker's iterator is what is checkpointed:
            TensorFlow cannot checkpoint distributed iterators.)
        model_dir: checkpoints (`ckpt-<n>`) and TensorBoard logs (`train/`) go here.
        train_steps: total steps, counting those done before a restart.
        steps_per_loop: steps per compiled loop, between logs and NaN checks.
        checkpoint_interval: steps between checkpoints (one more at the end).
        jit_compile: compile each step with XLA.

    Returns:
        The last logs (a dict of floats), including `"step"`.

    Example (a tiny model for two steps; runs anywhere):
    >>> import tempfile, numpy as np
    >>> strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    >>> with strategy.scope():
    ...     model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    ...     model.compile(optimizer="sgd", loss="mse")
    >>> data = lambda context: tf.data.Dataset.from_tensors((np.ones((4, 3)), np.ones((4, 1)))).repeat()
    >>> logs = train(model, strategy, data, tempfile.mkdtemp(), 2, steps_per_loop=1, progress=False,
    ...              log=lambda message: None)
    >>> logs["step"]
    2
    """
    if train_steps < 1 or steps_per_loop < 1 or checkpoint_interval < 1:
        raise ValueError(f"train_steps, steps_per_loop and checkpoint_interval must be positive, "
                         f"got {train_steps}, {steps_per_loop}, {checkpoint_interval}")
    with strategy.scope():
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step",
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        model.optimizer.build(model.trainable_variables)
    workers, worker = _workers(strategy)
    iterator = iter(dataset_fn(tf.distribute.InputContext(
        num_input_pipelines=workers, input_pipeline_id=worker, num_replicas_in_sync=workers)))
    local_replicas = strategy.num_replicas_in_sync // workers
    checkpoint = tf.train.Checkpoint(model_variables=model_variables(model),
                                     optimizer=model.optimizer, step=step, iterator=iterator)
    manager = tf.train.CheckpointManager(checkpoint, _checkpoint_dir(strategy, model_dir),
                                         max_to_keep=3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        log(f"Restored {manager.latest_checkpoint} at step {int(step.numpy())}")
    writer = tf.summary.create_file_writer(os.path.join(model_dir, "train"))
    model_step = tf.function(model.train_step, jit_compile=True) if jit_compile else (
        model.train_step)

    def replica_step(batch):
        # Each of the worker's devices trains on its slice of the worker's batch.
        if local_replicas > 1:
            index = tf.distribute.get_replica_context().replica_id_in_sync_group % local_replicas
            batch = tf.nest.map_structure(lambda value: _slice(value, index, local_replicas),
                                          batch)
        return model_step(batch)

    @tf.function
    def run_steps(iterator, count):
        logs = strategy.run(replica_step, args=(next(iterator),))
        step.assign_add(1)
        for _ in tf.range(count - 1):
            logs = strategy.run(replica_step, args=(next(iterator),))
            step.assign_add(1)
        return logs

    bar = None
    done = int(step.numpy())
    logs = {"step": done}
    last_saved = done
    while done < train_steps:
        count = min(steps_per_loop, train_steps - done,
                    checkpoint_interval - done % checkpoint_interval)
        results = run_steps(iterator, tf.constant(count, tf.int64))
        done = int(step.numpy())
        logs = {name: float(strategy.experimental_local_results(value)[0])
                for name, value in results.items()}
        model.reset_metrics()  # each log line covers its own loop
        if not all(math.isfinite(value) for value in logs.values()):
            raise NonFiniteLossError(
                f"Training stopped at step {done}: the loss is not finite ({logs}); "
                f"the last checkpoint is from step {last_saved}")
        with writer.as_default(step=done):
            for name, value in {**logs, "learning_rate": _learning_rate(model.optimizer)}.items():
                tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)
        if progress:
            bar = bar or keras.utils.Progbar(train_steps, unit_name="step",
                                             stateful_metrics=list(logs))
            bar.update(done, values=list(logs.items()))
        if done % checkpoint_interval == 0 or done == train_steps:
            manager.save(checkpoint_number=done)
            last_saved = done
        logs["step"] = done
    writer.flush()
    return logs


def model_variables(model):
    """Every variable of `model` (weights and the dropout seed states) keyed by its path, for
    `tf.train.Checkpoint(model_variables=...)`: Keras 3 models are not tracked by
    `tf.train.Checkpoint` themselves."""
    variables = {}
    for variable in model.variables:
        key = variable.path.replace("/", ".")
        if key in variables and variables[key] is not variable:
            raise ValueError(f"Two variables of {model.name} share the path {variable.path!r}")
        variables[key] = variable
    return variables


def _slice(value, index, parts):
    """Part `index` of `parts` equal parts of `value` along the batch axis."""
    size = tf.shape(value)[0] // parts
    return value[index * size:(index + 1) * size]


def _workers(strategy):
    """(number of workers, this worker's index) of a strategy."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return 1, 0
    workers = sum(len(tasks) for job, tasks in resolver.cluster_spec().as_dict().items()
                  if job in ("chief", "worker"))
    index = resolver.task_id + (1 if resolver.task_type == "worker" and "chief" in
                                resolver.cluster_spec().as_dict() else 0)
    return workers, index


def _learning_rate(optimizer):
    rate = optimizer.learning_rate
    return float(rate.numpy() if hasattr(rate, "numpy") else rate)


def _checkpoint_dir(strategy, model_dir):
    """`model_dir` for the chief; a worker's own scratch directory for other workers (all
    workers must save, as the saving is collective, but only the chief's files are kept)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_type in (None, "chief") or (
            resolver.task_type == "worker" and resolver.task_id == 0
            and "chief" not in resolver.cluster_spec().as_dict()):
        return model_dir
    return os.path.join(model_dir, f".{resolver.task_type}-{resolver.task_id}")
