"""Fixtures shared by the training tests: one tiny BERT pretrained on the shipped corpus.

Pretraining it takes minutes on two cores, so it is trained once per session and saved as
`.keras`; `tests/training/test_learning.py` judges its pretraining on the held-out shard and
`tests/training/test_finetune_learning.py` fine-tunes fresh copies of it.
"""

import keras
import pytest

import kerasbert
from kerasbert.training import create_optimizer
from tests.helpers import (PRETRAINING_LEARNING_RATE, PRETRAINING_SEED, PRETRAINING_STEPS,
                           demo_pretraining_dataset, demo_wordpiece_tokenizer, tiny_demo_config)

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
                                             num_warmup_steps=PRETRAINING_STEPS // 10))
    model.fit(demo_pretraining_dataset(demo_tokenizer, "nsp", held_out=False),
              steps_per_epoch=PRETRAINING_STEPS, epochs=1, verbose=0)
    path = tmp_path_factory.mktemp("pretrained_tiny_bert") / "pretraining_model.keras"
    model.save(path)
    return path
