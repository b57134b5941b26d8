"""Surviving faults in `kerasbert-pretrain`'s training loop: SIGTERM to one of two workers on
127.0.0.1 (or to a single-worker loop) saves at an agreed step and exits 143, and the rerun ends
bit-equal to an uninterrupted run; a non-finite loss (a record whose masked-LM weight is NaN)
rolls back and skips the batch, up to --max_recoveries; an unreadable latest checkpoint falls
back to the one before; Keras `fit` under two-worker MultiWorkerMirroredStrategy."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data.tfrecords import serialize_instances, write_tfrecord
from kerasbert.training.loop import UnreadableCheckpointError, restore_latest, train
from kerasbert.training.preemption import (PREEMPTED_EXIT_STATUS, TrainingInterrupted,
                                           TrainingPreempted, preemption_watcher)
from tests.helpers import finish_processes

pytestmark = pytest.mark.slow

TIMEOUT_SECONDS = 240
SEQUENCE, PREDICTIONS, VOCABULARY, RECORDS = 16, 4, 100, 64
TINY = ["--model=bert_tiny_uncased", "--objective=nsp", "--batch_size=8",
        f"--max_seq_length={SEQUENCE}", f"--max_predictions_per_seq={PREDICTIONS}",
        f"--config_overrides=num_layers=1,hidden_size=32,num_heads=2,intermediate_size=64,"
        f"max_positions={SEQUENCE},vocab_size={VOCABULARY}", "--learning_rate=1e-3"]
# Workers: long enough that a SIGTERM after the first checkpoint lands mid-run.
WORKER_STEPS, WORKER_FLAGS = 80, ["--train_steps=80", "--checkpoint_interval=20",
                                  "--steps_per_loop=1"]


def _records(path, nan_record=None):
    """RECORDS random pretraining instances; record `nan_record`'s first masked-LM weight NaN."""
    rng = np.random.default_rng(0)
    weights = np.ones((RECORDS, PREDICTIONS), "float32")
    if nan_record is not None:
        weights[nan_record, 0] = np.nan
    write_tfrecord(str(path), serialize_instances({
        "token_ids": rng.integers(5, VOCABULARY, (RECORDS, SEQUENCE)),
        "padding_mask": np.ones((RECORDS, SEQUENCE), "int64"),
        "segment_ids": np.repeat([[0] * (SEQUENCE // 2) + [1] * (SEQUENCE // 2)], RECORDS, 0),
        "masked_lm_positions": rng.integers(1, SEQUENCE, (RECORDS, PREDICTIONS)),
        "masked_lm_ids": rng.integers(5, VOCABULARY, (RECORDS, PREDICTIONS)),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, RECORDS)}))
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("data") / "records.tfrecord")


def _environment(**extra):
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **extra}


def _pretrain(model_dir, records, *flags, tf_config=None):
    strategy = ["--strategy=multi_worker_mirrored"] if tf_config else []
    return subprocess.Popen(
        [sys.executable, "-m", "kerasbert.cli.pretrain", f"--model_dir={model_dir}",
         f"--input_files={records}", *TINY, *strategy, *flags],
        env=_environment(**({"TF_CONFIG": tf_config} if tf_config else {})),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(processes):
    """(exit status, output) of each process; a hung one fails the test."""
    return finish_processes(processes, TIMEOUT_SECONDS)


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _two_workers(model_dir, records, *flags):
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(2)]}
    return [_pretrain(model_dir, records, *flags, tf_config=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}})) for index in range(2)]


def _wait_for_checkpoint(model_dir, number, processes):
    state = model_dir / "checkpoint"
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not (state.exists() and f"ckpt-{number}\"" in state.read_text()):
        assert time.monotonic() < deadline, "no checkpoint in time"
        ended = [process for process in processes if process.poll() is not None]
        assert not ended, "a worker ended early:\n" + ended[0].communicate()[0][-3000:]
        time.sleep(0.05)


def _variables(checkpoint):
    reader = tf.train.load_checkpoint(str(checkpoint))
    return {name: reader.get_tensor(name) for name, dtype in
            reader.get_variable_to_dtype_map().items()
            if (dtype.is_floating or dtype.is_integer) and "iterator" not in name
            and not name.startswith("save_counter")}  # how many saves, not training state


def _assert_bit_equal(checkpoint, reference):
    ours, theirs = _variables(checkpoint), _variables(reference)
    assert ours.keys() == theirs.keys() and len(ours) > 20
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def _saved_step(output):
    found = re.findall(r"Preempted \(SIGTERM\): saved \S+ckpt-(\d+) at step (\d+); exiting with "
                       rf"status {PREEMPTED_EXIT_STATUS}\.", output)
    assert len(found) == 1 and found[0][0] == found[0][1], output[-3000:]
    return int(found[0][0])


# --- preemption -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def uninterrupted_two_workers(tmp_path_factory, records):
    model_dir = tmp_path_factory.mktemp("uninterrupted")
    for status, output in _finish(_two_workers(model_dir, records, *WORKER_FLAGS)):
        assert status == 0, output[-3000:]
    return model_dir


def test_sigterm_to_one_of_two_workers_saves_and_the_rerun_equals_an_uninterrupted_run(
        tmp_path, records, uninterrupted_two_workers):
    model_dir = tmp_path / "preempted"
    workers = _two_workers(model_dir, records, *WORKER_FLAGS)
    _wait_for_checkpoint(model_dir, 20, workers)
    workers[1].send_signal(signal.SIGTERM)
    results = _finish(workers)
    for status, output in results:
        assert status == PREEMPTED_EXIT_STATUS, output[-3000:]
        assert "Traceback" not in output
    saved = {_saved_step(output) for _, output in results}
    assert len(saved) == 1, f"the workers saved at different steps: {saved}"
    (step,) = saved
    assert 20 < step < WORKER_STEPS
    assert (model_dir / f"ckpt-{step}.index").exists()

    resumed = _finish(_two_workers(model_dir, records, *WORKER_FLAGS))
    for status, output in resumed:
        assert status == 0, output[-3000:]
        assert f"ckpt-{step} at step {step}" in output and "Done:" in output
    _assert_bit_equal(model_dir / f"ckpt-{WORKER_STEPS}",
                      uninterrupted_two_workers / f"ckpt-{WORKER_STEPS}")


def _one_device_regression():
    """`(strategy, model, dataset_fn)`: a one-weight regression under a one-device strategy and
    an endless dataset for `train`."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")

    def dataset_fn(context):
        return tf.data.Dataset.range(10**9).map(
            lambda index: (tf.fill([2, 3], tf.cast(index % 7, tf.float32)), tf.ones([2, 1])))
    return strategy, model, dataset_fn


def _signal_once_saved(model_dir, step, signal_number):
    """Send this process `signal_number` once `model_dir`'s checkpoint state lists `ckpt-<step>`."""
    state = model_dir / "checkpoint"
    while not (state.exists() and f'ckpt-{step}"' in state.read_text()):
        time.sleep(0.01)
    os.kill(os.getpid(), signal_number)


def test_the_loop_under_one_strategy_can_be_preempted_in_a_later_run_and_restores_sigterm(
        tmp_path):
    """A single-worker strategy, and what kerasbert-finetune does: one loop per epoch under the
    same strategy. A SIGTERM in the second loop saves and raises `TrainingPreempted` (the
    binaries' exit status 143, as the two-worker test shows); SIGTERM's handler is the old one
    after."""
    strategy, model, dataset_fn = _one_device_regression()
    before = signal.getsignal(signal.SIGTERM)
    messages = []
    train(model, strategy, dataset_fn, str(tmp_path), 5, steps_per_loop=5, progress=False,
          log=messages.append)  # the first "epoch": elements 0-4
    threading.Thread(target=_signal_once_saved, args=(tmp_path, 10, signal.SIGTERM),
                     daemon=True).start()
    with pytest.raises(TrainingPreempted) as preempted:
        train(model, strategy, dataset_fn, str(tmp_path), 10**6, steps_per_loop=1,
              checkpoint_interval=10, progress=False, log=messages.append)
    assert preempted.value.code == PREEMPTED_EXIT_STATUS and 10 < preempted.value.step < 10**6
    assert (tmp_path / f"ckpt-{preempted.value.step}.index").exists()
    assert messages[-1].strip() == (
        f"Preempted (SIGTERM): saved {tmp_path}/ckpt-{preempted.value.step} at step "
        f"{preempted.value.step}; exiting with status 143. Run the same command again to resume.")
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.fixture
def python_sigint_handler():
    """Python's own Ctrl-C handler for the test, whatever pytest was started with: a shell that
    starts pytest in the background without job control ignores SIGINT, which the watcher then
    keeps ignoring (as a binary started that way would), and nothing would stop the loop."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_saves_at_the_current_step_and_a_later_loop_trains_on(tmp_path,
                                                                      python_sigint_handler):
    """SIGINT while the loop trains (a single worker): it saves at the step it reached and raises
    `TrainingInterrupted` (a KeyboardInterrupt naming the checkpoint; the binaries exit 130 with
    that line); the handlers are the old ones after, and a later loop in the same process (a
    notebook) restores that checkpoint and trains to the end."""
    strategy, model, dataset_fn = _one_device_regression()
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    messages = []
    threading.Thread(target=_signal_once_saved, args=(tmp_path, 10, signal.SIGINT),
                     daemon=True).start()
    with pytest.raises(TrainingInterrupted) as interrupted:
        train(model, strategy, dataset_fn, str(tmp_path), 10**6, steps_per_loop=1,
              checkpoint_interval=10, progress=False, log=messages.append)
    step = interrupted.value.step
    assert isinstance(interrupted.value, KeyboardInterrupt) and 10 <= step < 10**6
    assert str(interrupted.value) == (f"saved {tmp_path}/ckpt-{step} at step {step}; run the "
                                      "same command again to resume")
    assert tf.train.latest_checkpoint(str(tmp_path)) == f"{tmp_path}/ckpt-{step}"
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    logs = train(model, strategy, dataset_fn, str(tmp_path), step + 3, steps_per_loop=1,
                 checkpoint_interval=10, progress=False, log=messages.append)
    assert logs["step"] == step + 3
    assert messages[-1] == f"Restored {tmp_path}/ckpt-{step} at step {step}"


def test_a_second_ctrl_c_stops_at_once(python_sigint_handler):
    """The first SIGINT is remembered until the loop's next check (which saves); a second one
    before that raises KeyboardInterrupt at once, without saving."""
    watcher = preemption_watcher(tf.distribute.OneDeviceStrategy("/cpu:0"))
    saved = []
    with watcher.watching(save=lambda: saved.append(3) or 3):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs: nothing raised, nothing saved yet
        assert saved == []
        with pytest.raises(KeyboardInterrupt, match="second Ctrl-C, without saving"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        assert saved == []
        with pytest.raises(TrainingInterrupted) as interrupted:
            watcher.check()
    assert saved == [3] and interrupted.value.step == 3


# --- non-finite loss ------------------------------------------------------------------------

RECOVERY_FLAGS = ["--train_steps=4", "--checkpoint_interval=2", "--steps_per_loop=2",
                  "--strategy=one_device"]


@pytest.fixture(scope="module")
def nan_records(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("nan") / "records.tfrecord", nan_record=5)


def test_a_non_finite_loss_rolls_back_skips_the_batch_and_finishes(tmp_path, nan_records):
    [(status, output)] = _finish([_pretrain(tmp_path / "run", nan_records, *RECOVERY_FLAGS,
                                            "--max_recoveries=10")])
    assert status == 0, output[-3000:]
    recoveries = re.findall(r"Recovery (\d+) of 10: the loss of step (\d+) was not finite; back "
                            r"to step (\d+), then the batch of step \2 skipped", output)
    assert len(recoveries) >= 2, output[-3000:]
    for _, bad_step, back_to in recoveries:
        assert int(back_to) < int(bad_step)
    final = _variables(tmp_path / "run" / "ckpt-4")
    assert all(np.isfinite(value).all() for value in final.values())
    # Stopping after fewer recoveries than the data needs: the one-line error names the step.
    [(status, output)] = _finish([_pretrain(tmp_path / "stops", nan_records, *RECOVERY_FLAGS,
                                            "--max_recoveries=1")])
    assert status != 0 and "Traceback" not in output
    assert re.search(r"Training stopped at step \d+: the loss is not finite .*\(1 recoveries "
                     r"done\)", output), output[-3000:]
    assert output.count("Recovery 1 of 1") == 1


# --- an unreadable checkpoint ---------------------------------------------------------------

def test_an_unreadable_latest_checkpoint_is_named_and_the_previous_one_used(tmp_path):
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(value=tf.Variable(0.0)), str(tmp_path), max_to_keep=3)
    for value in (1.0, 2.0):
        manager.checkpoint.value.assign(value)
        manager.save()
    newest = manager.latest_checkpoint
    data = tmp_path / f"{os.path.basename(newest)}.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:3])  # truncated, as by a full disk or a kill
    restored = tf.train.Checkpoint(value=tf.Variable(0.0))
    messages = []
    older = restore_latest(restored, manager, messages.append)
    assert older == manager.checkpoints[0] and float(restored.value.numpy()) == 1.0
    assert len(messages) == 1 and "\n" not in messages[0]
    assert messages[0].startswith(f"Warning: checkpoint {newest} cannot be read (")
    assert messages[0].endswith(f"using the previous one, {older}")
    data_of_older = tmp_path / f"{os.path.basename(older)}.data-00000-of-00001"
    data_of_older.write_bytes(b"")
    with pytest.raises(UnreadableCheckpointError, match=f"No checkpoint in {tmp_path} can be "
                       "read"):
        restore_latest(restored, manager, messages.append)


# --- Keras fit under two workers ------------------------------------------------------------

FIT_SCRIPT = textwrap.dedent("""
    import json, sys
    from kerasbert.training.distribute import distribute_dataset, get_strategy
    strategy = get_strategy("multi_worker_mirrored")  # before any other TensorFlow call
    import keras, numpy as np, tensorflow as tf
    from kerasbert import zoo
    from kerasbert.models.encoder import build_encoder
    from kerasbert.models.pretraining import PretrainingModel

    def batches(context):
        rng = np.random.default_rng(context.input_pipeline_id)
        size = 32
        instances = {
            "token_ids": rng.integers(5, 100, (size, 16)).astype("int32"),
            "segment_ids": np.zeros((size, 16), "int32"),
            "padding_mask": np.ones((size, 16), "int32"),
            "masked_lm_positions": rng.integers(0, 16, (size, 4)).astype("int32"),
            "masked_lm_ids": rng.integers(5, 100, (size, 4)).astype("int32"),
            "masked_lm_weights": np.ones((size, 4), "float32"),
            "next_sentence_labels": rng.integers(0, 2, (size,)).astype("int32")}
        return tf.data.Dataset.from_tensor_slices(instances).batch(
            context.get_per_replica_batch_size(8)).repeat()

    config = zoo.get_config("bert_tiny_uncased", vocab_size=100, max_positions=16, num_layers=1,
                            hidden_size=32, num_heads=2, intermediate_size=64)
    with strategy.scope():
        model = PretrainingModel(build_encoder(config), ("mlm", "nsp"))
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
    data = distribute_dataset(strategy, batches)
    history = model.fit(data, steps_per_epoch=3, epochs=1, verbose=0)
    evaluation = model.evaluate(data, steps=2, verbose=0, return_dict=True)
    predictions = model.predict(data, steps=1, verbose=0)
    with open(sys.argv[1], "w") as file:
        json.dump({"loss": history.history["loss"], "evaluation": evaluation,
                   "predicted": {name: list(value.shape) for name, value in predictions.items()},
                   "weights": [float(np.abs(weight).sum()) for weight in model.get_weights()]},
                  file)
""")


def test_keras_fit_evaluate_predict_on_two_workers(tmp_path):
    (tmp_path / "fit.py").write_text(FIT_SCRIPT)
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(2)]}
    workers = [subprocess.Popen(
        [sys.executable, str(tmp_path / "fit.py"), str(tmp_path / f"worker{index}.json")],
        env=_environment(TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}})),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for index in range(2)]
    for status, output in _finish(workers):
        assert status == 0, output[-3000:]
    results = [json.loads((tmp_path / f"worker{index}.json").read_text()) for index in range(2)]
    assert len(results[0]["loss"]) == 1 and np.isfinite(results[0]["loss"]).all()
    assert results[0]["loss"] == results[1]["loss"]  # the logged loss is reduced over workers
    assert results[0]["weights"] == results[1]["weights"]  # kept in sync
    for result in results:
        assert np.isfinite(list(result["evaluation"].values())).all()
        assert set(result["evaluation"]) >= {"loss", "mlm_logits_loss", "nsp_logits_accuracy"}
        # Keras gathers the predictions of every worker: each gets the global batch of 8.
        assert result["predicted"] == {"mlm_logits": [8, 4, 100], "nsp_logits": [8, 2]}
