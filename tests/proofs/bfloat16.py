"""A tiny fine-tuning under `mixed_bfloat16` learns what the float32 one learns.

The recipe of tests/training/test_bfloat16.py: a 2-layer encoder (hidden 32) classifies
whether most of a sequence's non-padding tokens are below `VOCAB // 2` (lengths vary, so the
label needs attention over the masked sequence). Per seed, one set of initial weights is
fine-tuned twice with the same data and order, in float32 and under `mixed_bfloat16` (AdamW
5e-3, `EPOCHS` epochs of 2,048 examples in batches of 64), and both are scored on 1,000 dev
examples. The test's bar: dev accuracy within `BOUND` of each other (seed 0).

    .venv/bin/python -m tests.proofs.bfloat16 measure --seeds=0,1,2,3,4,5

The CPU decides what bfloat16 is here (emulated without avx512_bf16/amx_bf16): the script
prints the CPU's bfloat16 flags with the table.
"""

import argparse
import time

import tests.proofs  # noqa: F401 - one thread per op, as in the test session
import keras
import numpy as np

from kerasbert import bfloat16, zoo
from kerasbert.models import build_task_model
from kerasbert.training.optimizers import create_optimizer

VOCAB, SEQ = 32, 12
TRAIN_EXAMPLES, DEV_EXAMPLES, BATCH, EPOCHS = 2048, 1000, 64, 6
BOUND = 0.01


def tiny_classifier(seed=0):
    """A 2-layer sequence classifier (2 labels, no dropout), weights drawn under `seed`, in the
    global dtype policy."""
    keras.utils.set_random_seed(seed)
    config = zoo.get_config("bert_tiny_uncased").replace(
        num_layers=2, hidden_size=32, num_heads=2, intermediate_size=64, vocab_size=VOCAB,
        max_positions=SEQ)
    return build_task_model(config, "sequence_classification", num_labels=2, dropout=0.0)


def majority_data(count, seed):
    """(inputs, labels): label 1 where more than half the (non-padding) tokens are below
    VOCAB // 2; lengths 5 to SEQ."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, (count, SEQ)).astype("int32")
    lengths = rng.integers(5, SEQ + 1, count)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype("int32")
    ids *= mask
    low = ((ids > 0) & (ids < VOCAB // 2)).sum(axis=1)
    labels = (2 * low > lengths).astype("int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}
    return inputs, labels


def fine_tune(policy, initial_weights, seed, train, dev):
    """Fine-tune `tiny_classifier(seed)` from `initial_weights` on `train` under `policy`:
    {"accuracy" on `dev`, "losses" per epoch, "variable_dtypes", "logits_dtype", "majority"
    (the dev accuracy of always answering the more common label)}. The global policy is
    float32 again afterwards."""
    keras.config.set_dtype_policy(policy)
    try:
        model = tiny_classifier(seed)
        model.set_weights(initial_weights)
        steps = EPOCHS * TRAIN_EXAMPLES // BATCH
        model.compile(optimizer=create_optimizer("adamw", 5e-3, num_train_steps=steps,
                                                 num_warmup_steps=12))
        history = model.fit(train[0], {"logits": train[1]}, batch_size=BATCH, epochs=EPOCHS,
                            shuffle=False, verbose=0).history["loss"]
        logits = model.predict(dev[0], batch_size=250, verbose=0)["logits"]
    finally:
        keras.config.set_dtype_policy("float32")
    return {"accuracy": float(np.mean(logits.argmax(-1) == dev[1])), "losses": history,
            "variable_dtypes": {variable.dtype for variable in model.trainable_variables},
            "logits_dtype": str(logits.dtype),
            "majority": float(max(np.mean(dev[1]), 1 - np.mean(dev[1])))}


def runs(seed, policies=("float32", "mixed_bfloat16")):
    """[`fine_tune`'s result for each of `policies`], from one set of initial weights and data
    for `seed`."""
    train = majority_data(TRAIN_EXAMPLES, seed=1 + 10 * seed)
    dev = majority_data(DEV_EXAMPLES, seed=2 + 10 * seed)
    keras.config.set_dtype_policy("float32")
    initial = tiny_classifier(seed).get_weights()
    return [fine_tune(policy, initial, seed, train, dev) for policy in policies]


def _measure(seeds):
    print(f"CPU bfloat16 flags: {', '.join(bfloat16.cpu_bfloat16_flags()) or 'none (emulated)'}")
    print("seed  float32  mixed_bfloat16  difference  within bound  seconds")
    for seed in seeds:
        start = time.time()
        float32, bf16 = (result["accuracy"] for result in runs(seed))
        print(f"{seed:4d}  {float32:7.3f}  {bf16:14.3f}  {bf16 - float32:+10.3f}  "
              f"{'yes' if abs(bf16 - float32) <= BOUND else 'NO':>12}  {time.time() - start:7.0f}",
              flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("measure",))
    parser.add_argument("--seeds", type=lambda text: [int(seed) for seed in text.split(",")],
                        default=[0, 1, 2, 3, 4, 5])
    _measure(parser.parse_args().seeds)
