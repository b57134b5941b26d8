"""The float32 matrix products of a BERT fine-tuning step: TensorFlow's own kernels (oneDNN)
against XLA:CPU's, what sets the floor of the float32 XLA step.

Times, in one process on CPU, each product of one BERT-base layer's training step at batch 8 x
128 (1,024 rows; hidden 768, feed-forward 3,072): the forward products, and the two products
of each one's backward pass (the gradient of the input and of the weight), all float32. Each
product runs `--repeats` times inside one `tf.function`, once as a TensorFlow graph (with
oneDNN on, TensorFlow's default on x86) and once compiled with `jit_compile=True` (XLA:CPU);
the time is the best of `--calls` calls after one untimed call, ended by reading a scalar back.
Prints GFLOP/s per product and per runner, and both rates over the layer's weight products
together (each attention projection counted 4 times: query, key, value, output; the attention
scores' own products are left out). The exit status is non-zero only on errors.

`XLA_FLAGS` in the environment reaches XLA:CPU as usual, so the same script measures XLA's
experimental library paths, e.g.
`XLA_FLAGS="--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_fusion_type=dot"`.

Run from the repository root, on an otherwise idle machine:

    python benchmarks/xla_matmul.py              # ~30 s
    python benchmarks/xla_matmul.py --smoke      # hidden 32: runs?
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # hide TensorFlow's INFO logs and warnings

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from reporting import (SMOKE_HELP, SMOKE_SHAPE, best_seconds, cpu_flags, format_table,  # noqa: E402
                       smoke_banner)

ROWS, HIDDEN, INTERMEDIATE = 8 * 128, 768, 3072


def layer_products(rows, hidden, intermediate):
    """`{name: (count per layer, (left shape, right shape, transpose_a, transpose_b))}`: one
    transformer layer's forward weight products and the two backward products of each (input
    and weight gradients)."""
    forward = {"attention projection": (4, hidden, hidden),
               "feed-forward in": (1, hidden, intermediate),
               "feed-forward out": (1, intermediate, hidden)}
    products = {}
    for name, (count, inner, outer) in forward.items():
        products[f"{name}, forward"] = (count, ((rows, inner), (inner, outer), False, False))
        products[f"{name}, input gradient"] = (count, ((rows, outer), (inner, outer), False,
                                                       True))
        products[f"{name}, weight gradient"] = (count, ((rows, inner), (rows, outer), True,
                                                        False))
    return products


def product_seconds(shapes, repeats, calls, jit_compile):
    """Best seconds of `repeats` float32 products of `shapes` in one `tf.function` call."""
    left_shape, right_shape, transpose_a, transpose_b = shapes
    rng = np.random.default_rng(0)
    lefts = [tf.constant(rng.standard_normal(left_shape, np.float32)) for _ in range(repeats)]
    right = tf.constant(rng.standard_normal(right_shape, np.float32))

    @tf.function(jit_compile=jit_compile)
    def products(lefts, right):
        return tf.add_n([tf.reduce_sum(tf.matmul(left, right, transpose_a=transpose_a,
                                                 transpose_b=transpose_b)) for left in lefts])

    return best_seconds(lambda: products(lefts, right).numpy(), calls)


def flops(shapes):
    """Multiply-adds x 2 of one product."""
    (left_rows, left_columns), (right_rows, right_columns), transpose_a, transpose_b = shapes
    rows = left_columns if transpose_a else left_rows
    inner = left_rows if transpose_a else left_columns
    columns = right_rows if transpose_b else right_columns
    return 2 * rows * inner * columns


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=4, help="products per timed call")
    parser.add_argument("--calls", type=int, default=5, help="timed calls (the best counts)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    rows, hidden, intermediate = ROWS, HIDDEN, INTERMEDIATE
    if args.smoke:
        print(smoke_banner())
        rows, hidden = 64, SMOKE_SHAPE["hidden_size"]
        intermediate = SMOKE_SHAPE["intermediate_size"]
        args.repeats, args.calls = 1, 1
    if min(args.repeats, args.calls) < 1:
        parser.error("--repeats and --calls must be at least 1")

    table, total_work, totals = [], 0, {False: 0.0, True: 0.0}
    for name, (count, shapes) in layer_products(rows, hidden, intermediate).items():
        work = flops(shapes) * args.repeats
        seconds = {jit: product_seconds(shapes, args.repeats, args.calls, jit)
                   for jit in (False, True)}
        total_work += count * work
        for jit, value in seconds.items():
            totals[jit] += count * value
        table.append([f"{name} (x{count})", f"{work / args.repeats / 1e9:.2f}",
                      f"{work / seconds[False] / 1e9:.1f}", f"{work / seconds[True] / 1e9:.1f}",
                      f"{seconds[False] / seconds[True]:.2f}x"])
    table.append(["the layer's weight products", f"{total_work / args.repeats / 1e9:.2f}",
                  f"{total_work / totals[False] / 1e9:.1f}",
                  f"{total_work / totals[True] / 1e9:.1f}",
                  f"{totals[False] / totals[True]:.2f}x"])

    print(f"float32 products of one BERT layer's training step, {rows} rows, hidden {hidden}, "
          f"feed-forward {intermediate}; tensorflow {tf.__version__}, {os.cpu_count()} cores, "
          f"CPU flags: {cpu_flags()}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}.")
    print(f"Best of {args.calls} calls of {args.repeats} products each, after one untimed call.")
    print()
    print(format_table(["product", "GFLOP", "TensorFlow GFLOP/s", "XLA:CPU GFLOP/s",
                        "XLA / TensorFlow"], table, args.markdown))


if __name__ == "__main__":
    main()
