"""Train the session's tiny BERT (see `pretrained_tiny_bert_file` in tests/conftest.py).

Run in a fresh process, `python -m tests.pretrain_tiny_bert OUTPUT.keras [LOCK]`, so that the
model does not depend on which tests ran before it in a pytest worker (random-generator state,
traced functions): every run of the suite trains the same model. With LOCK (a file-lock path) it
trains only if OUTPUT is still missing once it holds the lock: that is how the test session
starts it in the background while the fixture may be waiting for it. The proof scripts
(tests/proofs/) get the same model through `pretrained_file`.
"""

import os
import subprocess
import sys
from pathlib import Path

import filelock

REPOSITORY = Path(__file__).resolve().parent.parent


def command(output, lock=None):
    """The command line that trains the tiny BERT into `output` in a fresh process (run it from
    `REPOSITORY`); with `lock`, as the module's docstring says."""
    return [sys.executable, "-m", "tests.pretrain_tiny_bert", str(output),
            *([str(lock)] if lock is not None else [])]


def pretrained_file(path):
    """`path`, once it holds the tiny BERT: trained by `command` (a fresh process, under a lock
    beside it) if it is missing, so that a script sees the model the test session trains."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(path) + ".lock"):
        if not path.exists():
            subprocess.run(command(path), cwd=REPOSITORY, check=True)
    return path


def pretrain_tiny_bert(path):
    """`PRETRAINING_STEPS` steps of MLM + NSP, AdamW with 10% warm-up, saved to `path`.

    TensorFlow is imported here, not at the top: loading it takes seconds, and the lock (see
    the module's docstring) must be taken before that, as soon as the session starts us.
    """
    import keras

    import kerasbert
    from kerasbert.training import create_optimizer
    from tests.helpers import (PRETRAINING_LEARNING_RATE, PRETRAINING_SEED, PRETRAINING_STEPS,
                               STEPS_PER_EXECUTION, demo_pretraining_dataset,
                               demo_wordpiece_tokenizer, tiny_demo_config)

    tokenizer = demo_wordpiece_tokenizer()
    keras.utils.set_random_seed(PRETRAINING_SEED)
    model = kerasbert.models.build_pretraining_model(
        tiny_demo_config("bert_tiny_uncased", tokenizer))
    model.compile(optimizer=create_optimizer("adamw", PRETRAINING_LEARNING_RATE,
                                             num_train_steps=PRETRAINING_STEPS,
                                             num_warmup_steps=PRETRAINING_STEPS // 10),
                  steps_per_execution=STEPS_PER_EXECUTION)
    model.fit(demo_pretraining_dataset(tokenizer, "nsp", held_out=False),
              steps_per_epoch=PRETRAINING_STEPS, epochs=1, verbose=0)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = os.path.join(os.path.dirname(path), ".partial-" + os.path.basename(path))
    model.save(partial)  # a crash leaves no half-written model
    os.replace(partial, path)


if __name__ == "__main__":
    if len(sys.argv) > 2:
        with filelock.FileLock(sys.argv[2]):
            if not os.path.exists(sys.argv[1]):
                pretrain_tiny_bert(sys.argv[1])
    else:
        pretrain_tiny_bert(sys.argv[1])
