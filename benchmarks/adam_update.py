"""The Adam weight update alone: `kerasbert.training.Adam` (one fused kernel per variable)
against `keras.optimizers.Adam`, on the weights of a BERT model.

Builds, in one process on CPU, the encoder of `--preset` (default "bert_base_uncased", 110M
weights, random initialization) and one random dense gradient per weight, then times each
optimizer's `apply` of those gradients inside one `tf.function` (what `fit` runs after the
backward pass): `--warmup` calls (tracing), then `--steps` timed calls, each ended by reading
one weight back; prints the median milliseconds per update and the ratio (Keras' over ours).
Nothing else of a training step is timed. The exit status is non-zero only on errors.

Run from the repository root:

    python benchmarks/adam_update.py                     # BERT-base, ~1 minute
    python benchmarks/adam_update.py --preset bert_mini_uncased --steps 5
    python benchmarks/adam_update.py --smoke             # 2 layers, hidden 32, 1 step: runs?
"""

import argparse
import os
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

import kerasbert
from reporting import SMOKE_HELP, SMOKE_SHAPE, format_table, smoke_banner


def median_update_seconds(optimizer, variables, gradients, warmup, steps):
    """Median seconds of `optimizer.apply(gradients, variables)` in a `tf.function`."""
    optimizer.build(variables)
    update = tf.function(lambda: optimizer.apply(gradients, variables))
    for _ in range(warmup):
        update()
        variables[0].numpy()
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        update()
        variables[0].numpy()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bert_base_uncased")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    arguments = parser.parse_args()
    overrides = {}
    if arguments.smoke:
        print(smoke_banner())
        arguments.warmup, arguments.steps, overrides = 1, 1, SMOKE_SHAPE
    keras.utils.set_random_seed(0)
    encoder = kerasbert.zoo.build(arguments.preset, **overrides)
    rng = np.random.default_rng(0)
    gradients = [tf.constant(rng.normal(0, 1e-3, variable.shape).astype("float32"))
                 for variable in encoder.trainable_variables]
    weights = sum(int(np.prod(variable.shape)) for variable in encoder.trainable_variables)
    shape = "".join(f", {name}={value}" for name, value in overrides.items())
    print(f"{arguments.preset}{shape} encoder: {weights:,} weights in "
          f"{len(encoder.trainable_variables)} variables; TensorFlow {tf.__version__}, Keras "
          f"{keras.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    rows, results = [], {}
    for name, optimizer in (("keras.optimizers.Adam", keras.optimizers.Adam(1e-4)),
                            ("kerasbert.training.Adam", kerasbert.training.Adam(1e-4))):
        variables = [keras.Variable(variable.numpy()) for variable in encoder.trainable_variables]
        results[name] = median_update_seconds(optimizer, variables, gradients,
                                              arguments.warmup, arguments.steps)
        rows.append([name, f"{1000 * results[name]:.1f}"])
    print(format_table(["optimizer", "median ms per update"], rows, arguments.markdown))
    print(f"keras.optimizers.Adam / kerasbert.training.Adam: "
          f"{results['keras.optimizers.Adam'] / results['kerasbert.training.Adam']:.2f}x "
          f"(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
