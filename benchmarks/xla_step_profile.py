"""Where an XLA-compiled float32 fine-tuning step spends its time, kerasbert against keras-hub,
by kind of work: matrix products, the optimizer's update, dropout, LayerNorm, attention's
softmax and reshapes, the feed-forward bias and GELU, and the rest.

In one process on CPU, for each of kerasbert's classifier and keras-hub's `BertTextClassifier`
(the models, AdamW settings and synthetic batch of `finetune_throughput.py`, random weights):
1. the model's `train_step` is compiled whole by XLA (`tf.function(jit_compile=True)`, as
   `fit` does under `jit_compile=True`), run `--warmup` times untimed, then `--steps` times,
   each ended by reading the loss (median wall-clock seconds per step);
2. `--steps` more steps run under TensorFlow's profiler. XLA:CPU records each operation of the
   compiled step (a "thunk": a matrix product, a fused element-wise loop, a random-number
   call, ...) with its duration; the optimized HLO of the same step
   (`experimental_get_compiler_ir`) names the TensorFlow op each came from, which gives its
   kind.

Seconds per step of each kind are summed over threads: XLA:CPU runs independent thunks at the
same time on the machine's cores, so the kinds add up to more than the wall-clock step. The
products are the thunks whose HLO is a `dot`, or a fusion that contains one.

Run from the repository root, on an otherwise idle machine:

    python benchmarks/xla_step_profile.py              # ~90 s: BERT-base, batch 8 x 128
    python benchmarks/xla_step_profile.py --smoke      # tiny model: runs?
"""

import argparse
import collections
import glob
import os
import re
import tempfile

from finetune_throughput import (build_keras_hub, build_ours,  # sets the Keras backend first
                                 keras_hub_batch, synthetic_batch)

import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

import kerasbert  # noqa: E402
from keras_timing import free_keras_models  # noqa: E402
from reporting import (SMOKE_HELP, SMOKE_SHAPE, cpu_flags, format_table,  # noqa: E402
                       median_seconds, smoke_banner)

KINDS = ("matrix products", "optimizer update (clipping, AdamW)", "dropout (masks, scaling)",
         "LayerNorm", "attention softmax, masks, head reshapes", "feed-forward bias, GELU",
         "the rest (embeddings, bias gradients, loss, copies)")
OPTIMIZER_SCOPE = re.compile(r"^(adam_?w|adam|lamb)(_\d+)?[/_]")
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%(\S+)\s*=\s*.+?\s([a-z][\w\-]*)\((.*)$")
COMPUTATION = re.compile(r"^(ENTRY\s+)?%(\S+)\s.*\{\s*$")
CALLED = re.compile(r"(?:calls|to_apply)=%([^\s,}]+)")


def kind_of(opcodes, metadata, computation_names):
    """The kind of work (see `KINDS`) of one compiled instruction, from the opcodes it runs
    (its own and its called computations') and the TensorFlow ops they came from (their
    `op_type` / `op_name` metadata). An instruction without any `op_name` (a reduction XLA
    split into a fused window, for one) is named by the computations it calls: XLA names a
    reduction's computation after its op. Those names are only a fallback, because XLA shares
    one computation between identical reductions of different ops."""
    if "dot" in opcodes:
        return KINDS[0]
    op_types = set(re.findall(r'op_type="([^"]*)"', metadata))
    op_names = [name.lower() for name in re.findall(r'op_name="([^"]*)"', metadata)]
    op_names = op_names or [name.lower() for name in computation_names]

    def named(*parts):
        return any(part in name for name in op_names for part in parts)

    if any(OPTIMIZER_SCOPE.match(name) for name in op_names):
        return KINDS[1]
    if named("dropout") or any(op.startswith("StatelessRandom") for op in op_types):
        return KINDS[2]
    if named("layer_norm", "layernorm"):
        return KINDS[3]
    if named("intermediate", "gelu") or op_types & {"Erf", "Tanh"}:
        return KINDS[5]
    if named("attention"):
        return KINDS[4]
    return KINDS[6]


def parse_computations(hlo_text):
    """{computation name ("ENTRY" for the entry one): [(instruction, opcode, rest of line)]}."""
    computations, current = {}, None
    for line in hlo_text.splitlines():
        header = COMPUTATION.match(line)
        if header:
            current = computations.setdefault("ENTRY" if header.group(1) else header.group(2),
                                              [])
        elif line.startswith("}"):
            current = None
        elif current is not None:
            instruction = INSTRUCTION.match(line)
            if instruction:
                current.append(instruction.groups())
    return computations


def entry_kinds(hlo_text):
    """{instruction name: kind} for the instructions of the HLO module's entry computation:
    the thunks XLA:CPU runs and the profiler records (nested computations' instructions run
    inside their caller's thunk, so they are not counted twice). A call or fusion is judged
    with everything it calls (products if any of that is a `dot`)."""
    computations = parse_computations(hlo_text)
    kinds = {}
    for instruction, opcode, rest in computations["ENTRY"]:
        opcodes, metadata, called_names = {opcode}, [rest], []
        pending = CALLED.findall(rest)
        while pending:
            called = pending.pop()
            if called in called_names:
                continue
            called_names.append(called)
            for _, inner_opcode, inner_rest in computations.get(called, ()):
                opcodes.add(inner_opcode)
                metadata.append(inner_rest)
                pending.extend(CALLED.findall(inner_rest))
        kinds[instruction] = kind_of(opcodes, "\n".join(metadata), called_names)
    return kinds


def event_seconds(logdir):
    """{event name: seconds summed over every thread} of the profile written under `logdir`."""
    seconds = collections.Counter()
    for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as file:
            space.ParseFromString(file.read())
        for plane in space.planes:
            names = {key: metadata.name for key, metadata in plane.event_metadata.items()}
            for line in plane.lines:
                for event in line.events:
                    seconds[names.get(event.metadata_id, "")] += event.duration_ps * 1e-12
    return seconds


def profile_step(model, data, warmup, steps):
    """`(median wall seconds per step, {kind: thunk seconds per step})` of `model.train_step`
    compiled by XLA on `data`."""
    model.optimizer.build(model.trainable_variables)
    step = tf.function(lambda batch: model.train_step(batch)["loss"], jit_compile=True)
    wall = median_seconds(lambda batch: float(step(batch)), data, steps, warmup)
    kinds = entry_kinds(step.experimental_get_compiler_ir(data)(stage="optimized_hlo"))
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(steps):
            float(step(data))
        tf.profiler.experimental.stop()
        seconds = event_seconds(logdir)
    per_kind = collections.Counter()
    for name, kind in kinds.items():
        per_kind[kind] += seconds.get(name, 0.0) / steps
    if not any(per_kind.values()):
        raise RuntimeError("the profile recorded none of the compiled step's operations; "
                           "is XLA:CPU's profiling (--xla_cpu_enable_xprof_traceme) off in "
                           "XLA_FLAGS?")
    return wall, per_kind


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bert_base_uncased")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3, help="timed and profiled steps each")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    config = kerasbert.zoo.get_config(args.preset)
    if args.smoke:
        print(smoke_banner())
        args.batch_size, args.steps, args.warmup = 2, 1, 1
        config = config.replace(**SMOKE_SHAPE)
    batch = synthetic_batch(config, "classification", args.batch_size)
    total_steps = args.warmup + 2 * args.steps
    runs = {}
    for name, build, data in (
            ("kerasbert", lambda: build_ours(config, "classification", True, total_steps), batch),
            ("keras-hub", lambda: build_keras_hub(config, True, total_steps),
             keras_hub_batch(batch))):
        print(f"  {name} ...", flush=True)
        runs[name] = profile_step(build(), data, args.warmup, args.steps)
        free_keras_models()
    print(f"XLA-compiled float32 fine-tuning step ({args.preset}, classification, batch "
          f"{args.batch_size} x 128; {os.cpu_count()} cores, CPU flags: {cpu_flags()}); "
          f"seconds per step, the kinds summed over threads")
    rows = [[kind] + [f"{runs[name][1][kind]:.3f}" for name in runs] for kind in KINDS]
    rows.append(["all operations, summed over threads"] +
                [f"{sum(runs[name][1].values()):.3f}" for name in runs])
    rows.append([f"the step, wall clock (median of {args.steps})"] +
                [f"{runs[name][0]:.3f}" for name in runs])
    print(format_table(["kind of work", *runs], rows, markdown=args.markdown))
    ours, hub = runs["kerasbert"][1], runs["keras-hub"][1]
    print(f"everything but the products: kerasbert {sum(ours.values()) - ours[KINDS[0]]:.3f} s, "
          f"keras-hub {sum(hub.values()) - hub[KINDS[0]]:.3f} s; keras-hub's step / ours: "
          f"{runs['keras-hub'][0] / runs['kerasbert'][0]:.2f}x")


if __name__ == "__main__":
    main()
