"""Pretraining-data creation throughput: kerasbert vs Model Garden's `create_pretraining_data`.

Turns raw text into masked-LM + next-sentence-prediction (NSP) training
instances at sequence length 128 (20 predictions at most, masked_lm_prob 0.15,
short_seq_prob 0.1, dupe_factor 1, seed 12345, uncased shipped WordPiece
vocabulary), with two command-line tools run as subprocesses on this machine:

- kerasbert: `python -m kerasbert.cli.create_pretraining_data --objective=nsp`
  (the `kerasbert-create-pretraining-data` console script);
- Model Garden: `python -m official.nlp.data.create_pretraining_data` from the
  `tf-models-official` package, installed from PyPI into a separate virtual
  environment under the work directory. The environment shares this
  interpreter's TensorFlow (a `.pth` file lists this environment's
  site-packages) and gets `tf-models-official` and `tf-keras` with `--no-deps`;
  it is kept and reused by later runs.

Input: the shipped corpus (`kerasbert.data.demo.pretraining_corpus_files()`, one
sentence per line, blank line between documents) repeated until it reaches
`--corpus_mb` MB (MB = 10^6 bytes of uncompressed text), one plain-text file per
repetition, cached in the work directory. Model Garden keeps the whole corpus
and all instances in memory on one core, so it runs on a prefix of that corpus
of about `--reference_mb` MB (cut at a document boundary); its rate is measured
on that subset, and the output says so. kerasbert runs on the full corpus and
on the same subset.

Each run is pinned to one core with `taskset -c 0`, so instances/s is per core;
`--cores all` runs kerasbert unpinned and divides its rate by the number of
cores. Seconds are wall clock around the subprocess, start-up included.
Instances are counted by reading the output TFRecord files back (neither tool's
own summary is trusted): for kerasbert, the shards its manifest
(`<output_file>.manifest.json`, `kerasbert.data.manifest`) lists, once it says the
data set is complete; for Model Garden, every file it wrote. Each tool is also
run on a tiny start-up probe (the first documents of the corpus); the "w/o
start-up" rate is
(instances - probe instances) / (seconds - probe seconds).

Targets: kerasbert at least 20x Model Garden and at least 2,000 instances/s
per core (both on wall-clock rates). The exit status is non-zero only on errors,
never on a missed target.

Run from the repository root:

    python benchmarks/pretraining_data.py                       # 50 MB; Model Garden on 5 MB
    python benchmarks/pretraining_data.py --corpus_mb 2 --reference_mb 1   # a short run
    python benchmarks/pretraining_data.py --cores all           # kerasbert on all cores
    python benchmarks/pretraining_data.py --tools model_garden  # the reference alone
    python benchmarks/pretraining_data.py --smoke   # one small kerasbert run: runs?

`--smoke` runs kerasbert's binary once, unpinned, on the start-up probe; its other rows repeat
that run, and it neither installs nor runs Model Garden: its rows repeat kerasbert's, so that
the ratio and target lines print (they mean nothing there).
"""

import argparse
import glob
import gzip
import importlib.metadata
import importlib.util
import math
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from kerasbert.data import demo  # noqa: E402
from kerasbert.data.manifest import manifest_path, read_manifest  # noqa: E402

from reporting import SMOKE_HELP, check_line, format_table, smoke_banner  # noqa: E402

MB = 10**6
SEQ_LENGTH = 128
COMMON_FLAGS = [
    "--do_lower_case=True",
    f"--max_seq_length={SEQ_LENGTH}",
    "--max_predictions_per_seq=20",
    "--masked_lm_prob=0.15",
    "--random_seed=12345",
    "--dupe_factor=1",
    "--short_seq_prob=0.1",
]
OURS, MODEL_GARDEN = "kerasbert", "Model Garden"
TOOLS = {"ours": OURS, "model_garden": MODEL_GARDEN}
OURS_MODULE = "kerasbert.cli.create_pretraining_data"
MODEL_GARDEN_MODULE = "official.nlp.data.create_pretraining_data"
MODEL_GARDEN_PACKAGE = "tf-models-official"
PROBE_BYTES = 20_000
SMOKE_TEXT_BYTES, SMOKE_PROBE_BYTES, SMOKE_CORPUS_MB, SMOKE_REFERENCE_MB = 30_000, 5_000, 0.06, 0.02
TARGET_RATIO, TARGET_RATE_PER_CORE = 20.0, 2000.0
READY_MARKER = "benchmark-ready"


def progress(message):
    print(message, file=sys.stderr, flush=True)


def shipped_corpus_text(max_bytes=None):
    """The shipped corpus shards as one text: documents separated by one blank line; with
    `max_bytes`, cut at the first document end past that many characters."""
    shards = []
    for path in demo.pretraining_corpus_files():
        with gzip.open(path, "rt", encoding="utf-8") as reader:
            shards.append(reader.read().strip("\n"))
    text = "\n\n".join(shards) + "\n"
    if max_bytes is not None and text.find("\n\n", max_bytes) >= 0:
        text = text[:text.find("\n\n", max_bytes) + 1]
    return text


def write_text(path, text):
    """Writes `text` to `path` through a temporary file, so a cached file is always complete."""
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as writer:
        writer.write(text)
    os.replace(partial, path)


def build_corpus(directory, text, target_bytes):
    """The shipped `text` repeated into one file per repetition until >= `target_bytes`; cached."""
    repetitions = math.ceil(target_bytes / len(text.encode("utf-8")))
    paths = [os.path.join(directory, f"corpus-{index:05d}-of-{repetitions:05d}.txt")
             for index in range(repetitions)]
    os.makedirs(directory, exist_ok=True)
    for path in paths:
        if not os.path.exists(path):
            write_text(path, text)
    return paths


def build_prefix(path, text, target_bytes):
    """The first documents of the repeated corpus, cut at the first document end >= `target_bytes`."""
    if not os.path.exists(path):
        encoded = text.encode("utf-8") + b"\n"  # a blank line between repetitions
        repeated = encoded * math.ceil((target_bytes + 1) / len(encoded))
        boundary = repeated.find(b"\n\n", target_bytes)
        write_text(path, repeated[:boundary + 1 if boundary >= 0 else len(repeated)].decode("utf-8"))
    return [path]


def total_bytes(paths):
    return sum(os.path.getsize(path) for path in paths)


def run_logged(command, log_path, what):
    """Runs `command` with its output in `log_path`; raises SystemExit naming `what` on failure."""
    with open(log_path, "w", encoding="utf-8") as log:
        returncode = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
    if returncode != 0:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            tail = "".join(log.readlines()[-25:])
        raise SystemExit(f"{what} failed with exit status {returncode}: {' '.join(command)}\n"
                         f"Last lines of {log_path}:\n{tail}")


def environment_python(environment):
    return os.path.join(environment, "bin", "python")


def model_garden_environment(environment):
    """Creates (once) a venv holding tf-models-official; returns (python, package version).

    The venv reuses this interpreter's installed packages (TensorFlow, absl,
    sentencepiece, six) through a `.pth` file and installs only
    `tf-models-official` and a `tf-keras` matching TensorFlow, both with `--no-deps`.
    """
    python = environment_python(environment)
    marker = os.path.join(environment, READY_MARKER)
    if not os.path.exists(marker):
        progress(f"  creating the Model Garden environment in {environment} ...")
        shutil.rmtree(environment, ignore_errors=True)
        log = environment + "-install.log"
        run_logged([sys.executable, "-m", "venv", environment], log, "Creating the venv")
        purelib = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True).stdout.strip()
        host_site_packages = site.getsitepackages() + [site.getusersitepackages()]
        with open(os.path.join(purelib, "zz_host_site_packages.pth"), "w", encoding="utf-8") as pth:
            pth.write("\n".join(host_site_packages) + "\n")
        tensorflow_minor = ".".join(importlib.metadata.version("tensorflow").split(".")[:2])
        run_logged([python, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
                    MODEL_GARDEN_PACKAGE, f"tf-keras~={tensorflow_minor}.0"],
                   log, f"Installing {MODEL_GARDEN_PACKAGE} from PyPI")
        run_logged([python, "-c", f"import {MODEL_GARDEN_MODULE}"], log,
                   f"Importing {MODEL_GARDEN_MODULE} in {environment} (missing dependency?)")
        write_text(marker, "ok\n")
    version = subprocess.run(
        [python, "-c", f"import importlib.metadata as m; print(m.version('{MODEL_GARDEN_PACKAGE}'))"],
        check=True, capture_output=True, text=True).stdout.strip()
    return python, version


def count_records(paths):
    """Number of records in TFRecord files (GZIP-compressed ones detected), read with tf.data."""
    import tensorflow as tf

    count = 0
    for path in paths:
        with open(path, "rb") as reader:
            compression = "GZIP" if reader.read(2) == b"\x1f\x8b" else ""
        dataset = tf.data.TFRecordDataset(path, compression_type=compression)
        count += int(dataset.reduce(tf.constant(0, tf.int64), lambda total, _: total + 1))
    return count


def output_shards(output_file):
    """The record files a run wrote for `output_file`: the shards the manifest beside it lists
    (kerasbert's binary writes one, as `kerasbert.data.manifest` describes, beside an intent
    while it works), or, without a manifest, every file in its folder (Model Garden's)."""
    directory = os.path.dirname(output_file)
    if os.path.exists(manifest_path(output_file)):
        manifest = read_manifest(manifest_path(output_file))
        if not manifest["complete"]:
            raise SystemExit(f"{manifest_path(output_file)} says the data set is not complete")
        return [os.path.join(directory, shard["path"]) for shard in manifest["shards"]]
    return sorted(path for path in glob.glob(os.path.join(directory, "*")) if os.path.isfile(path))


def timed_run(make_command, run_directory, pinned):
    """Runs `make_command(output_file)` writing into `run_directory/output`.

    Returns (seconds, instances counted in the record files it wrote there: `output_shards`).
    """
    output_directory = os.path.join(run_directory, "output")
    shutil.rmtree(output_directory, ignore_errors=True)
    os.makedirs(output_directory)
    output_file = os.path.join(output_directory, "instances.tfrecord")
    command = make_command(output_file)
    if pinned:
        command = ["taskset", "-c", "0", *command]
    start = time.perf_counter()
    run_logged(command, os.path.join(run_directory, "log.txt"), command[command.index("-m") + 1])
    seconds = time.perf_counter() - start
    outputs = output_shards(output_file)
    if not outputs:
        raise SystemExit(f"{' '.join(command)} wrote no file into {output_directory}")
    return seconds, count_records(outputs)


def tool_command(python, module, inputs, vocab_file, extra_flags):
    return lambda output_file: [
        python, "-m", module, f"--input_file={','.join(inputs)}", f"--output_file={output_file}",
        f"--vocab_file={vocab_file}", *COMMON_FLAGS, *extra_flags]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus_mb", type=float, default=50.0,
                        help="size of the repeated corpus kerasbert runs on (MB = 10^6 bytes)")
    parser.add_argument("--reference_mb", type=float, default=5.0,
                        help="size of the corpus prefix Model Garden (and kerasbert) run on")
    parser.add_argument("--work_dir",
                        default=os.path.join(tempfile.gettempdir(), "kerasbert_pretraining_data"),
                        help="corpus, Model Garden venv and outputs; kept and reused between runs")
    parser.add_argument("--cores", choices=["1", "all"], default="1",
                        help="1: every run pinned to core 0; all: kerasbert runs unpinned")
    parser.add_argument("--tools", nargs="+", choices=list(TOOLS), default=list(TOOLS))
    parser.add_argument("--num_shards", type=int,
                        help="passed to kerasbert as --num_shards (default: its own default)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP + " (module docstring)")
    args = parser.parse_args()
    if args.corpus_mb <= 0 or args.reference_mb <= 0:
        parser.error(f"--corpus_mb ({args.corpus_mb}) and --reference_mb ({args.reference_mb}) "
                     "must be positive")
    if not args.smoke:
        benchmark(args)
        return
    print(smoke_banner())
    args.corpus_mb, args.reference_mb, args.tools = SMOKE_CORPUS_MB, SMOKE_REFERENCE_MB, ["ours"]
    args.cores = "all"  # unpinned: a smoke run need not wait for a busy core 0
    with tempfile.TemporaryDirectory(prefix="kerasbert_pretraining_data_smoke_") as work_dir:
        args.work_dir = work_dir
        benchmark(args)


def benchmark(args):
    """Build the inputs in `args.work_dir`, run the tools and print the table and ratios."""
    work_dir = os.path.abspath(args.work_dir)
    os.makedirs(work_dir, exist_ok=True)
    vocab_file = os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt")
    text = shipped_corpus_text(SMOKE_TEXT_BYTES if args.smoke else None)
    corpus = build_corpus(os.path.join(work_dir, f"corpus-{args.corpus_mb:g}MB"), text,
                          int(args.corpus_mb * MB))
    inputs = {
        "full corpus": corpus,
        "reference subset": build_prefix(
            os.path.join(work_dir, f"reference-{args.reference_mb:g}MB.txt"), text,
            int(args.reference_mb * MB)),
        "start-up probe": build_prefix(os.path.join(work_dir, "startup-probe.txt"), text,
                                       SMOKE_PROBE_BYTES if args.smoke else PROBE_BYTES),
    }

    cores = os.cpu_count() if args.cores == "all" else 1
    tools, notes = {}, []
    if "ours" in args.tools:
        if importlib.util.find_spec(OURS_MODULE) is None:
            raise SystemExit(f"{OURS_MODULE} is not importable with {sys.executable}")
        ours_flags = ["--objective=nsp"]
        if args.num_shards is not None:
            ours_flags.append(f"--num_shards={args.num_shards}")
        tools[OURS] = (sys.executable, OURS_MODULE, ours_flags, cores,
                       ["start-up probe", "reference subset", "full corpus"])
        notes.append(f"kerasbert: {sys.executable} -m {OURS_MODULE} {' '.join(ours_flags)}, "
                     + ("pinned to core 0" if cores == 1 else f"unpinned on {cores} cores"))
    if args.smoke:
        tools[MODEL_GARDEN] = (None, None, None, 1, ["start-up probe", "reference subset"])
        notes.append("Model Garden: NOT RUN (--smoke); its rows repeat kerasbert's runs")
    elif "model_garden" in args.tools:
        python, version = model_garden_environment(os.path.join(work_dir, "model_garden_env"))
        tools[MODEL_GARDEN] = (python, MODEL_GARDEN_MODULE, [], 1,
                               ["start-up probe", "reference subset"])
        notes.append(f"Model Garden: {MODEL_GARDEN_PACKAGE} {version} ({python} -m "
                     f"{MODEL_GARDEN_MODULE}), pinned to core 0")

    results = {}
    for name, (python, module, extra_flags, tool_cores, input_names) in tools.items():
        for input_name in input_names:
            if args.smoke and name == MODEL_GARDEN:
                results[name, input_name] = results[OURS, input_name]
                continue
            if args.smoke and input_name != "start-up probe":
                results[name, input_name] = results[name, "start-up probe"]
                continue
            progress(f"  {name}: {input_name} ({total_bytes(inputs[input_name]) / MB:.2f} MB) ...")
            run_directory = os.path.join(work_dir, "runs", f"{name}-{input_name}".replace(" ", "_"))
            command = tool_command(python, module, inputs[input_name], vocab_file, extra_flags)
            results[name, input_name] = timed_run(command, run_directory, pinned=tool_cores == 1)

    def rate_per_core(name, input_name):
        seconds, instances = results[name, input_name]
        return instances / seconds / tools[name][3]

    def startup_free_rate_per_core(name, input_name):
        seconds, instances = results[name, input_name]
        probe_seconds, probe_instances = results[name, "start-up probe"]
        if seconds <= probe_seconds:
            return float("nan")
        return (instances - probe_instances) / (seconds - probe_seconds) / tools[name][3]

    header = ["tool", "input", "MB", "cores", "instances", "seconds", "instances/s",
              "inst/s/core", "w/o start-up inst/s/core"]
    rows = []
    for (name, input_name), (seconds, instances) in results.items():
        is_probe = input_name == "start-up probe"
        rows.append([name, input_name, f"{total_bytes(inputs[input_name]) / MB:.2f}",
                     str(tools[name][3]), str(instances), f"{seconds:.2f}",
                     f"{instances / seconds:.0f}", f"{rate_per_core(name, input_name):.0f}",
                     "-" if is_probe else f"{startup_free_rate_per_core(name, input_name):.0f}"])

    print(f"Masked LM + NSP instances, seq {SEQ_LENGTH}: {' '.join(COMMON_FLAGS)}; shipped "
          f"uncased WordPiece vocabulary; {os.cpu_count()} CPU cores; MB = 10^6 bytes.")
    print(f"Full corpus: the shipped corpus ({len(text.encode('utf-8')) / MB:.2f} MB) repeated "
          f"{len(corpus)}x into {len(corpus)} files = {total_bytes(corpus) / MB:.2f} MB, in "
          f"{os.path.dirname(corpus[0])}.")
    print(f"Reference subset: its first {total_bytes(inputs['reference subset']) / MB:.2f} MB; "
          f"start-up probe: its first {total_bytes(inputs['start-up probe']) / MB:.3f} MB.")
    for note in notes:
        print(note + ".")
    print("Seconds: wall clock around the subprocess (start-up included); instances counted from "
          "the output TFRecords.")
    print()
    print(format_table(header, rows))
    print()
    if len(tools) < 2:
        print("Ratio and targets: need both tools.")
        return
    ours_rate = rate_per_core(OURS, "full corpus")
    reference_rate = rate_per_core(MODEL_GARDEN, "reference subset")
    ratio = ours_rate / reference_rate
    same_input_ratio = rate_per_core(OURS, "reference subset") / reference_rate
    startup_free_ratio = (startup_free_rate_per_core(OURS, "full corpus")
                          / startup_free_rate_per_core(MODEL_GARDEN, "reference subset"))
    reference_mb = total_bytes(inputs["reference subset"]) / MB
    print(f"Model Garden's rate is measured on the {reference_mb:.2f} MB reference subset only, "
          f"not on the full corpus.")
    print(f"Ratio ours / Model Garden, instances/s per core: {ratio:.1f}x (ours on the full "
          f"corpus); {same_input_ratio:.1f}x (both on the reference subset); "
          f"{startup_free_ratio:.1f}x (start-up excluded, ours on the full corpus).")
    print("Targets (wall clock, ours on the full corpus):")
    print(check_line(f"ours >= {TARGET_RATIO:g}x Model Garden per core", ratio >= TARGET_RATIO,
                     f"{ratio:.1f}x"))
    print(check_line(f"ours >= {TARGET_RATE_PER_CORE:,.0f} instances/s per core",
                     ours_rate >= TARGET_RATE_PER_CORE, f"{ours_rate:,.0f} instances/s per core"))


if __name__ == "__main__":
    main()
