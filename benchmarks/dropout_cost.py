"""What dropout costs an XLA-compiled fine-tuning step: kerasbert's ThreeFry masks vs Keras' draws.

Times, in one process on CPU, the float32 classification fine-tuning step of
`finetune_throughput.py` (same synthetic batch, AdamW settings and
`jit_compile=True`) for a randomly initialized BERT of `--preset` in three
variants:

- "ThreeFry (ours)": `kerasbert.layers.Dropout` as shipped, which inside XLA
  draws its masks with ThreeFry;
- "Keras' draws": the same layers with `keras.layers.Dropout.call`, the
  default Philox stateless draw that Keras uses;
- "no dropout": the preset with `dropout=0` and `attention_dropout=0` (the
  step without any mask, the floor both approach).

Median s/step after the warm-up steps (`keras_timing.fit_throughput`); the
ratio printed is Keras' draws' step over ours. `--smoke` runs the tiny preset
at the smoke shape (2 layers, hidden 32) for one step (its timings mean nothing).
"""

import argparse
import contextlib
import os
import sys
from unittest import mock

from finetune_throughput import build_ours, synthetic_batch  # sets the Keras backend first

import keras  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.bfloat16 import cpu_bfloat16_flags  # noqa: E402
from kerasbert.layers import Dropout  # noqa: E402
from keras_timing import fit_throughput, free_keras_models  # noqa: E402
from reporting import SMOKE_HELP, SMOKE_SHAPE, smoke_banner  # noqa: E402

VARIANTS = ("ThreeFry (ours)", "Keras' draws", "no dropout")


def variant_setup(variant, config):
    """`(config, context)` that builds and trains the variant's model."""
    if variant == "no dropout":
        return config.replace(dropout=0.0, attention_dropout=0.0), contextlib.nullcontext()
    if variant == "Keras' draws":
        return config, mock.patch.object(Dropout, "call", keras.layers.Dropout.call)
    return config, contextlib.nullcontext()


def measure(config, batch, warmup, steps):
    """{variant: median s/step}."""
    seconds = {}
    for variant in VARIANTS:
        print(f"  {variant} ...", file=sys.stderr, flush=True)
        variant_config, context = variant_setup(variant, config)
        with context:
            model = build_ours(variant_config, "classification", True, warmup + steps)
            seconds[variant] = fit_throughput(model, batch, warmup, steps)[1]
        del model
        free_keras_models()
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bert_base_uncased")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up steps per variant")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        print(smoke_banner())
        args.preset, args.batch_size, args.steps, args.warmup = "bert_tiny_uncased", 2, 1, 1
    config = kerasbert.zoo.get_config(args.preset)
    if args.smoke:
        config = config.replace(**SMOKE_SHAPE)
    batch = synthetic_batch(config, "classification", args.batch_size)
    load_before = os.getloadavg()[0]
    seconds = measure(config, batch, args.warmup, args.steps)
    print(f"Dropout in an XLA fine-tuning step ({args.preset}, float32, classification, seq 128, "
          f"batch {args.batch_size}; {os.cpu_count()} cores, CPU bfloat16 flags: "
          f"{', '.join(cpu_bfloat16_flags()) or 'none'}; load {load_before:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; median of {args.steps} steps after {args.warmup})")
    print("| dropout masks | s/step |")
    print("| --- | --- |")
    for variant in VARIANTS:
        print(f"| {variant} | {seconds[variant]:.3f} |")
    floor = seconds["no dropout"]
    print(f"Keras' draws / ours: {seconds[VARIANTS[1]] / seconds[VARIANTS[0]]:.2f}x; dropout's "
          f"share of the step: ours {1 - floor / seconds[VARIANTS[0]]:.1%}, Keras' draws "
          f"{1 - floor / seconds[VARIANTS[1]]:.1%}")


if __name__ == "__main__":
    main()
