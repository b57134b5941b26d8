"""Preemption: on SIGTERM every worker saves a checkpoint at the same step, then the process exits.

The training loop (`kerasbert.training.loop.train`) asks a `PreemptionWatcher` after every loop of
steps whether to stop. The agreement between workers is TensorFlow's own
`tf.distribute.experimental.PreemptionCheckpointHandler`: the worker that gets SIGTERM picks the
step after its next loop, every worker acknowledges it through the cluster's coordination
service, each saves there (the loop's own checkpoint: model, optimizer, step and data position)
and `TrainingPreempted` ends the process with status `PREEMPTED_EXIT_STATUS`. Restarted with the
same arguments, the loop resumes from that checkpoint. Under a single-worker strategy the same
happens without the cluster.

The handler's own checkpoint is not used (the loop restores, with a fallback to an older
checkpoint, before the watcher exists); only its signal agreement and exit are. SIGTERM is
watched only while the loop runs: outside it the process keeps the handler it had before.
The handler does nothing on Google Cloud CPU and TPU VMs (TensorFlow's choice).

Ctrl-C (SIGINT) is watched the same way: the loop saves at the end of its current loop of steps
and `TrainingInterrupted` (a `KeyboardInterrupt`) ends the process with status 130, the
binary's one line naming the checkpoint (`kerasbert.cli.one_line_errors`). A single worker saves
at once, without TensorFlow's handler; under several workers the handler makes every worker
save at the same step, and the others exit as if preempted (143). A second Ctrl-C before the
save stops at once (a plain `KeyboardInterrupt`; the last checkpoint is kept). A process that
ignores SIGINT (started in the background by a shell) keeps ignoring it.
"""

import contextlib
import os
import signal
import tempfile
import threading
import weakref

import tensorflow as tf

PREEMPTED_EXIT_STATUS = 143  # 128 + SIGTERM: what a shell reports for a process SIGTERM ended

# One watcher per strategy, for the strategy's lifetime.
_watchers = weakref.WeakKeyDictionary()


class TrainingPreempted(SystemExit):
    """The run got SIGTERM and saved its checkpoint at `step`: the process exits with status
    `PREEMPTED_EXIT_STATUS` (a `SystemExit`, so no traceback) and is to be restarted.

    >>> TrainingPreempted(40).code, TrainingPreempted(40).step
    (143, 40)
    """

    def __init__(self, step):
        super().__init__(PREEMPTED_EXIT_STATUS)
        self.step = step


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped the run once it had saved `checkpoint` at `step`; the binaries
    report it in one line and exit with status 130.

    >>> str(TrainingInterrupted(40, "runs/bert/ckpt-40"))
    'saved runs/bert/ckpt-40 at step 40; run the same command again to resume'
    """

    def __init__(self, step, checkpoint=None):
        super().__init__(step, checkpoint)
        self.step, self.checkpoint = step, checkpoint

    def __str__(self):
        saved = f"saved {self.checkpoint}" if self.checkpoint else "saved a checkpoint"
        return f"{saved} at step {self.step}; run the same command again to resume"


class PreemptionWatcher:
    """Agrees with the other workers on a step to save at after a SIGTERM; one per strategy
    (`preemption_watcher(strategy)`), reused by every training loop under that strategy.

    `with watcher.watching(save):` installs the SIGTERM and SIGINT handlers; `watcher.check()`
    after each loop calls `save()` (which returns the step saved) and raises `TrainingPreempted`
    (or, after Ctrl-C, `TrainingInterrupted`) once the agreed step is reached.

    >>> watcher = preemption_watcher(tf.distribute.OneDeviceStrategy("/cpu:0"))
    >>> with watcher.watching(save=lambda: 7):
    ...     watcher.check()  # no SIGTERM yet: nothing happens
    """

    def __init__(self, cluster_resolver):
        self._signalled = threading.Event()
        self._signal = None  # the first of SIGTERM and SIGINT given to the cluster's handler
        self._interrupted = False  # Ctrl-C, not yet acted on
        self._single_worker = cluster_resolver is None
        self._save = None
        self._saved_step = None
        # The handler restores from and writes to a checkpoint of its own; it gets an empty one
        # in a scratch directory (its non-chief workers also make a folder beside it).
        self._scratch = tempfile.TemporaryDirectory(prefix="kerasbert-preemption-")
        self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            cluster_resolver, tf.train.Checkpoint(), os.path.join(self._scratch.name, "unused"),
            tf.distribute.experimental.TerminationConfig(
                termination_watcher_fn=self._signalled.is_set, exit_fn=self._exit,
                save_fn=self._save_now))

    @contextlib.contextmanager
    def watching(self, save):
        """SIGTERM and SIGINT are watched (and `save` is what `check` calls) inside this block."""
        watched = [signal.SIGTERM]
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            watched.append(signal.SIGINT)
        previous = {number: signal.signal(number, self._on_signal) for number in watched}
        self._save = save
        try:
            yield self
        finally:
            self._save = None
            for number, handler in previous.items():
                signal.signal(number, handler)

    def check(self):
        """Save and raise `TrainingPreempted` (`TrainingInterrupted`) if this is the agreed step;
        else nothing."""
        if self._interrupted and self._single_worker:
            self._interrupted = False  # a notebook may train on after catching it
            raise TrainingInterrupted(self._save())
        self._handler.save_checkpoint_if_preempted()

    def _on_signal(self, signum, frame):
        del frame
        if signum == signal.SIGINT:
            if self._interrupted:
                raise KeyboardInterrupt("stopped at once by a second Ctrl-C, without saving; "
                                        "the same command resumes from the last checkpoint")
            self._interrupted = True
            if self._single_worker:
                return  # `check` saves; the cluster's handler is not told
        self._signal = self._signal or signum
        self._signalled.set()

    def _save_now(self):
        self._saved_step = self._save()

    def _exit(self):
        if self._signal == signal.SIGINT:
            raise TrainingInterrupted(self._saved_step)
        raise TrainingPreempted(self._saved_step)


def preemption_watcher(strategy):
    """The `PreemptionWatcher` of `strategy` (made on first use: TensorFlow's handler keeps its
    state in the cluster's coordination service, so a strategy has one for its lifetime)."""
    watcher = _watchers.get(strategy)
    if watcher is None:
        resolver = getattr(strategy, "cluster_resolver", None)
        if resolver is not None and not resolver.cluster_spec().as_dict():
            resolver = None  # a single worker: no cluster to agree with
        watcher = _watchers[strategy] = PreemptionWatcher(resolver)
    return watcher
