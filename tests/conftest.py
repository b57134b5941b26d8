"""Test-wide set-up: quiet TensorFlow logs, no hub access, two logical CPU devices for distribution
tests, and the session's one pretrained tiny BERT."""

import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# transformers' `from_pretrained` is only ever given local directories the tests wrote; offline
# mode makes any attempt to reach the Hugging Face hub fail instead of downloading.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import tensorflow as tf  # noqa: E402

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


import filelock  # noqa: E402
import pytest  # noqa: E402

from tests.helpers import demo_wordpiece_tokenizer, run_shared_folder  # noqa: E402

_REPOSITORY = Path(__file__).resolve().parent.parent

# One tiny BERT pretrained on the shipped corpus, shared by the whole session: pretraining takes
# minutes on two cores. `tests/training/test_learning.py` judges its pretraining on the held-out
# shard, `tests/training/test_finetune_learning.py` fine-tunes fresh copies of it and
# `tests/export/test_quantized_export.py` exports it.


@pytest.fixture(scope="session")
def demo_tokenizer():
    return demo_wordpiece_tokenizer()


@pytest.fixture(scope="session")
def pretrained_tiny_bert_file(tmp_path_factory):
    """A tiny BERT pretraining model (MLM + NSP) after `PRETRAINING_STEPS` steps of 32 x 64
    tokens on the training shards, AdamW 1e-3 with 10% warm-up, saved as `.keras`.

    Load a fresh copy with `keras.saving.load_model` in each test: fine-tuning one must not
    change what another test sees. Trained once per test run, in a fresh process
    (tests/pretrain_tiny_bert.py) so that it does not depend on the tests run before it: under
    pytest-xdist the first worker that needs it trains it into the run's shared temporary folder
    while holding a lock, and the other worker waits for it there.
    """
    shared = run_shared_folder(tmp_path_factory)
    path = shared / "pretrained_tiny_bert" / "pretraining_model.keras"
    with filelock.FileLock(str(shared / "pretrained_tiny_bert.lock")):
        if not path.exists():
            subprocess.run([sys.executable, "-m", "tests.pretrain_tiny_bert", str(path)],
                           cwd=_REPOSITORY, check=True)
    return path
