"""Pretraining throughput of `fit`: kerasbert `PretrainingModel` vs keras-hub `BertMaskedLM`.

Trains, in one process on CPU, randomly initialized BERT models at sequence
length 128 with 20 masked-LM predictions per sequence, on one synthetic batch
repeated (`tf.data.Dataset.from_tensors(batch).repeat()`: random token ids, two
segments, no padding, 20 distinct masked positions with weight 1, random
next-sentence labels), with Adam at a learning rate of 1e-4: each package's own
Adam, `kerasbert.training.Adam` (Keras' Adam computed by one fused kernel per
variable) for kerasbert, `keras.optimizers.Adam` for keras-hub:

- kerasbert: `kerasbert.models.build_pretraining_model(config)` for the
  presets "bert_mini_uncased" (4 layers, hidden 256) and "bert_base_uncased"
  (12 layers, hidden 768): heads MLM + NSP, compiled with its default losses
  and metrics, batches given to `fit` as the pretraining-data dicts; once with
  the default `jit_compile` ("auto", which Keras resolves to no XLA on a
  CPU-only machine) and once with `jit_compile=True` (XLA). The faster of the
  two is "ours". Without an RTD head its last layer runs only at [CLS] and the
  masked positions (`Encoder.outputs_at_positions`). Also with MLM only
  (`PretrainingModel(build_encoder(config), heads=("mlm",))`), in ours' mode.
- keras-hub: `BertBackbone` of the same shape + `BertMaskedLM(backbone,
  preprocessor=None)`, compiled with its own default loss and weighted metric
  (`SparseCategoricalCrossentropy(from_logits=True)`, `SparseCategoricalAccuracy`)
  and the same optimizer; inputs `token_ids`, `segment_ids`, `padding_mask`,
  `mask_positions`, labels the masked ids, sample weights the masked-LM
  weights; with the default `jit_compile` and with XLA. keras-hub's
  `BertMaskedLM` has no NSP head, so it trains MLM only: the MLM-only
  kerasbert row is the like-for-like comparison.

Each run first calls `fit` for the warm-up steps (tracing, and XLA compilation,
happen there; its wall-clock time is reported), then `fit(dataset,
steps_per_epoch=N, epochs=1)`; a callback reads the loss at the end of every
step (so the step has finished) and times each step; the median step time
gives steps/s and tokens/s (batch x 128 / s). The median keeps a burst of load
from other processes on a shared machine out of the figure; the load average is
printed before and after.

Targets: ours (MLM + NSP, faster mode) at least 1.2x the tokens/s of keras-hub
(its faster mode) for both shapes; and for BERT-base, training FLOP/s at least
50% of this machine's float32 matmul rate, measured in the same process as the
best of several timings of 2048 x 2048 `tf.matmul`s (2 n^3 FLOPs each), before
and after the training runs (the better of the two: load from other processes
only lowers it).
Training FLOPs per token (only matrix products; embedding lookups, softmax,
layer norm and the optimizer are not counted):

    6 x [L (4 H^2 + 2 H I) + (P / S)(H^2 + H V) + (H^2 + 2 H) / S] + 12 L S H

for L layers, hidden H, intermediate I, vocabulary V, sequence S, P masked
predictions per sequence: per-token weights of the attention projections and
feed-forward, the MLM transform and tied decoder applied to P of S tokens, the
pooler and NSP head once per sequence, times 6 (2 forward + 4 backward FLOPs per
weight and token); plus attention scores and weighted sum, 2 x 2 S H FLOPs per
token and layer forward, x 3 for training. The exit status is non-zero only on
errors, never on a missed target.

Precision (`--precisions`): every run under each dtype policy given, float32 and/or
`mixed_bfloat16` (`keras.config.set_dtype_policy` before the model is built: float32
variables, bfloat16 compute); rows under `mixed_bfloat16` say so. With both, the targets add:
ours' bfloat16 step (faster mode) >= 1.7x ours' float32 step, and >= 1.1x keras-hub's
bfloat16 step (its faster mode). `--no_xla` leaves out the XLA rows (XLA's CPU code does not
use the bfloat16 units: a bfloat16 step under XLA is slower than float32 on a CPU).

Run from the repository root:

    python benchmarks/pretrain_throughput.py                   # both shapes, ~11 minutes
    python benchmarks/pretrain_throughput.py --quick           # 2 timed steps per run
    python benchmarks/pretrain_throughput.py --smoke           # tiny model, float32, no XLA: runs?
    python benchmarks/pretrain_throughput.py --presets bert_base_uncased --no_xla --steps 3 \
        --precisions float32 mixed_bfloat16                     # the bfloat16 table
    python benchmarks/pretrain_throughput.py --presets bert_mini_uncased --steps 30 --markdown
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # hide TensorFlow's INFO logs and warnings

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.bfloat16 import cpu_bfloat16_flags  # noqa: E402

from keras_timing import fit_throughput, free_keras_models  # noqa: E402
from reporting import best_seconds, check_line, format_table, smoke_banner  # noqa: E402

SEQ_LENGTH, PREDICTIONS = 128, 20
LEARNING_RATE = 1e-4
PRESETS = ("bert_mini_uncased", "bert_base_uncased")
SMOKE_PRESET = "bert_tiny_uncased"
DEFAULT_BATCH = {"bert_mini_uncased": 32, "bert_base_uncased": 8, SMOKE_PRESET: 2}
DEFAULT_STEPS = {"bert_mini_uncased": 6, "bert_base_uncased": 4, SMOKE_PRESET: 2}
PRECISIONS = ("float32", "mixed_bfloat16")
BF16_STEP_TARGET, BF16_HUB_TARGET = 1.7, 1.1
FLOPS_PRESET = "bert_base_uncased"
WARMUP = 1
SPEEDUP_TARGET, MATMUL_FRACTION_TARGET = 1.2, 0.5
MATMUL_SIZE, MATMULS_PER_CALL, MATMUL_REPEATS = 2048, 4, 5
SMOKE_MATMUL_SIZE = 256
OURS, OURS_XLA, OURS_MLM = "kerasbert MLM+NSP", "kerasbert MLM+NSP XLA", "kerasbert MLM only"
HUB, HUB_XLA = "keras-hub MLM", "keras-hub MLM XLA"


def row_name(name, precision):
    return name if precision == "float32" else f"{name} {precision}"


def synthetic_batch(config, batch, seed=0):
    """One pretraining batch as numpy arrays, keyed as kerasbert's pretraining data.

    Every token is real (padding mask all ones), the second half of each
    sequence is segment 1, and each sequence has `PREDICTIONS` distinct masked
    positions (never the first or last token) with weight 1.
    """
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, config.vocab_size, size=(batch, SEQ_LENGTH), dtype=np.int32)
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, SEQ_LENGTH // 2:] = 1
    positions = np.sort(np.stack([rng.choice(np.arange(1, SEQ_LENGTH - 1), PREDICTIONS,
                                             replace=False) for _ in range(batch)]), axis=1)
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": np.ones_like(token_ids),
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": rng.integers(1, config.vocab_size, size=(batch, PREDICTIONS),
                                      dtype=np.int32),
        "masked_lm_weights": np.ones((batch, PREDICTIONS), np.float32),
        "next_sentence_labels": rng.integers(0, 2, size=(batch,), dtype=np.int32),
    }


def keras_hub_batch(batch):
    """The same batch as keras-hub's `BertMaskedLM` takes it: `(inputs, labels, weights)`."""
    inputs = {"token_ids": batch["token_ids"], "segment_ids": batch["segment_ids"],
              "padding_mask": batch["padding_mask"],
              "mask_positions": batch["masked_lm_positions"]}
    return inputs, batch["masked_lm_ids"], batch["masked_lm_weights"]


def build_ours(config, heads, jit_compile):
    model = (kerasbert.models.build_pretraining_model(config) if heads == ("mlm", "nsp") else
             kerasbert.models.PretrainingModel(kerasbert.models.build_encoder(config), heads=heads))
    model.compile(optimizer=kerasbert.training.Adam(LEARNING_RATE), jit_compile=jit_compile)
    return model


def build_keras_hub(config, jit_compile):
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.dropout,
        max_sequence_length=config.max_positions, num_segments=config.type_vocab_size)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), jit_compile=jit_compile)
    return model


def run(name, build, batch, warmup, steps):
    print(f"  {name} ...", file=sys.stderr, flush=True)
    model = build()
    params = model.count_params()
    result = (*fit_throughput(model, batch, warmup, steps), params)
    del model
    free_keras_models()
    return result


def measure_preset(preset, batch_size, warmup, steps, precision="float32", xla=True):
    """`{row name: (warm-up s, s per step, parameters)}` for one preset under the dtype policy
    `precision` (without the XLA rows unless `xla`), ours' row name and keras-hub's fastest."""
    config = kerasbert.zoo.get_config(preset)
    batch = synthetic_batch(config, batch_size)
    hub_batch = keras_hub_batch(batch)
    print(f"{preset}, batch {batch_size}, {precision}:", file=sys.stderr, flush=True)
    keras.config.set_dtype_policy(precision)
    jits = {OURS: "auto", OURS_XLA: True} if xla else {OURS: "auto"}
    results = {row_name(name, precision): run(
        row_name(name, precision), lambda: build_ours(config, ("mlm", "nsp"), jit), batch,
        warmup, steps) for name, jit in jits.items()}
    ours = min(results, key=lambda name: results[name][1])
    mlm_jit = True if ours == row_name(OURS_XLA, precision) else "auto"
    results[row_name(OURS_MLM, precision)] = run(
        f"{row_name(OURS_MLM, precision)} ({'XLA' if mlm_jit is True else 'default'})",
        lambda: build_ours(config, ("mlm",), mlm_jit), batch, warmup, steps)
    hubs = {HUB: "auto", HUB_XLA: True} if xla else {HUB: "auto"}
    for name, jit in hubs.items():
        results[row_name(name, precision)] = run(
            row_name(name, precision), lambda: build_keras_hub(config, jit), hub_batch, warmup,
            steps)
    hub = min((row_name(name, precision) for name in hubs), key=lambda name: results[name][1])
    keras.config.set_dtype_policy("float32")
    return results, ours, hub


def training_flops_per_token(config):
    """Matrix-product FLOPs to train on one token of a `SEQ_LENGTH` sequence (see module doc)."""
    layers, hidden = config.num_layers, config.hidden_size
    weights = (layers * (4 * hidden**2 + 2 * hidden * config.intermediate_size)
               + PREDICTIONS / SEQ_LENGTH * (hidden**2 + hidden * config.vocab_size)
               + (hidden**2 + 2 * hidden) / SEQ_LENGTH)
    attention = 12 * layers * SEQ_LENGTH * hidden
    return 6 * weights + attention


def matmul_flops_per_second(size=MATMUL_SIZE):
    """Best float32 `tf.matmul` rate over `MATMUL_REPEATS` calls of `MATMULS_PER_CALL` products
    of `size` x `size` matrices."""
    rng = np.random.default_rng(0)
    shape = (size, size)
    lefts = [tf.constant(rng.standard_normal(shape, np.float32)) for _ in range(MATMULS_PER_CALL)]
    right = tf.constant(rng.standard_normal(shape, np.float32))

    @tf.function
    def products(lefts, right):
        return tf.add_n([tf.reduce_sum(tf.matmul(left, right)) for left in lefts])

    best = best_seconds(lambda: products(lefts, right).numpy(), MATMUL_REPEATS)
    return MATMULS_PER_CALL * 2 * size**3 / best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", choices=PRESETS, default=list(PRESETS))
    parser.add_argument("--steps", type=int,
                        help="timed steps per run (default: 6 for BERT-mini, 4 for BERT-base)")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="warm-up steps per run")
    parser.add_argument("--quick", action="store_true", help="2 timed steps per run")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=["float32"],
                        help="dtype policies of the runs")
    parser.add_argument("--no_xla", action="store_true", help="leave out the XLA rows")
    parser.add_argument("--smoke", action="store_true",
                        help=f"that the script runs, on a tiny model in seconds: {SMOKE_PRESET}, "
                             "float32 only, no XLA rows, batch 2, 2 timed steps, a small "
                             "matmul probe")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args()
    if args.quick:
        args.steps = 2
    if args.smoke:
        args.presets, args.precisions, args.no_xla = [SMOKE_PRESET], ["float32"], True
        print(smoke_banner())
    matmul_size = SMOKE_MATMUL_SIZE if args.smoke else MATMUL_SIZE
    precisions = list(dict.fromkeys(args.precisions))

    load_before = os.getloadavg()[0]
    matmul_rate = matmul_flops_per_second(matmul_size)
    measured, rows = {}, []
    for preset in args.presets:
        for precision in precisions:
            batch_size, steps = DEFAULT_BATCH[preset], args.steps or DEFAULT_STEPS[preset]
            results, ours, hub = measure_preset(preset, batch_size, args.warmup, steps,
                                                precision, xla=not args.no_xla)
            measured[preset, precision] = results, ours, hub, batch_size
            for name, (warmup_seconds, step_seconds, params) in results.items():
                rows.append([preset, name + (" *" if name == ours else ""), str(batch_size),
                             str(steps), f"{params / 1e6:.1f}M", f"{warmup_seconds:.1f}",
                             f"{step_seconds:.3f}", f"{1 / step_seconds:.2f}",
                             f"{batch_size * SEQ_LENGTH / step_seconds:,.0f}",
                             f"{results[hub][1] / step_seconds:.2f}x"])
    matmul_rate = max(matmul_rate, matmul_flops_per_second(matmul_size))

    print(f"BERT pretraining throughput (random weights), CPU, {os.cpu_count()} cores, CPU "
          f"bfloat16 flags: {', '.join(cpu_bfloat16_flags()) or 'none'}; sequence "
          f"{SEQ_LENGTH}, {PREDICTIONS} masked predictions per sequence, Adam({LEARNING_RATE}) "
          f"(kerasbert.training.Adam for kerasbert, keras.optimizers.Adam for keras-hub), "
          f"synthetic batch repeated.")
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, keras-hub "
          f"{keras_hub.__version__}, kerasbert {kerasbert.__version__}.")
    print(f"{args.warmup} warm-up step(s) per run (tracing / XLA compilation; 'warm-up s'), then "
          f"timed steps, each ended by reading its loss; s/step is the median.")
    print(f"1-minute load average: {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
          f"(more than {os.cpu_count()}: other processes shared the cores).")
    print("XLA rows: compile(jit_compile=True); others: jit_compile='auto' (no XLA on CPU). "
          "* = ours (the faster kerasbert MLM+NSP mode); the MLM-only row uses ours' mode.")
    print("keras-hub BertMaskedLM trains MLM only; kerasbert MLM+NSP also trains the NSP head "
          "and pooler.")
    print("'vs keras-hub': keras-hub's best seconds per step (of its rows in the same "
          "precision) / this row's.")
    print()
    header = ["preset", "model", "batch", "steps", "params", "warm-up s", "s/step", "steps/s",
              "tokens/s", "vs keras-hub"]
    print(format_table(header, rows, args.markdown))
    print()
    print(f"float32 matmul rate ({MATMUL_SIZE} x {MATMUL_SIZE}, best of {MATMUL_REPEATS} before and "
          f"{MATMUL_REPEATS} after the runs): "
          f"{matmul_rate / 1e9:.1f} GFLOP/s")
    print()
    print("Targets:")
    for (preset, precision), (results, ours, hub, _) in measured.items():
        speedup = results[hub][1] / results[ours][1]
        like_for_like = results[hub][1] / results[row_name(OURS_MLM, precision)][1]
        if precision == "float32":
            default_hub = results[HUB][1] / results[ours][1]
            print(check_line(f"{preset}: ours >= {SPEEDUP_TARGET}x keras-hub tokens/s",
                             speedup >= SPEEDUP_TARGET,
                             f"{ours} vs {hub}: {speedup:.2f}x; MLM only vs {hub}: "
                             f"{like_for_like:.2f}x; {ours} vs {HUB}: {default_hub:.2f}x"))
        else:
            print(check_line(f"{preset}: ours' {precision} step >= {BF16_HUB_TARGET}x "
                             f"keras-hub's", speedup >= BF16_HUB_TARGET,
                             f"{ours} vs {hub}: {speedup:.2f}x; MLM only vs {hub}: "
                             f"{like_for_like:.2f}x"))
            if (preset, "float32") in measured:
                float32 = measured[preset, "float32"]
                ratio = float32[0][float32[1]][1] / results[ours][1]
                hub_ratio = float32[0][float32[2]][1] / results[hub][1]
                print(check_line(f"{preset}: ours' {precision} step >= {BF16_STEP_TARGET}x ours' "
                                 "float32 step", ratio >= BF16_STEP_TARGET,
                                 f"{float32[1]} / {ours} = {ratio:.2f}x (keras-hub: "
                                 f"{float32[2]} / {hub} = {hub_ratio:.2f}x)"))
    if (FLOPS_PRESET, "float32") in measured:
        results, ours, _, batch_size = measured[FLOPS_PRESET, "float32"]
        per_token = training_flops_per_token(kerasbert.zoo.get_config(FLOPS_PRESET))
        rate = per_token * batch_size * SEQ_LENGTH / results[ours][1]
        fraction = rate / matmul_rate
        print(check_line(f"{FLOPS_PRESET}: training FLOP/s >= "
                         f"{MATMUL_FRACTION_TARGET:.0%} of matmul rate",
                         fraction >= MATMUL_FRACTION_TARGET,
                         f"{per_token / 1e6:.1f} MFLOP/token x {batch_size * SEQ_LENGTH} tokens / "
                         f"{results[ours][1]:.3f} s = {rate / 1e9:.1f} GFLOP/s = {fraction:.0%} "
                         f"of {matmul_rate / 1e9:.1f} GFLOP/s"))
    else:
        print(f"{FLOPS_PRESET} not measured in float32: no FLOP/s target.")


if __name__ == "__main__":
    main()
