"""Distilled students vs their teacher: latency and size of the exported TFLite and ONNX files.

Builds, in one process on CPU, three sentence classifiers (`sequence_classification`, 2
labels, random initial weights, `keras.utils.set_random_seed(SEED)`):

- the teacher: kerasbert preset `--teacher` (default "bert_base_uncased": 12 layers, hidden
  768, 110M parameters);
- DistilBERT: preset `--distilbert` (default "distilbert_base_uncased": 6 layers, no token
  types, no pooler, 66M parameters; its head is pre_classifier -> ReLU -> classifier);
- the student the distillation trainer makes: `kerasbert.training.distillation.
  student_task_model(teacher, num_layers)`, the teacher's config with half its layers,
  initialized from teacher layers (0, 2, 4, 7, 9, 11), its pooler and classifier.

`--num_layers` shrinks the teacher for a smoke run; both students then get half of it (the
DistilBERT preset too, `--student_layers` to choose). Export judges quantized files by their
decisions on real text, where a random-weight classifier's decisions can flip under
quantization (a 1-layer random-weight student agreed on 98.8%, below export's 99%). So each
model is first fitted `--fit_steps` Adam steps (batch 8, 64 tokens) on the shipped WordNet
glosses (`kerasbert.data.demo`), labelled noun (70% of them) or not, tokenized by the shipped
WordPiece vocabulary (the teacher first, then the student made from it): that moves the
decisions away from ties and does not change the work a call does. Each model is saved as `.keras`
and exported by `kerasbert-export` (`kerasbert.export.export` behind the binary users run) with
that vocabulary as `--tokenizer`, in child processes so that their memory is given back:
TFLite (`--quantize`, default float32 and dynamic int8) in one call, ONNX in another
(export_latency.py found tf2onnx's conversion of BERT-base alone peaking at ~16.5 GB).
Verification stays on as users get it (every artifact reloaded in fresh processes and compared
with Keras: float32 files within 1e-4 relative, quantized ones at >= 99% argmax agreement on
`--agreement_texts` lines of the shipped corpus's held-out shard, given as
`--calibration_data`; at least 200 when a quantized file is made, the export's own minimum).

Then, in this process, every artifact runs: TFLite through `ai_edge_litert`'s interpreter
(`num_threads=2`, signature `serving_default`), ONNX through ONNX Runtime (CPU provider,
`intra_op_num_threads=2`). Input: `--batch_size` x `--seq_length` random token ids, no padding.
Every runtime is warmed up (`--warmup` calls), then all are interleaved: `--rounds` rounds of
`--calls` calls each, the order rotating every round with a pause between runtimes
(`export_latency.interleaved_latency`), so a burst of load from other processes hits all alike.
A call includes reading the logits into numpy; ms is the median over all timed calls. Size:
the file on disk.

Printed per format: the speed-up of each student over the teacher (teacher ms / student ms)
and its size (student bytes / teacher bytes), against DistilBERT's published figures (Sanh et
al., 2019): 60% faster (1.6x, checked PASS/MISS) and 40% smaller (0.6x the parameters,
66M against 110M; printed). The exit status is non-zero only when an export fails (its
one-line error is printed above), never on a missed figure.

Run from the repository root, on an otherwise idle machine:

    python benchmarks/distillation.py                    # BERT-base: 11-26 min on 2 cores
    python benchmarks/distillation.py --num_layers 2 --rounds 2 --calls 3   # a short run
    python benchmarks/distillation.py --batch_size 8 --seq_length 256 --quantize none
    python benchmarks/distillation.py --smoke            # 2 layers, hidden 32: runs?

`--smoke` shrinks the teacher and DistilBERT to 2 layers of hidden size 32 (students: 1 layer),
exports each model once (float32 and dynamic-int8 TFLite, no ONNX; judged on 200 texts) and
times 1 call per runtime at batch 1 x 32.
"""

import argparse
import datetime
import gc
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # hide TensorFlow's INFO logs and warnings

import keras  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402
import tensorflow as tf  # noqa: E402

import kerasbert  # noqa: E402
import kerasbert.export  # noqa: E402
from kerasbert.data import demo  # noqa: E402
from kerasbert.export.cases import MIN_JUDGING_INPUTS, read_texts  # noqa: E402
from kerasbert.training.distillation import student_task_model  # noqa: E402

from export_latency import (ONNX, THREADS, TFLITE_FILES, TFLITE_ROWS,  # noqa: E402
                            interleaved_latency, onnx_runtime, path_size, report_summary,
                            tflite_runtime)
from reporting import SMOKE_HELP, SMOKE_SHAPE, check_line, format_table, smoke_banner  # noqa: E402

SEED, NUM_LABELS, TASK = 0, 2, "sequence_classification"
ONNX_FILE = "model.onnx"
# The TFLite variants timed here (full-integer int8, which calibrates on texts of its own
# besides the judged ones, is export_latency.py's).
QUANTIZE_CHOICES = ("none", "float16", "dynamic_int8")
# Sanh et al., 2019 (DistilBERT): "40% smaller" and "60% faster" than BERT-base.
PUBLISHED_SPEED_UP, PUBLISHED_SIZE = 1.6, 0.6
TEACHER, DISTILBERT, STUDENT = "teacher", "DistilBERT", "student"
# The fitting that gives the random-weight classifiers decisions export can judge.
FIT_BATCH, FIT_LENGTH, FIT_LEARNING_RATE = 8, 64, 1e-4


def noun_gloss_batches(steps):
    """`steps` batches of the shipped WordNet glosses' train split in file order, tokenized by
    the shipped WordPiece vocabulary: (encoder inputs, 1 for a noun's gloss else 0)."""
    tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    count = steps * FIT_BATCH
    with gzip.open(demo.classification_files()["train"], "rt", encoding="utf-8") as file:
        next(file)  # the header line
        rows = [line.rstrip("\n").split("\t", 1) for _, line in zip(range(count), file)]
    labels = np.array([label.startswith("noun.") for label, _ in rows], np.int32)
    inputs = {name: tensor.numpy() for name, tensor in tokenizer(
        [text for _, text in rows], max_length=FIT_LENGTH).items()}
    return inputs, labels


def fit_decisions(model, batches):
    """Fit `model` one Adam step per batch of `batches` (from `noun_gloss_batches`)."""
    inputs, labels = batches
    model.compile(optimizer=keras.optimizers.Adam(FIT_LEARNING_RATE),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(inputs, labels, batch_size=FIT_BATCH, epochs=1, shuffle=False, verbose=0)


def build_models(args, work_dir):
    """Build the three classifiers, save each as `.keras` in `work_dir` and return
    `{role: facts}` (description, layers, parameters, `.keras` path); the models are freed."""
    keras.utils.set_random_seed(SEED)
    shape = {name: value for name, value in SMOKE_SHAPE.items()
             if name != "num_layers"} if args.smoke else {}
    teacher_config = kerasbert.zoo.get_config(args.teacher, **shape, **(
        {"num_layers": args.num_layers} if args.num_layers else {}))
    student_layers = args.student_layers or max(1, teacher_config.num_layers // 2)
    batches = noun_gloss_batches(args.fit_steps)
    print(f"Fitting each model {args.fit_steps} steps ...", file=sys.stderr, flush=True)
    teacher = kerasbert.models.build_task_model(teacher_config, TASK, num_labels=NUM_LABELS)
    fit_decisions(teacher, batches)
    distilbert = kerasbert.models.build_task_model(
        kerasbert.zoo.get_config(args.distilbert, num_layers=student_layers, **shape), TASK,
        num_labels=NUM_LABELS)
    fit_decisions(distilbert, batches)
    student = student_task_model(teacher, num_layers=student_layers)
    fit_decisions(student, batches)
    models = {
        TEACHER: (teacher, f"{args.teacher}, {teacher_config.num_layers} layers"),
        DISTILBERT: (distilbert, f"{args.distilbert}, {student_layers} layers"),
        STUDENT: (student, f"{args.teacher}, {student_layers} layers (student_task_model)"),
    }
    facts = {}
    for role, (model, description) in models.items():
        path = os.path.join(work_dir, f"{role}.keras")
        print(f"Saving the {role} ({description}) to {path} ...", file=sys.stderr, flush=True)
        model.save(path)
        encoder = model.encoder
        facts[role] = {"description": description, "path": path,
                       "layers": encoder.config.num_layers,
                       "vocab_size": encoder.config.vocab_size,
                       "parameters": model.count_params(),
                       "encoder_parameters": encoder.count_params()}
    del models, teacher, distilbert, student, model, encoder
    keras.backend.clear_session()
    gc.collect()
    return facts


def export_in_child(model_path, output_dir, formats, quantize, seq_length, calibration_file):
    """`(seconds, None or what went wrong)` of one `kerasbert-export` run in a child process
    (its start-up included); its one-line error, if any, goes to stderr."""
    command = [sys.executable, "-m", "kerasbert.cli.export", f"--model={model_path}",
               f"--output_dir={output_dir}", f"--formats={','.join(formats)}",
               f"--quantize={','.join(quantize)}", f"--max_seq_length={seq_length}",
               f"--calibration_data={calibration_file}",
               f"--tokenizer={demo.vocabulary_dir('wordpiece')}"]
    start = time.perf_counter()
    completed = subprocess.run(command, stdout=sys.stderr)
    seconds = time.perf_counter() - start
    if completed.returncode == 0:
        return seconds, None
    if completed.returncode < 0:
        return seconds, (f"killed by signal {-completed.returncode}" + (
            " (SIGKILL: most likely the kernel's out-of-memory killer)"
            if completed.returncode == -9 else ""))
    return seconds, f"exit status {completed.returncode} (its error is printed above)"


def export_all(facts, args, work_dir):
    """Export every model (TFLite, then ONNX); adds `artifacts` ({runtime row: path}),
    `export_seconds` and `report` to each model's facts. False if an export failed."""
    calibration_file = os.path.join(work_dir, "agreement_texts.txt")
    with open(calibration_file, "w", encoding="utf-8") as file:
        file.write("\n".join(read_texts(count=args.agreement_texts)) + "\n")
    for role, model in facts.items():
        model["artifacts"], model["export_seconds"], reports = {}, {}, []
        for formats in args.export_calls:
            output_dir = os.path.join(work_dir, role, "+".join(formats))
            print(f"Exporting the {role} ({model['description']}): {', '.join(formats)} ...",
                  file=sys.stderr, flush=True)
            seconds, error = export_in_child(model["path"], output_dir, formats, args.quantize,
                                             args.seq_length, calibration_file)
            model["export_seconds"]["+".join(formats)] = seconds
            if error is not None:
                print(f"Export of the {role} ({model['description']}) to {', '.join(formats)} "
                      f"failed after {seconds:.0f} s: {error}")
                return False
            with open(os.path.join(output_dir, kerasbert.export.REPORT_FILE),
                      encoding="utf-8") as file:
                reports.append(json.load(file))
            if "tflite" in formats:
                for quantization in args.quantize:
                    model["artifacts"][TFLITE_ROWS[quantization]] = os.path.join(
                        output_dir, TFLITE_FILES[quantization])
            if "onnx" in formats:
                model["artifacts"][ONNX] = os.path.join(output_dir, ONNX_FILE)
        model["sizes"] = {row: path_size(path) for row, path in model["artifacts"].items()}
        model["report"] = {"artifacts": {name: entry for report in reports
                                         for name, entry in report["artifacts"].items()},
                           "versions": reports[0]["versions"]}
    return True


def latency_inputs(vocab_size, batch_size, seq_length):
    """Random token ids below `vocab_size` (none of the first 1000, where BERT's special and
    unused tokens are), segment ids 0, no padding."""
    rng = np.random.default_rng(SEED)
    shape = (batch_size, seq_length)
    return {"token_ids": rng.integers(1000, vocab_size, shape).astype(np.int32),
            "segment_ids": np.zeros(shape, np.int32),
            "padding_mask": np.ones(shape, np.int32)}


def measure(facts, args):
    """`{(role, runtime row): median seconds}` of every artifact, all loaded in this process and
    interleaved."""
    runtimes, keys = {}, {}
    for role, model in facts.items():
        for row, path in model["artifacts"].items():
            name = f"{role} {row}"
            keys[name] = (role, row)
            runtimes[name] = (onnx_runtime if row == ONNX else tflite_runtime)(path)
    inputs = latency_inputs(min(model["vocab_size"] for model in facts.values()),
                            args.batch_size, args.seq_length)
    latencies = interleaved_latency(runtimes, inputs, args.warmup, args.rounds, args.calls)
    return {keys[name]: seconds for name, seconds in latencies.items()}


def print_results(facts, args, latencies, load_before):
    teacher = facts[TEACHER]
    rows_order = list(teacher["artifacts"])
    versions = teacher["report"]["versions"]
    print(f"Distilled students vs teacher: exported sequence classifiers ({NUM_LABELS} labels, "
          f"random initial weights, seed {SEED}, fitted {args.fit_steps} steps), "
          f"batch {args.batch_size}, seq {args.seq_length}.")
    print(f"{datetime.date.today().isoformat()}, {platform.platform()}, "
          f"{platform.processor() or platform.machine()}, os.cpu_count() = {os.cpu_count()}; "
          f"python {platform.python_version()}.")
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, kerasbert "
          f"{kerasbert.__version__}, ai-edge-litert {versions.get('ai-edge-litert')}, tf2onnx "
          f"{versions.get('tf2onnx')}, onnxruntime {onnxruntime.__version__}.")
    print("Export (kerasbert-export in a child process per call, start-up included; every "
          "artifact reloaded and checked in fresh processes; "
          f"{args.agreement_texts} agreement texts): " + "; ".join(
              f"{role} " + " + ".join(f"{name} {seconds:.0f} s"
                                      for name, seconds in model["export_seconds"].items())
              for role, model in facts.items()) + ".")
    print(f"Threads: TFLite num_threads={THREADS}, ONNX Runtime intra_op_num_threads={THREADS}. "
          f"Latency: {args.warmup} warm-up calls each, then {args.rounds} interleaved rounds x "
          f"{args.calls} calls; median per call, logits read into numpy.")
    print(f"1-minute load average: {load_before:.2f} before timing, {os.getloadavg()[0]:.2f} "
          f"after (more than {os.cpu_count()}: other processes shared the cores).")
    print()
    header = ["model", "role", "layers", "parameters", "encoder parameters"]
    print(format_table(header, [[model["description"], role, str(model["layers"]),
                                 f"{model['parameters']:,}", f"{model['encoder_parameters']:,}"]
                                for role, model in facts.items()], args.markdown))
    print()
    header = ["model", "runtime", "median ms", "size MB", "speed-up vs teacher",
              "size vs teacher"]
    rows = []
    for row in rows_order:
        for role, model in facts.items():
            seconds, size = latencies[role, row], model["sizes"][row]
            teacher_seconds, teacher_size = latencies[TEACHER, row], teacher["sizes"][row]
            rows.append([role, row, f"{1000 * seconds:.1f}", f"{size / 1e6:.1f}",
                         f"{teacher_seconds / seconds:.2f}x", f"{size / teacher_size:.2f}x"])
    print(format_table(header, rows, args.markdown))
    print()
    print("Export reports (export_report.json; latency_ms: fresh process, 5 calls, batch 1, "
          "default threads):")
    for role, model in facts.items():
        print(f" {role}:")
        for line in report_summary(model["report"]):
            print(line)
    print()
    print(f"Against DistilBERT's published figures (Sanh et al., 2019: {PUBLISHED_SPEED_UP}x "
          f"faster than BERT-base, {PUBLISHED_SIZE}x its size: 66M parameters against 110M):")
    for role in (STUDENT, DISTILBERT):
        for row in rows_order:
            speed_up = latencies[TEACHER, row] / latencies[role, row]
            print(check_line(f"{role} ({facts[role]['description']}) {row} >= "
                             f"{PUBLISHED_SPEED_UP}x faster than the teacher",
                             speed_up >= PUBLISHED_SPEED_UP, f"{speed_up:.2f}x"))
    for role in (STUDENT, DISTILBERT):
        model = facts[role]
        print(f"{role}: {model['parameters'] / teacher['parameters']:.3f}x the teacher's "
              "parameters; files " + ", ".join(
                  f"{row} {model['sizes'][row] / teacher['sizes'][row]:.3f}x"
                  for row in rows_order) + f" the teacher's (published: {PUBLISHED_SIZE}x).")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    presets = kerasbert.zoo.list_presets()
    parser.add_argument("--teacher", default="bert_base_uncased", choices=presets,
                        metavar="PRESET", help="the teacher's preset")
    parser.add_argument("--distilbert", default="distilbert_base_uncased", choices=presets,
                        metavar="PRESET", help="the DistilBERT preset timed as the published "
                        "student")
    parser.add_argument("--num_layers", type=int,
                        help="override the teacher's number of layers (e.g. 2 for a smoke run)")
    parser.add_argument("--student_layers", type=int,
                        help="layers of both students (default: half the teacher's)")
    parser.add_argument("--quantize", nargs="+", choices=QUANTIZE_CHOICES,
                        default=["none", "dynamic_int8"], help="TFLite variants to export and time")
    parser.add_argument("--batch_size", type=int, default=1, help="batch of the timed calls")
    parser.add_argument("--seq_length", type=int, default=128,
                        help="sequence length of the timed calls (and of the export's checks)")
    parser.add_argument("--agreement_texts", type=int, default=256,
                        help="corpus lines quantized files are judged on (at least "
                             f"{MIN_JUDGING_INPUTS} with a quantized file, else 10)")
    parser.add_argument("--fit_steps", type=int, default=30,
                        help="Adam steps that give each model its decisions (module docstring)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--calls", type=int, default=10, help="timed calls per runtime per round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per runtime first")
    parser.add_argument("--keep_dir", action="store_true",
                        help="keep the .keras files and exports (path printed)")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP + " (module docstring)")
    args = parser.parse_args()
    # One kerasbert-export call per format: tf2onnx's conversion of BERT-base alone peaks at
    # ~16.5 GB; a smoke run's tiny models take one call.
    args.export_calls = (("tflite",), ("onnx",))
    if args.smoke:
        print(smoke_banner())
        args.num_layers, args.student_layers = SMOKE_SHAPE["num_layers"], 1
        args.quantize = ["none", "dynamic_int8"]
        args.seq_length, args.agreement_texts = 32, MIN_JUDGING_INPUTS
        args.export_calls = (("tflite",),)
        args.warmup, args.rounds, args.calls = 1, 1, 1
    if min(args.rounds, args.calls, args.warmup, args.batch_size, args.fit_steps) < 1:
        parser.error("--rounds, --calls, --warmup, --batch_size and --fit_steps must be at "
                     "least 1")
    if args.num_layers is not None and args.num_layers < 1 or (
            args.student_layers is not None and args.student_layers < 1):
        parser.error("--num_layers and --student_layers must be at least 1")
    teacher_layers = args.num_layers or kerasbert.zoo.get_config(args.teacher).num_layers
    if (args.student_layers or 0) > teacher_layers:
        parser.error(f"--student_layers={args.student_layers} is more than the teacher's "
                     f"{teacher_layers} layers")
    least_texts = MIN_JUDGING_INPUTS if set(args.quantize) - {"none"} else 10
    if args.agreement_texts < least_texts:
        parser.error(f"--agreement_texts must be at least {least_texts} (export judges "
                     f"quantized files on at least {MIN_JUDGING_INPUTS} texts; its float checks "
                     "use 10)")
    args.quantize = [name for name in QUANTIZE_CHOICES if name in args.quantize]

    work_dir = tempfile.mkdtemp(prefix="kerasbert_distillation_")
    try:
        facts = build_models(args, work_dir)
        exported = export_all(facts, args, work_dir)
        if exported:
            load_before = os.getloadavg()[0]
            latencies = measure(facts, args)
    finally:
        if args.keep_dir:
            print(f"Kept {work_dir}", file=sys.stderr)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    if not exported:
        sys.exit(1)
    print_results(facts, args, latencies, load_before)


if __name__ == "__main__":
    main()
