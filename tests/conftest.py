"""Test-wide set-up: quiet TensorFlow logs, no hub access, two logical CPU devices for distribution
tests, and the session's one pretrained tiny BERT."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# transformers' `from_pretrained` is only ever given local directories the tests wrote; offline
# mode makes any attempt to reach the Hugging Face hub fail instead of downloading.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import tensorflow as tf  # noqa: E402

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


import keras  # noqa: E402
import pytest  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.training import create_optimizer  # noqa: E402
from tests.helpers import (PRETRAINING_LEARNING_RATE, PRETRAINING_SEED,  # noqa: E402
                           PRETRAINING_STEPS, STEPS_PER_EXECUTION, demo_pretraining_dataset,
                           demo_wordpiece_tokenizer, tiny_demo_config)

# One tiny BERT pretrained on the shipped corpus, shared by the whole session: pretraining takes
# minutes on two cores. `tests/training/test_learning.py` judges its pretraining on the held-out
# shard, `tests/training/test_finetune_learning.py` fine-tunes fresh copies of it and
# `tests/export/test_quantized_export.py` exports it.


@pytest.fixture(scope="session")
def demo_tokenizer():
    return demo_wordpiece_tokenizer()


@pytest.fixture(scope="session")
def pretrained_tiny_bert_file(demo_tokenizer, tmp_path_factory):
    """A tiny BERT pretraining model (MLM + NSP) after `PRETRAINING_STEPS` steps of 32 x 64
    tokens on the training shards, AdamW 1e-3 with 10% warm-up, saved as `.keras`.

    Load a fresh copy with `keras.saving.load_model` in each test: fine-tuning one must not
    change what another test sees.
    """
    keras.utils.set_random_seed(PRETRAINING_SEED)
    model = kerasbert.models.build_pretraining_model(
        tiny_demo_config("bert_tiny_uncased", demo_tokenizer))
    model.compile(optimizer=create_optimizer("adamw", PRETRAINING_LEARNING_RATE,
                                             num_train_steps=PRETRAINING_STEPS,
                                             num_warmup_steps=PRETRAINING_STEPS // 10),
                  steps_per_execution=STEPS_PER_EXECUTION)
    model.fit(demo_pretraining_dataset(demo_tokenizer, "nsp", held_out=False),
              steps_per_epoch=PRETRAINING_STEPS, epochs=1, verbose=0)
    path = tmp_path_factory.mktemp("pretrained_tiny_bert") / "pretraining_model.keras"
    model.save(path)
    return path
