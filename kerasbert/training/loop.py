"""A resumable training loop: the model's own `train_step` under a `tf.distribute` strategy,
with the model, optimizer, step and data iterator checkpointed together.

Killed and restarted with the same arguments, training continues from the
last checkpoint at the same step and the same position in the data (the
`tf.data` iterator is part of the checkpoint, so the pipeline must be free of
stateful ops); an unreadable latest checkpoint (truncated, corrupt) is named in
a warning and the one before it is used. On SIGTERM every worker saves at the
same step and the process exits with status 143; on Ctrl-C (SIGINT) it saves at the current
step too and raises `TrainingInterrupted`, which the binaries report in one line with status 130
(`kerasbert.training.preemption`).
A loss that is not finite stops training with an error naming the step, or,
with `max_recoveries`, rolls back to the last checkpoint and skips the batch
whose loss was not finite.
"""

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from kerasbert import file_system
from kerasbert.training.preemption import (TrainingInterrupted, TrainingPreempted,
                                           preemption_watcher)

# What TensorBoard's scalar summaries carry, written with TensorFlow's own `tf.summary.write`
# (so logging needs no `tensorboard` package; TensorBoard shows them as scalars).
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")).SerializeToString()


class TrainingError(RuntimeError):
    """Training cannot go on; the message says why (one line)."""


class NonFiniteLossError(TrainingError):
    """The loss became NaN or infinite (more often than `max_recoveries` allows)."""


class UnreadableCheckpointError(TrainingError):
    """No checkpoint of the run's directory can be restored."""


def train(model, strategy, dataset_fn, model_dir, train_steps, *, steps_per_loop=100,
          checkpoint_interval=1000, jit_compile=False, max_recoveries=0, progress=True,
          log=print, save_data_position=True):
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
        save_data_position: checkpoint the data iterator (False for data that
            cannot be, e.g. batches read from the tf.data service: a restart
            then reads on from wherever the data source is).
        max_recoveries: how many times a non-finite loss may be recovered from:
            the run goes back to the last checkpoint (saved at the start, as
            `ckpt-<step>`, if there is none yet), trains up to the step whose
            loss was not finite, skips that step's batch and goes on. One more
            stops training with `NonFiniteLossError` (0: the first one does).

    Returns:
        The last logs (a dict of floats), including `"step"`.

    Raises:
        TrainingPreempted: after SIGTERM, once the checkpoint is saved (a
            `SystemExit` with status 143).
        TrainingInterrupted: after Ctrl-C (SIGINT), once the checkpoint is saved
            (a `KeyboardInterrupt` naming it).
        NonFiniteLossError, UnreadableCheckpointError: one-line messages.

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
    if train_steps < 1 or steps_per_loop < 1 or checkpoint_interval < 1 or max_recoveries < 0:
        raise ValueError(f"train_steps, steps_per_loop and checkpoint_interval must be positive "
                         f"and max_recoveries not negative, got {train_steps}, {steps_per_loop}, "
                         f"{checkpoint_interval}, {max_recoveries}")
    with strategy.scope():
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step",
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        model.optimizer.build(model.trainable_variables)
    workers, worker = _workers(strategy)
    iterator = iter(dataset_fn(tf.distribute.InputContext(
        num_input_pipelines=workers, input_pipeline_id=worker, num_replicas_in_sync=workers)))
    local_replicas = strategy.num_replicas_in_sync // workers
    checkpoint = tf.train.Checkpoint(model_variables=model_variables(model),
                                     optimizer=model.optimizer, step=step,
                                     **({"iterator": iterator} if save_data_position else {}))
    manager = tf.train.CheckpointManager(checkpoint, _checkpoint_dir(strategy, model_dir),
                                         max_to_keep=3)
    last_good = restore_latest(checkpoint, manager, log)
    if last_good:
        log(f"Restored {last_good} at step {int(step.numpy())}")
    writer = tf.summary.create_file_writer(file_system.join(model_dir, "train"))
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
        """`count` steps; their last logs and whether any replica's loss was not finite."""
        logs = strategy.run(replica_step, args=(next(iterator),))
        step.assign_add(1)
        for _ in tf.range(count - 1):
            logs = strategy.run(replica_step, args=(next(iterator),))
            step.assign_add(1)
        # The metrics are means since the last reset, so one non-finite step shows at the end.
        non_finite = strategy.run(_count_non_finite, args=(logs,))
        return logs, strategy.reduce(tf.distribute.ReduceOp.SUM, non_finite, axis=None) > 0

    def run(count):
        results, non_finite = run_steps(iterator, tf.constant(count, tf.int64))
        model.reset_metrics()  # each log line covers its own loop
        return results, bool(non_finite)

    def recover(loop_start, loop_end):
        """Back to the last checkpoint, then up to the step of (loop_start, loop_end] whose
        loss is not finite, whose batch is skipped; returns that step (None if the replay
        found none)."""
        restored_step = _restore(checkpoint, last_good, step)
        if loop_start > restored_step:
            run(loop_start - restored_step)  # finite before: the loops logged it
        while int(step.numpy()) < loop_end:
            if run(1)[1]:
                bad_step = int(step.numpy())
                break
        else:
            return None
        _restore(checkpoint, last_good, step)
        if bad_step - 1 > restored_step:
            run(bad_step - 1 - restored_step)
        next(iterator)  # every worker drops its share of the offending batch
        return bad_step

    bar = None
    done = int(step.numpy())
    logs = {"step": done}
    last_saved = done if last_good else None
    recoveries = 0

    def save(again=False):
        nonlocal last_good, last_saved
        if again or last_saved != done:
            last_good, last_saved = manager.save(checkpoint_number=done), done
        return done

    if max_recoveries:
        save()  # a good state to go back to

    with preemption_watcher(strategy).watching(save) as watcher:
        try:
            while done < train_steps:
                count = min(steps_per_loop, train_steps - done,
                            checkpoint_interval - done % checkpoint_interval)
                results, non_finite = run(count)
                done = int(step.numpy())
                logs = {name: float(strategy.experimental_local_results(value)[0])
                        for name, value in results.items()}
                if non_finite:
                    if recoveries == max_recoveries:
                        raise NonFiniteLossError(
                            f"Training stopped at step {done}: the loss is not finite ({logs}); "
                            + (f"the last checkpoint is from step {last_saved}"
                               if last_saved is not None else "no checkpoint saved yet") + (
                                f" ({max_recoveries} recoveries done)" if max_recoveries else
                                "; --max_recoveries=N goes back to it and skips the batch "
                                "instead"))
                    recoveries += 1
                    skipped = recover(done - count, done)
                    back_to = last_saved
                    done = int(step.numpy())
                    if skipped is not None:
                        save(again=True)  # a later rollback must not replay the skipped batch
                    log(f"Recovery {recoveries} of {max_recoveries}: " + (
                        f"the loss of step {skipped} was not finite; back to step {back_to}, "
                        f"then the batch of step {skipped} skipped" if skipped is not None else
                        f"the loss was not finite by step {done}, but finite when replayed from "
                        f"step {back_to}; nothing skipped"))
                    continue
                with writer.as_default(step=done):
                    for name, value in {**logs,
                                        "learning_rate": _learning_rate(model.optimizer)}.items():
                        tf.summary.write(name, tf.constant(value, tf.float32),
                                         metadata=_SCALAR_METADATA)
                if progress:
                    bar = bar or keras.utils.Progbar(train_steps, unit_name="step",
                                                     stateful_metrics=list(logs))
                    bar.update(done, values=list(logs.items()))
                if done % checkpoint_interval == 0 or done == train_steps:
                    save()
                logs["step"] = done
                watcher.check()
        except TrainingPreempted as preempted:
            log(f"\nPreempted (SIGTERM): saved {last_good} at step {preempted.step}; exiting "
                f"with status {preempted.code}. Run the same command again to resume.")
            raise
        except TrainingInterrupted as interrupted:
            interrupted.checkpoint = last_good
            raise
        finally:
            writer.flush()
    return logs


def restore_latest(checkpoint, manager, log=print):
    """Restore the newest checkpoint of `manager` that can be read; its path, or None if there
    is none. An unreadable one is named in a one-line warning, then the one before it is tried.

    >>> import tempfile
    >>> checkpoint = tf.train.Checkpoint(value=tf.Variable(1.0))
    >>> manager = tf.train.CheckpointManager(checkpoint, tempfile.mkdtemp(), max_to_keep=2)
    >>> restore_latest(checkpoint, manager) is None
    True
    """
    candidates = list(reversed(manager.checkpoints))
    for index, path in enumerate(candidates):
        try:
            checkpoint.restore(path).assert_existing_objects_matched()
            return path
        except Exception as error:  # noqa: BLE001 (truncated files raise IndexError, ...)
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            fallback = (f"using the previous one, {candidates[index + 1]}"
                        if index + 1 < len(candidates) else "no older checkpoint is left")
            log(f"Warning: checkpoint {path} cannot be read ({reason}); {fallback}")
    if candidates:
        raise UnreadableCheckpointError(
            f"No checkpoint in {manager.directory} can be read (tried {', '.join(candidates)}); "
            "move them away to start over")
    return None


def _restore(checkpoint, path, step):
    """Restore `path` (read before, so readable); the step it holds."""
    checkpoint.restore(path).assert_existing_objects_matched()
    return int(step.numpy())


def _count_non_finite(logs):
    """How many of a replica's logged values are NaN or infinite (a float32 scalar)."""
    return tf.add_n([tf.reduce_sum(tf.cast(~tf.math.is_finite(tf.cast(value, tf.float32)),
                                           tf.float32)) for value in tf.nest.flatten(logs)])


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
    return file_system.join(model_dir, f".{resolver.task_type}-{resolver.task_id}")
