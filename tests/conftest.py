"""Test-wide set-up: quiet TensorFlow logs, no hub access, two logical CPU devices for distribution
tests, and the session's one pretrained tiny BERT."""

import collections
import os
import subprocess

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One thread per TensorFlow op and per PyTorch / OpenMP op, in the workers and in every process
# they start (the variables are inherited): two workers, each with op pools as wide as the
# machine, plus the background pretraining, oversubscribe the two cores (commit 68ee69d has the
# timings that showed it).
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# transformers' `from_pretrained` is only ever given local directories the tests wrote; offline
# mode makes any attempt to reach the Hugging Face hub fail instead of downloading.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# TensorFlow's GCS client reads its retry settings once, when it is imported: a request the test
# emulator (tests/gcs_emulator.py) cannot serve fails after 2 quick retries, not 10 slow ones.
os.environ.setdefault("GCS_RETRY_CONFIG_MAX_RETRIES", "2")
os.environ.setdefault("GCS_RETRY_CONFIG_INIT_DELAY_TIME_US", "10000")

import tensorflow as tf  # noqa: E402

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


import filelock  # noqa: E402
import pytest  # noqa: E402

from kerasbert.export.runtimes import KEEP_RUNNERS  # noqa: E402
from tests.helpers import demo_wordpiece_tokenizer, run_shared_folder  # noqa: E402
from tests.pretrain_tiny_bert import REPOSITORY  # noqa: E402
from tests.pretrain_tiny_bert import command as tiny_bert_command  # noqa: E402

# Every export verifies its artifacts in runner processes that never import kerasbert; kept ones
# (one per runtime and worker) pay TensorFlow's import once instead of once per export (read at
# each export, so set here). The main job (tests/test_demo.py) runs without it, as a user's
# export does.
os.environ.setdefault(KEEP_RUNNERS, "1")

# One tiny BERT pretrained on the shipped corpus, shared by the whole session: pretraining takes
# minutes on two cores. `tests/training/test_learning.py` judges its pretraining on the held-out
# shard, `tests/training/test_finetune_learning.py` fine-tunes fresh copies of it and
# `tests/export/test_quantized_export.py` exports it.


@pytest.fixture(scope="session")
def demo_tokenizer():
    return demo_wordpiece_tokenizer()


def _tiny_bert_paths(shared):
    """(model file, lock file) of the session's pretrained tiny BERT in the run's shared folder."""
    return (shared / "pretrained_tiny_bert" / "pretraining_model.keras",
            shared / "pretrained_tiny_bert.lock")


_background_training = None


def pytest_collection_modifyitems(session, config, items):
    """Order the run for two workers.

    Slow modules go first and the many quick ones last, so that the two workers end together
    (pytest.ini turns off xdist's own reordering, which puts modules with many tests first and
    so left the few-test, minutes-long modules for the end); the modules that use
    `pretrained_tiny_bert_file` go after the other slow ones, so that its pretraining, started
    in the background when the collection ends, is ready when they need it. Every worker
    collects and so orders the same items.
    """
    module_items = collections.defaultdict(list)
    for item in items:
        module_items[item.module].append(item)

    def rank(tests):
        """0: slow, without the tiny BERT; 1: slow, with it in any test; 2: quick."""
        if not any(test.get_closest_marker("slow") for test in tests):
            return 2
        return int(any("pretrained_tiny_bert_file" in test.fixturenames for test in tests))

    module_rank = {module: rank(tests) for module, tests in module_items.items()}
    items.sort(key=lambda item: module_rank[item.module])  # stable: file order within a rank


def pytest_collection_finish(session):
    """Start the tiny BERT's pretraining in the background in one process (the first worker),
    if a test that runs needs it: after `-m`/`-k` deselected theirs (`pytest -m "not slow"`
    does not pay for it), not for `--collect-only`."""
    global _background_training
    if session.config.option.collectonly or os.environ.get(
            "PYTEST_XDIST_WORKER", "gw0") != "gw0" or not any(
            "pretrained_tiny_bert_file" in item.fixturenames for item in session.items):
        return
    path, lock = _tiny_bert_paths(run_shared_folder(session.config._tmp_path_factory))
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / "background_training.log", "w") as log:
            _background_training = subprocess.Popen(
                tiny_bert_command(path, lock), cwd=REPOSITORY, stdout=log, stderr=log)


def pytest_sessionfinish(session, exitstatus):
    """Let the background pretraining finish for the other worker, unless the run was cut short."""
    if _background_training is not None and _background_training.poll() is None:
        if session.shouldstop or session.shouldfail or exitstatus == pytest.ExitCode.INTERRUPTED:
            _background_training.kill()
        _background_training.wait()


@pytest.fixture(scope="session")
def pretrained_tiny_bert_file(tmp_path_factory):
    """A tiny BERT pretraining model (MLM + NSP) after `PRETRAINING_STEPS` steps of 32 x 64
    tokens on the training shards, AdamW 1e-3 with 10% warm-up, saved as `.keras`.

    Load a fresh copy with `keras.saving.load_model` in each test: fine-tuning one must not
    change what another test sees. Trained once per test run, in a fresh process
    (tests/pretrain_tiny_bert.py) so that it does not depend on the tests run before it: the
    session starts it in the background (`pytest_collection_modifyitems`), holding a lock in
    the run's shared temporary folder; the fixture waits for that lock and, should the model
    still be missing (the background run failed), trains it itself, showing the error.
    """
    path, lock = _tiny_bert_paths(run_shared_folder(tmp_path_factory))
    if _background_training is not None:  # started by this process: let it take the lock first
        _background_training.wait()
    with filelock.FileLock(str(lock)):
        if not path.exists():
            subprocess.run(tiny_bert_command(path), cwd=REPOSITORY, check=True)
    return path
