"""Fine-tuning throughput: kerasbert task models vs keras-hub `BertTextClassifier` vs PyTorch.

Trains, in one process on CPU, randomly initialized BERT models (kerasbert preset
`--preset`, default "bert_base_uncased": 12 layers, hidden 768) on one
synthetic batch repeated (random token ids, the second half of each sequence
segment 1, no padding; random labels, or random answer spans of at most 30
tokens), for two tasks:

- classification: sequence classification with 2 labels at sequence 128;
- qa: span question answering at sequence 384.

Every model uses the same optimizer settings: AdamW at a peak learning rate of
2e-5 on a linear warm-up (the first 10% of the run's steps) and linear decay to
0, weight decay 0.01 except on LayerNorm and bias variables, epsilon 1e-6,
gradients clipped to global norm 1.0; dropout 0.1 everywhere (training mode):

- kerasbert: `kerasbert.models.build_task_model(config, "sequence_classification",
  num_labels=2)` / `"question_answering"`, compiled with
  `kerasbert.training.create_optimizer("adamw", ...)` (fused Adam step) and the
  task model's own loss (and, for classification, accuracy), fed the task
  batch dict (`token_ids`, `segment_ids`, `padding_mask` and `labels`, or
  `start_positions` / `end_positions`) by `fit`; once with the default
  `jit_compile` ("auto", which Keras resolves to no XLA on a CPU-only machine)
  and once with `jit_compile=True` (XLA). The faster of the two is "ours".
- keras-hub (classification only: keras-hub has no span QA task):
  `BertTextClassifier(BertBackbone(...same shape...), num_classes=2,
  preprocessor=None)`, compiled with its own default loss and metric
  (`SparseCategoricalCrossentropy(from_logits=True)`, `SparseCategoricalAccuracy`)
  and stock `keras.optimizers.AdamW` with the settings above (the same
  `WarmupDecay` schedule, LayerNorm and bias excluded by the same patterns),
  fed `({"token_ids", "segment_ids", "padding_mask"}, labels)` by `fit`; with
  the default `jit_compile` and with XLA, the faster of the two counts.
- PyTorch: transformers `BertForSequenceClassification` /
  `BertForQuestionAnswering` from a `BertConfig` of the same shape, eager, in
  training mode, `torch.optim.AdamW` in its default implementation (bias and
  LayerNorm weights in a group without decay), `torch.nn.utils.clip_grad_norm_`
  and a `LambdaLR` schedule;
  one step is forward (loss from the model), backward, clip, optimizer and
  schedule step, `zero_grad`, and reading the loss. `torch.set_num_threads`
  is left at PyTorch's default (printed).

Each Keras run first calls `fit` for the warm-up steps (tracing, and XLA
compilation, happen there; its wall-clock time is reported), then
`fit(dataset, steps_per_epoch=N, epochs=1)` with a callback that times every
step, ended by reading its loss. PyTorch runs the warm-up steps, then times N
steps the same way. s/step is the median (it keeps a burst of load from other
processes out of the figure; the load average is printed before and after).
Speed ratios are the peer's s/step over ours (above 1: ours is faster).

Precision (`--precisions`): each Keras run under each dtype policy given, float32 and/or
`mixed_bfloat16` (`keras.config.set_dtype_policy` before the model is built: float32
variables, bfloat16 compute); PyTorch runs in float32 only. Under `mixed_bfloat16` the rows
say so. For classification, ours' inference is timed too: `kerasbert.models.inference_function(model)`
(its default: XLA in float32, no XLA under bfloat16 on a CPU, see `kerasbert.bfloat16`), plus
float32 with `jit_compile=False`, on the training batch, median of `--steps` calls after one
untimed call. Inference is timed first, every precision, before any training run of the
process: timed after the training runs (as this script did until 2026-11-30) the bfloat16 forward
pass ran barely faster than float32 (1.02x), where alone in a process it ran 1.69x (why is not
profiled yet).

Targets: ours >= 1.2x keras-hub (classification) and >= 1.3x PyTorch eager
(both tasks); with both precisions, for classification: ours' bfloat16 step >= 1.7x ours'
float32 step, >= 1.1x keras-hub's bfloat16 step, and ours' bfloat16 inference >= 1.6x ours'
float32 inference (each side at its faster mode). The exit status is non-zero only on errors,
never on a missed target.

Run from the repository root, on an otherwise idle machine (on 2 cores PyTorch's
OpenMP threads slow down several-fold when other processes share the cores):

    python benchmarks/finetune_throughput.py                 # BERT-base, both tasks, ~15 min
    python benchmarks/finetune_throughput.py --smoke     # tiny model, one row per framework: runs?
    python benchmarks/finetune_throughput.py --tasks classification --jit_compile auto \
        --precisions float32 mixed_bfloat16 --steps 3 --warmup 1    # the bfloat16 table
    python benchmarks/finetune_throughput.py --tasks classification --jit_compile xla --markdown
"""

import argparse
import gc
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # hide TensorFlow's INFO logs and warnings

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.bfloat16 import cpu_bfloat16_flags  # noqa: E402

from keras_timing import fit_throughput, free_keras_models  # noqa: E402
from reporting import check_line, format_table, smoke_banner  # noqa: E402

TASKS = ("classification", "qa")
KERASBERT_TASK = {"classification": "sequence_classification", "qa": "question_answering"}
SEQ_LENGTH = {"classification": 128, "qa": 384}
DEFAULT_BATCH = {"classification": 8, "qa": 4}
NUM_LABELS, MAX_ANSWER_TOKENS = 2, 30
LEARNING_RATE, WEIGHT_DECAY, EPSILON, CLIPNORM, WARMUP_FRACTION = 2e-5, 0.01, 1e-6, 1.0, 0.1
JIT_MODES = {"both": ("auto", True), "auto": ("auto",), "xla": (True,)}
OURS, HUB, PYTORCH = "kerasbert", "keras-hub", "PyTorch eager"
HUB_TARGET, PYTORCH_TARGET = 1.2, 1.3
PRECISIONS = ("float32", "mixed_bfloat16")
BF16_STEP_TARGET, BF16_HUB_TARGET, BF16_INFERENCE_TARGET = 1.7, 1.1, 1.6


def synthetic_batch(config, task, batch_size, seed=0):
    """One batch in kerasbert's task batch format, as numpy arrays.

    Random token ids (never the pad id 0), the second half of each sequence
    segment 1, no padding; `labels` in [0, NUM_LABELS) for classification,
    `start_positions` <= `end_positions` (at most `MAX_ANSWER_TOKENS` apart,
    after the first token) for QA.
    """
    seq_length = SEQ_LENGTH[task]
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, config.vocab_size, size=(batch_size, seq_length), dtype=np.int32)
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, seq_length // 2:] = 1
    batch = {"token_ids": token_ids, "segment_ids": segment_ids,
             "padding_mask": np.ones_like(token_ids)}
    if task == "classification":
        batch["labels"] = rng.integers(0, NUM_LABELS, size=(batch_size,), dtype=np.int32)
    else:
        starts = rng.integers(1, seq_length - MAX_ANSWER_TOKENS, size=(batch_size,),
                              dtype=np.int32)
        batch["start_positions"] = starts
        batch["end_positions"] = starts + rng.integers(0, MAX_ANSWER_TOKENS, size=(batch_size,),
                                                       dtype=np.int32)
    return batch


def keras_hub_batch(batch):
    """The classification batch as keras-hub's `BertTextClassifier` takes it: `(inputs, labels)`."""
    inputs = {name: batch[name] for name in ("token_ids", "segment_ids", "padding_mask")}
    return inputs, batch["labels"]


def torch_batch(batch):
    """The batch as transformers' BERT models take it: int64 tensors under their argument names."""
    names = {"token_ids": "input_ids", "segment_ids": "token_type_ids",
             "padding_mask": "attention_mask"}
    return {names.get(name, name): torch.from_numpy(values).long()
            for name, values in batch.items()}


def warmup_steps(total_steps):
    return int(WARMUP_FRACTION * total_steps)


def build_ours(config, task, jit_compile, total_steps):
    model = kerasbert.models.build_task_model(config, KERASBERT_TASK[task], num_labels=(
        NUM_LABELS if task == "classification" else None))
    optimizer = kerasbert.training.create_optimizer(
        "adamw", LEARNING_RATE, num_train_steps=total_steps,
        num_warmup_steps=warmup_steps(total_steps), weight_decay=WEIGHT_DECAY, epsilon=EPSILON,
        global_clipnorm=CLIPNORM)
    model.compile(optimizer=optimizer, jit_compile=jit_compile)
    return model


def build_keras_hub(config, jit_compile, total_steps):
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.dropout,
        max_sequence_length=config.max_positions, num_segments=config.type_vocab_size)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=NUM_LABELS,
                                                preprocessor=None, dropout=config.dropout)
    schedule = kerasbert.training.WarmupDecay(LEARNING_RATE, warmup_steps(total_steps),
                                              total_steps - warmup_steps(total_steps))
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=WEIGHT_DECAY, epsilon=EPSILON,
                                       global_clipnorm=CLIPNORM)
    optimizer.exclude_from_weight_decay(var_names=list(kerasbert.training.NO_DECAY_PATTERNS))
    model.compile(optimizer=optimizer, jit_compile=jit_compile)
    return model


def build_pytorch(config, task, total_steps):
    """`(model, optimizer, scheduler)`: a transformers BERT task model in training mode."""
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        intermediate_size=config.intermediate_size, max_position_embeddings=config.max_positions,
        type_vocab_size=config.type_vocab_size, hidden_dropout_prob=config.dropout,
        attention_probs_dropout_prob=config.attention_dropout,
        layer_norm_eps=config.layer_norm_epsilon, num_labels=NUM_LABELS)
    model_class = (transformers.BertForSequenceClassification if task == "classification" else
                   transformers.BertForQuestionAnswering)
    model = model_class(hf_config).train()
    no_decay = [parameter for name, parameter in model.named_parameters()
                if name.endswith("bias") or "LayerNorm" in name]
    no_decay_ids = {id(parameter) for parameter in no_decay}
    decay = [parameter for parameter in model.parameters() if id(parameter) not in no_decay_ids]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=LEARNING_RATE, eps=EPSILON)
    warmup = warmup_steps(total_steps)

    def rate_factor(step):
        if step < warmup:
            return step / warmup
        return max(0.0, (total_steps - step) / (total_steps - warmup))

    return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, rate_factor)


def pytorch_throughput(model, optimizer, scheduler, batch, warmup, steps):
    """`(warm-up seconds, median seconds per timed step)` of an eager PyTorch training loop."""
    def step():
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIPNORM)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        return loss.item()

    start = time.perf_counter()
    for _ in range(warmup):
        step()
    warmup_seconds = time.perf_counter() - start
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return warmup_seconds, statistics.median(seconds)


def run_keras(name, build, batch, warmup, steps):
    """`(warm-up s, s/step, parameters)` of one Keras model, freed afterwards."""
    print(f"  {name} ...", file=sys.stderr, flush=True)
    model = build()
    result = fit_throughput(model, batch, warmup, steps)
    params = model.count_params()
    del model
    free_keras_models()
    return (*result, params)


def run_pytorch(config, task, batch, warmup, steps):
    """`(warm-up s, s/step, parameters)` of the transformers model and its attention
    implementation's name."""
    print(f"  {PYTORCH} ...", file=sys.stderr, flush=True)
    model, optimizer, scheduler = build_pytorch(config, task, warmup + steps)
    result = pytorch_throughput(model, optimizer, scheduler, torch_batch(batch), warmup, steps)
    params = sum(parameter.numel() for parameter in model.parameters())
    attention = model.config._attn_implementation
    del model, optimizer, scheduler
    gc.collect()
    return (*result, params), attention


def mode_name(base, jit_compile, precision="float32"):
    name = f"{base} XLA" if jit_compile is True else f"{base} default"
    return name if precision == "float32" else f"{name} {precision}"


def inference_seconds(config, batch, calls, jit_compile="auto"):
    """Median seconds of `kerasbert.models.inference_function(model, jit_compile)` on the
    classification batch (under the global dtype policy), after one untimed call."""
    model = kerasbert.models.build_task_model(config, "sequence_classification",
                                              num_labels=NUM_LABELS)
    infer = kerasbert.models.inference_function(model, jit_compile=jit_compile)
    inputs = {name: tf.constant(batch[name]) for name in ("token_ids", "segment_ids",
                                                          "padding_mask")}
    np.asarray(infer(inputs)["logits"])
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        np.asarray(infer(inputs)["logits"])
        seconds.append(time.perf_counter() - start)
    del model, infer
    free_keras_models()
    return statistics.median(seconds)


def measure_inference(config, batch, calls, precision):
    """`{row name: s/batch}` of ours' inference under `precision`."""
    print(f"  {OURS} inference ({precision}) ...", file=sys.stderr, flush=True)
    if precision == "float32":
        return {f"{OURS} inference_function (XLA)": inference_seconds(config, batch, calls),
                f"{OURS} inference_function(jit_compile=False)": inference_seconds(
                    config, batch, calls, jit_compile=False)}
    return {f"{OURS} inference_function {precision} (no XLA on CPU)": inference_seconds(
        config, batch, calls)}


def measure_task(config, task, batch_size, warmup, steps, jit_modes, precision="float32"):
    """`{run name: (warm-up s, s/step, parameters)}`, ours' and keras-hub's fastest run names
    (keras-hub's None for QA) and PyTorch's attention implementation (None under bfloat16:
    PyTorch runs in float32 only), with the Keras models under the dtype policy `precision`."""
    batch = synthetic_batch(config, task, batch_size)
    total = warmup + steps
    print(f"{task}, seq {SEQ_LENGTH[task]}, batch {batch_size}, {precision}:", file=sys.stderr,
          flush=True)
    keras.config.set_dtype_policy(precision)
    results = {}
    for jit in jit_modes:
        name = mode_name(OURS, jit, precision)
        results[name] = run_keras(name, lambda: build_ours(config, task, jit, total), batch,
                                  warmup, steps)
    ours = min((mode_name(OURS, jit, precision) for jit in jit_modes),
               key=lambda name: results[name][1])
    hub = None
    if task == "classification":
        hub_batch = keras_hub_batch(batch)
        for jit in jit_modes:
            name = mode_name(HUB, jit, precision)
            results[name] = run_keras(name, lambda: build_keras_hub(config, jit, total),
                                      hub_batch, warmup, steps)
        hub = min((mode_name(HUB, jit, precision) for jit in jit_modes),
                  key=lambda name: results[name][1])
    keras.config.set_dtype_policy("float32")
    attention = None
    if precision == "float32":
        results[PYTORCH], attention = run_pytorch(config, task, batch, warmup, steps)
    return results, ours, hub, attention


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bert_base_uncased",
                        help="kerasbert BERT preset (bert_tiny_uncased for a quick check)")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--steps", type=int, default=10, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=2, help="untimed warm-up steps per run")
    parser.add_argument("--batch_size_classification", type=int,
                        default=DEFAULT_BATCH["classification"])
    parser.add_argument("--batch_size_qa", type=int, default=DEFAULT_BATCH["qa"])
    parser.add_argument("--jit_compile", choices=tuple(JIT_MODES), default="both",
                        help="Keras models: default jit_compile ('auto'), XLA, or both (the "
                             "faster counts)")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=["float32"],
                        help="dtype policies of the Keras runs (PyTorch: float32 only)")
    parser.add_argument("--smoke", action="store_true",
                        help="that the script runs, on a tiny model in seconds: bert_tiny_uncased "
                             "(2 layers), classification, float32, no XLA rows, batch 2, 1 "
                             "warm-up and 2 timed steps")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    args = parser.parse_args()
    if args.smoke:
        args.preset, args.tasks, args.precisions, args.jit_compile = (
            "bert_tiny_uncased", ["classification"], ["float32"], "auto")
        print(smoke_banner())
        args.steps, args.warmup, args.batch_size_classification, args.batch_size_qa = 2, 1, 2, 2
    if args.steps < 1 or args.warmup < 1:
        parser.error("--steps and --warmup must be at least 1")
    config = kerasbert.zoo.get_config(args.preset)
    if config.family != "bert":
        parser.error(f"--preset must be a BERT preset, got {args.preset} ({config.family})")
    batch_sizes = {"classification": args.batch_size_classification, "qa": args.batch_size_qa}
    jit_modes = JIT_MODES[args.jit_compile]
    precisions = list(dict.fromkeys(args.precisions))

    load_before = os.getloadavg()[0]
    inferences = {}  # precision -> {row name: s/batch}, before any training (module docstring)
    if "classification" in args.tasks:
        inference_batch = synthetic_batch(config, "classification", batch_sizes["classification"])
        for precision in precisions:
            keras.config.set_dtype_policy(precision)
            inferences[precision] = measure_inference(config, inference_batch, args.steps,
                                                      precision)
        keras.config.set_dtype_policy("float32")
    measured = {(task, precision): measure_task(config, task, batch_sizes[task], args.warmup,
                                                args.steps, jit_modes, precision)
                for task in args.tasks for precision in precisions}

    print(f"BERT fine-tuning throughput ({args.preset}, random weights), CPU, {os.cpu_count()} "
          f"cores, CPU bfloat16 flags: {', '.join(cpu_bfloat16_flags()) or 'none'}; synthetic "
          f"batch repeated, no padding; AdamW({LEARNING_RATE}, weight decay "
          f"{WEIGHT_DECAY}, epsilon {EPSILON}, global clip norm {CLIPNORM}, linear warm-up "
          f"{WARMUP_FRACTION:.0%} and decay) in every framework.")
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, keras-hub "
          f"{keras_hub.__version__}, kerasbert {kerasbert.__version__}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}.")
    attentions = sorted({attention for *_, attention in measured.values() if attention})
    print(f"TensorFlow: default thread pools (intra-op "
          f"{tf.config.threading.get_intra_op_parallelism_threads()}, inter-op "
          f"{tf.config.threading.get_inter_op_parallelism_threads()}; 0 = all cores). PyTorch: "
          f"default threads ({torch.get_num_threads()}), attention implementation "
          f"{', '.join(attentions) or 'n/a'}.")
    print(f"{args.warmup} warm-up step(s) per run (tracing / XLA compilation: 'warm-up s'), then "
          f"{args.steps} timed steps, each ended by reading its loss; s/step is the median.")
    print(f"1-minute load average: {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
          f"(more than {os.cpu_count()}: other processes shared the cores).")
    print("XLA rows: compile(jit_compile=True); default rows: jit_compile='auto' (no XLA on CPU). "
          "* = the faster mode of kerasbert or keras-hub, the one the ratios use.")
    print()
    header = ["task", "seq", "batch", "run", "params", "warm-up s", "s/step", "steps/s"]
    rows = []
    for (task, _), (results, ours, hub, _) in measured.items():
        for name, (warmup_seconds, step_seconds, params) in results.items():
            rows.append([task, str(SEQ_LENGTH[task]), str(batch_sizes[task]),
                         name + (" *" if name in (ours, hub) else ""), f"{params / 1e6:.1f}M",
                         f"{warmup_seconds:.1f}", f"{step_seconds:.3f}",
                         f"{1 / step_seconds:.2f}"])
    print(format_table(header, rows, args.markdown))
    print()
    header = ["task", "precision", "seq", "batch", "ours s/step", "keras-hub s/step",
              "PyTorch s/step", "keras-hub / ours", "PyTorch / ours"]
    rows = []
    for (task, precision), (results, ours, hub, _) in measured.items():
        ours_seconds = results[ours][1]
        hub_cells = (["n/a", "n/a"] if hub is None else
                     [f"{results[hub][1]:.3f} ({hub.split()[1]})",
                      f"{results[hub][1] / ours_seconds:.2f}x"])
        torch_cells = (["n/a", "n/a"] if PYTORCH not in results else
                       [f"{results[PYTORCH][1]:.3f}",
                        f"{results[PYTORCH][1] / ours_seconds:.2f}x"])
        rows.append([task, precision, str(SEQ_LENGTH[task]), str(batch_sizes[task]),
                     f"{ours_seconds:.3f} ({ours.split()[1]})", hub_cells[0], torch_cells[0],
                     hub_cells[1], torch_cells[1]])
    print(format_table(header, rows, args.markdown))
    if "qa" in args.tasks:
        print("keras-hub has no span QA task: n/a.")
    if "mixed_bfloat16" in precisions:
        print("PyTorch runs in float32 only: n/a under mixed_bfloat16.")
    inference = {name: seconds for times in inferences.values() for name, seconds in
                 times.items()}
    if inference:
        print()
        print(format_table(["classification inference (seq 128, batch "
                            f"{batch_sizes['classification']})", "s/batch"],
                           [[name, f"{seconds:.4f}"] for name, seconds in inference.items()],
                           args.markdown))
    both = "classification" in args.tasks and set(PRECISIONS) <= set(precisions)
    if both:
        float32, bf16 = (measured["classification", precision] for precision in PRECISIONS)
        ours_ratio = float32[0][float32[1]][1] / bf16[0][bf16[1]][1]
        hub_ratio = float32[0][float32[2]][1] / bf16[0][bf16[2]][1]
        print()
        print(f"mixed_bfloat16 speed-up of a training step, classification: ours "
              f"{ours_ratio:.2f}x ({float32[1]} / {bf16[1]}), keras-hub {hub_ratio:.2f}x "
              f"({float32[2]} / {bf16[2]}).")
    print()
    print("Targets:")
    for (task, precision), (results, ours, hub, _) in measured.items():
        if hub is not None and precision == "float32":
            ratio = results[hub][1] / results[ours][1]
            print(check_line(f"{task}: ours >= {HUB_TARGET}x keras-hub", ratio >= HUB_TARGET,
                             f"{hub} / {ours} = {ratio:.2f}x"))
        if PYTORCH in results:
            ratio = results[PYTORCH][1] / results[ours][1]
            print(check_line(f"{task}: ours >= {PYTORCH_TARGET}x PyTorch eager",
                             ratio >= PYTORCH_TARGET, f"{PYTORCH} / {ours} = {ratio:.2f}x"))
    if both:
        print(check_line(f"classification: ours' bfloat16 step >= {BF16_STEP_TARGET}x ours' "
                         "float32 step", ours_ratio >= BF16_STEP_TARGET, f"{ours_ratio:.2f}x"))
        ratio = bf16[0][bf16[2]][1] / bf16[0][bf16[1]][1]
        print(check_line(f"classification: ours' bfloat16 step >= {BF16_HUB_TARGET}x keras-hub's "
                         "bfloat16 step", ratio >= BF16_HUB_TARGET,
                         f"{bf16[2]} / {bf16[1]} = {ratio:.2f}x"))
        (float32_name, float32_seconds), (bf16_name, bf16_seconds) = (
            next(iter(inferences[precision].items())) for precision in PRECISIONS)
        ratio = float32_seconds / bf16_seconds
        print(check_line(f"classification: ours' bfloat16 inference >= {BF16_INFERENCE_TARGET}x "
                         "ours' float32", ratio >= BF16_INFERENCE_TARGET,
                         f"{float32_name} / {bf16_name} = {ratio:.2f}x"))


if __name__ == "__main__":
    main()
