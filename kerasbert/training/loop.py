"""A resumable training loop (`Trainer`, run by `train`): the model's own `train_step` under a
`tf.distribute` strategy, with the model, optimizer, step and data iterator checkpointed together.

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
    """Train a compiled `model` (built under `strategy.scope()`) for `train_steps` steps:
    `Trainer(...).run()` (see `Trainer` for the arguments).

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
    return Trainer(model, strategy, dataset_fn, model_dir, train_steps,
                   steps_per_loop=steps_per_loop, checkpoint_interval=checkpoint_interval,
                   jit_compile=jit_compile, max_recoveries=max_recoveries, progress=progress,
                   log=log, save_data_position=save_data_position).run()


class Trainer:
    """Trains a compiled `model` (built under `strategy.scope()`) for `train_steps` steps, in
    loops of compiled steps, checkpointing the model, optimizer, step and data iterator together.

    Creating it restores the newest readable checkpoint of `model_dir`; `run()` trains from
    there. One pass of `run()` is: `run_steps` (up to the next log or checkpoint), then either
    `recover` (the loss was not finite) or `write_logs` and `save` (at the checkpoint cadence),
    then the preemption watcher's check.

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
        max_recoveries: how many times a non-finite loss may be recovered from:
            the run goes back to the last checkpoint (saved at the start, as
            `ckpt-<step>`, if there is none yet), trains up to the step whose
            loss was not finite, skips that step's batch and goes on. One more
            stops training with `NonFiniteLossError` (0: the first one does).
        progress: show a Keras progress bar.
        log: prints one message (restores, recoveries, preemption, warnings).
        save_data_position: checkpoint the data iterator (False for data that
            cannot be, e.g. batches read from the tf.data service: a restart
            then reads on from wherever the data source is). The iterator's
            position is saved, not the state of lookup tables its functions
            write to: the byte-pair tokenizer's word cache is a memo, and an
            empty one gives the same ids.

    Example (a tiny model for three steps, then one more after a restart):
    >>> import tempfile, numpy as np
    >>> strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    >>> with strategy.scope():
    ...     model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    ...     model.compile(optimizer="sgd", loss="mse")
    >>> batch = (np.ones((4, 3)), np.ones((4, 1)))
    >>> data = lambda context: tf.data.Dataset.from_tensors(batch).repeat()
    >>> model_dir, quiet = tempfile.mkdtemp(), dict(progress=False, log=lambda message: None)
    >>> Trainer(model, strategy, data, model_dir, 3, steps_per_loop=2, **quiet).run()["step"]
    3
    >>> trainer = Trainer(model, strategy, data, model_dir, 6, **quiet)
    >>> trainer.steps_done, trainer.run(until=5)["step"], trainer.run()["step"]
    (3, 5, 6)
    """

    def __init__(self, model, strategy, dataset_fn, model_dir, train_steps, *, steps_per_loop=100,
                 checkpoint_interval=1000, jit_compile=False, max_recoveries=0, progress=True,
                 log=print, save_data_position=True):
        if train_steps < 1 or steps_per_loop < 1 or checkpoint_interval < 1 or max_recoveries < 0:
            raise ValueError(f"train_steps, steps_per_loop and checkpoint_interval must be "
                             f"positive and max_recoveries not negative, got {train_steps}, "
                             f"{steps_per_loop}, {checkpoint_interval}, {max_recoveries}")
        self._model, self._strategy = model, strategy
        self._train_steps, self._steps_per_loop = train_steps, steps_per_loop
        self._checkpoint_interval, self._max_recoveries = checkpoint_interval, max_recoveries
        self._progress, self._log = progress, log
        with strategy.scope():
            self._step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step",
                                     aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            model.optimizer.build(model.trainable_variables)
        workers, worker = _workers(strategy)
        self._iterator = iter(_position_only(dataset_fn(tf.distribute.InputContext(
            num_input_pipelines=workers, input_pipeline_id=worker,
            num_replicas_in_sync=workers))))
        self._local_replicas = strategy.num_replicas_in_sync // workers
        self._checkpoint = tf.train.Checkpoint(
            model_variables=model_variables(model), optimizer=model.optimizer, step=self._step,
            **({"iterator": self._iterator} if save_data_position else {}))
        self._manager = tf.train.CheckpointManager(
            self._checkpoint, _checkpoint_dir(strategy, model_dir), max_to_keep=3)
        self._last_good = restore_latest(self._checkpoint, self._manager, log)  # a path or None
        if self._last_good:
            log(f"Restored {self._last_good} at step {int(self._step.numpy())}")
        self._writer = tf.summary.create_file_writer(file_system.join(model_dir, "train"))
        self._model_step = tf.function(model.train_step, jit_compile=True) if jit_compile else (
            model.train_step)
        self.steps_done = int(self._step.numpy())
        self._last_saved = self.steps_done if self._last_good else None  # a step or None
        self._recoveries = 0
        self._progress_bar = None

    def run(self, until=None):
        """Train up to step `until` (default, and at most: `train_steps`), checkpointed there;
        the last logs (a dict of floats, including `"step"`). Training in stages (a fine-tuning
        run's epochs, evaluated in between) calls it once per stage: the compiled steps, the
        data iterator and the progress bar carry on.

        Raises `TrainingPreempted` after SIGTERM and `TrainingInterrupted` after Ctrl-C (once
        the checkpoint is saved), `NonFiniteLossError` past `max_recoveries`.
        """
        until = self._train_steps if until is None else min(until, self._train_steps)
        logs = {"step": self.steps_done}
        if self._max_recoveries:
            self.save()  # a good state to go back to
        with preemption_watcher(self._strategy).watching(self.save) as watcher:
            try:
                while self.steps_done < until:
                    count = min(self._steps_per_loop, until - self.steps_done,
                                self._checkpoint_interval
                                - self.steps_done % self._checkpoint_interval)
                    logs, non_finite = self.run_steps(count)
                    if non_finite:
                        self.recover(loop_start=self.steps_done - count, logs=logs)
                        continue
                    self.write_logs(logs)
                    if (self.steps_done % self._checkpoint_interval == 0
                            or self.steps_done == until):
                        self.save()
                    logs["step"] = self.steps_done
                    watcher.check()
            except TrainingPreempted as preempted:
                self._log(f"\nPreempted (SIGTERM): saved {self._last_good} at step "
                          f"{preempted.step}; exiting with status {preempted.code}. Run the "
                          "same command again to resume.")
                raise
            except TrainingInterrupted as interrupted:
                interrupted.checkpoint = self._last_good
                raise
            finally:
                self._writer.flush()
        return logs

    def run_steps(self, count):
        """Train `count` steps in one compiled loop; their last logs (a dict of floats) and
        whether any replica's loss was not finite in them."""
        results, non_finite = self._compiled_steps(self._iterator,
                                                   tf.constant(count, tf.int64))
        self._model.reset_metrics()  # each log line covers its own loop
        self.steps_done = int(self._step.numpy())
        logs = {name: float(self._strategy.experimental_local_results(value)[0])
                for name, value in results.items()}
        return logs, bool(non_finite)

    @tf.function
    def _compiled_steps(self, iterator, count):
        """`count` steps; their last logs and whether any replica's loss was not finite."""
        logs = self._strategy.run(self._replica_step, args=(next(iterator),))
        self._step.assign_add(1)
        for _ in tf.range(count - 1):
            logs = self._strategy.run(self._replica_step, args=(next(iterator),))
            self._step.assign_add(1)
        # The metrics are means since the last reset, so one non-finite step shows at the end.
        non_finite = self._strategy.run(_count_non_finite, args=(logs,))
        return logs, self._strategy.reduce(tf.distribute.ReduceOp.SUM, non_finite, axis=None) > 0

    def _replica_step(self, batch):
        """One step of one replica: each of the worker's devices trains on its slice of the
        worker's batch."""
        if self._local_replicas > 1:
            index = (tf.distribute.get_replica_context().replica_id_in_sync_group
                     % self._local_replicas)
            batch = tf.nest.map_structure(
                lambda value: _slice(value, index, self._local_replicas), batch)
        return self._model_step(batch)

    def recover(self, loop_start, logs):
        """The loss was not finite in the loop of steps after `loop_start` (whose last `logs`
        these are): stop with `NonFiniteLossError` if no recovery is left, else go back to the
        last checkpoint, skip the offending batch, save and log what was done."""
        loop_end = self.steps_done
        if self._recoveries == self._max_recoveries:
            raise NonFiniteLossError(
                f"Training stopped at step {loop_end}: the loss is not finite ({logs}); "
                + (f"the last checkpoint is from step {self._last_saved}"
                   if self._last_saved is not None else "no checkpoint saved yet") + (
                    f" ({self._max_recoveries} recoveries done)" if self._max_recoveries else
                    "; --max_recoveries=N goes back to it and skips the batch instead"))
        self._recoveries += 1
        back_to = self._last_saved
        skipped = self._replay_skipping_the_bad_batch(loop_start, loop_end)
        if skipped is not None:
            self.save(again=True)  # a later rollback must not replay the skipped batch
        self._log(f"Recovery {self._recoveries} of {self._max_recoveries}: " + (
            f"the loss of step {skipped} was not finite; back to step {back_to}, "
            f"then the batch of step {skipped} skipped" if skipped is not None else
            f"the loss was not finite by step {self.steps_done}, but finite when replayed from "
            f"step {back_to}; nothing skipped"))

    def _replay_skipping_the_bad_batch(self, loop_start, loop_end):
        """Back to the last checkpoint, then up to the step of (loop_start, loop_end] whose
        loss is not finite, whose batch is skipped; returns that step (None if the replay
        found none)."""
        restored_step = self._restore_last_good()
        if loop_start > restored_step:
            self.run_steps(loop_start - restored_step)  # finite before: the loops logged it
        while self.steps_done < loop_end:
            if self.run_steps(1)[1]:
                bad_step = self.steps_done
                break
        else:
            return None
        self._restore_last_good()
        if bad_step - 1 > restored_step:
            self.run_steps(bad_step - 1 - restored_step)
        next(self._iterator)  # every worker drops its share of the offending batch
        return bad_step

    def _restore_last_good(self):
        """Restore the last checkpoint saved or restored (readable); the step it holds."""
        self._checkpoint.restore(self._last_good).assert_existing_objects_matched()
        self.steps_done = int(self._step.numpy())
        return self.steps_done

    def save(self, again=False):
        """Checkpoint the current step, unless it is saved already (or `again`); the step."""
        if again or self._last_saved != self.steps_done:
            self._last_good = self._manager.save(checkpoint_number=self.steps_done)
            self._last_saved = self.steps_done
        return self.steps_done

    def write_logs(self, logs):
        """Write a loop's logs (and the learning rate) to TensorBoard and the progress bar."""
        with self._writer.as_default(step=self.steps_done):
            for name, value in {**logs,
                                "learning_rate": _learning_rate(self._model.optimizer)}.items():
                tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)
        if self._progress:
            self._progress_bar = self._progress_bar or keras.utils.Progbar(
                self._train_steps, unit_name="step", stateful_metrics=list(logs))
            self._progress_bar.update(self.steps_done, values=list(logs.items()))


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


def _position_only(dataset):
    """`dataset`, whose iterator checkpoints save its position without the state of resources
    its functions use (a byte-pair tokenizer's word cache: tf.data otherwise refuses to save
    an iterator whose map inserts into a table)."""
    options = tf.data.Options()
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset.with_options(options)


def _count_non_finite(logs):
    """How many of a replica's logged values are NaN or infinite (a float32 scalar)."""
    return tf.add_n([tf.reduce_sum(tf.cast(~tf.math.is_finite(tf.cast(value, tf.float32)),
                                           tf.float32)) for value in tf.nest.flatten(logs)])


# The path of a Keras `SeedGenerator`'s state variable: "<generator name>/seed_generator_state".
_SEED_STATE = "seed_generator_state"


def model_variables(model):
    """Every variable of `model` (weights and the dropout seed states) keyed by its path, for
    `tf.train.Checkpoint(model_variables=...)`: Keras 3 models are not tracked by
    `tf.train.Checkpoint` themselves.

    Keras names a seed generator after a count of those the process made before it
    (`seed_generator_43`), so a seed state is keyed by its place among the model's instead
    (`seed_generator`, `seed_generator_1`, ...: the names the first model of a new process
    gets): the keys of a model do not depend on what its process built before.

    >>> import kerasbert
    >>> config = kerasbert.EncoderConfig("bert", vocab_size=50, hidden_size=8, num_layers=1,
    ...                                  num_heads=2, intermediate_size=16, max_positions=8)
    >>> first, later = (kerasbert.models.build_encoder(config) for _ in range(2))
    >>> list(model_variables(later)) == list(model_variables(first))
    True
    >>> [key for key in model_variables(later) if _SEED_STATE in key][:2]
    ['seed_generator.seed_generator_state', 'seed_generator_1.seed_generator_state']
    """
    variables, seed_states = {}, 0
    for variable in model.variables:
        key = variable.path.replace("/", ".")
        if variable.path.endswith("/" + _SEED_STATE):
            key = "seed_generator" + (f"_{seed_states}" if seed_states else "") + "." + _SEED_STATE
            seed_states += 1
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
