"""Start-up of every kerasbert binary: how long `--help` takes, and how long from the process's
start to its first useful step, on tiny inputs made here from the shipped corpus and glosses.

The first useful step, per binary (what the clock stops at):
- kerasbert-pretrain, kerasbert-distill, kerasbert-finetune: the first training step, saved
  (`--checkpoint_interval=1`: the first `*.index` file appears under `--model_dir`);
- kerasbert-data-service: the dispatcher's "serving" line;
- kerasbert-vocab, kerasbert-create-pretraining-data, kerasbert-extract-features,
  kerasbert-convert, kerasbert-export: the whole (tiny) job, to exit status 0;
- kerasbert-classify and kerasbert-demo: `--help` only (classify needs an export with text
  signatures, the demo is the main job, whose first stage is kerasbert-vocab).

    .venv/bin/python benchmarks/startup.py                 # table, 3 runs of --help each
    .venv/bin/python benchmarks/startup.py --markdown      # for BUILD.md
    .venv/bin/python benchmarks/startup.py --smoke         # --help x1; vocab and service only

Each binary runs as a user runs it, through its console script beside this Python. Nothing here
asserts a time; run it on an idle machine.
"""

import argparse
import gzip
import importlib.metadata
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reporting import SMOKE_HELP, format_table, smoke_banner  # noqa: E402

BIN = os.path.dirname(sys.executable)
BINARIES = ["kerasbert-vocab", "kerasbert-create-pretraining-data", "kerasbert-pretrain",
            "kerasbert-distill", "kerasbert-finetune", "kerasbert-extract-features",
            "kerasbert-convert", "kerasbert-export", "kerasbert-classify",
            "kerasbert-data-service", "kerasbert-demo"]
TINY_MODEL = ["--model=bert_tiny_uncased", "--config_overrides=num_layers=2,hidden_size=64,"
              "num_heads=2,intermediate_size=128,max_positions=64"]
# The jobs a `--smoke` run times, with the data service (its training first steps cost ~35 CPU s).
SMOKE_JOBS = ("kerasbert-vocab",)
TRAINING = ["--max_seq_length=64", "--max_predictions_per_seq=8", "--batch_size=8",
            "--train_steps=2", "--steps_per_loop=1", "--checkpoint_interval=1"]


def _demo_files():
    """The shipped corpus shard and glosses, and the WordPiece vocabulary, without importing
    kerasbert (which the binaries measured here must load themselves)."""
    spec = importlib.util.find_spec("kerasbert.data.demo")
    folder = os.path.dirname(spec.origin)
    return (os.path.join(folder, "pydocs-00000-of-00004.txt.gz"),
            {split: os.path.join(folder, f"wordnet_gloss-{split}.tsv.gz")
             for split in ("train", "dev", "test")},
            os.path.join(folder, "vocab", "wordpiece", "vocab.txt"))


def _tiny_inputs(work):
    """A 2,000-line corpus, a gloss data dir of 200 / 100 / 100 rows and 20 texts to embed."""
    corpus, glosses, vocab = _demo_files()
    with gzip.open(corpus, "rt", encoding="utf-8") as file:
        lines = [next(file) for _ in range(2000)]
    text = os.path.join(work, "corpus.txt")
    with open(text, "w", encoding="utf-8") as file:
        file.writelines(lines)
    data_dir = os.path.join(work, "glosses")
    os.makedirs(data_dir)
    for split, path in glosses.items():
        with gzip.open(path, "rt", encoding="utf-8") as source:
            rows = source.read().splitlines()[:201 if split == "train" else 101]
        with gzip.open(os.path.join(data_dir, os.path.basename(path)), "wt",
                       encoding="utf-8") as target:
            target.write("\n".join(rows) + "\n")
    texts = os.path.join(work, "texts.txt")
    with open(texts, "w", encoding="utf-8") as file:
        file.writelines(line for line in lines[:40] if line.strip())
    return text, data_dir, vocab, texts


def _script(binary):
    return os.path.join(BIN, binary)


def time_help(binary, runs):
    """Median seconds of `binary --help` over `runs` runs (whatever its exit status: absl's own
    `--help`, which earlier versions used, exits with 1)."""
    seconds = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run([_script(binary), "--help"], capture_output=True)
        seconds.append(time.monotonic() - started)
    return statistics.median(seconds)


def _has_index_file(folder):
    return any(name.endswith(".index") for _, _, names in os.walk(folder) for name in names)


def time_to_exit(command):
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return time.monotonic() - started


def time_until(command, reached, log):
    """Seconds from starting `command` until `reached()` holds; the process is then ended (a
    training binary) or let finish."""
    with open(log, "w") as output:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        while not reached():
            if process.poll() is not None:
                raise SystemExit(f"{' '.join(command)} ended first:\n{open(log).read()[-2000:]}")
            time.sleep(0.02)
        seconds = time.monotonic() - started
        process.terminate()
        process.wait()
    return seconds


def first_steps(work, only=None):
    """{binary: (seconds, what was timed, its flags)} for the binaries with a first step (those
    in `only`, if given, and the data service)."""
    text, data_dir, vocab, texts = _tiny_inputs(work)
    pretrain_dir = os.path.join(work, "pretrain")
    jobs = [
        ("kerasbert-vocab", "whole job", [f"--input_files={text}", "--type=wordpiece",
                                          "--vocab_size=500", f"--output_dir={work}/vocab"]),
        ("kerasbert-create-pretraining-data", "whole job",
         [f"--input_file={text}", f"--output_file={work}/records/train.tfrecord",
          f"--vocab_file={vocab}", "--max_seq_length=64", "--max_predictions_per_seq=8",
          "--dupe_factor=1"]),
        ("kerasbert-pretrain", "first step saved",
         [*TINY_MODEL, f"--text_files={text}", f"--vocab_file={vocab}", *TRAINING,
          f"--model_dir={pretrain_dir}"]),
        ("kerasbert-distill", "first step saved",
         [f"--teacher={pretrain_dir}", f"--text_files={text}", "--student_layers=1", *TRAINING,
          f"--model_dir={work}/distill"]),
        ("kerasbert-finetune", "first step saved",
         ["--task=wordnet_gloss", f"--data_dir={data_dir}", f"--init_from={pretrain_dir}",
          "--max_seq_length=32", "--train_batch_size=16", "--num_train_epochs=1",
          "--checkpoint_interval=1", f"--model_dir={work}/finetune"]),
        ("kerasbert-extract-features", "whole job",
         [f"--model={pretrain_dir}", f"--input_file={texts}",
          f"--output_file={work}/features.jsonl", "--layers=-1,-2", "--max_seq_length=64"]),
        ("kerasbert-convert", "whole job",
         [f"--input={work}/distill/student.keras", f"--output={work}/student_hf"]),
        ("kerasbert-export", "whole job",
         [f"--model={work}/student_hf", f"--output_dir={work}/export", "--formats=saved_model",
          "--max_seq_length=32"]),
    ]
    figures = {}
    for binary, what, flags in jobs:
        if only is not None and binary not in only:
            continue
        command = [_script(binary), *flags]
        model_dir = next((flag.split("=", 1)[1] for flag in flags
                          if flag.startswith("--model_dir=")), None)
        if what == "first step saved":
            # Let the run finish (its later steps are cheap), so that later jobs can use it.
            seconds = time_until(command, lambda: _has_index_file(model_dir),
                                 os.path.join(work, f"{binary}.log"))
            time_to_exit(command)  # the run resumes and completes (its 2 steps)
        else:
            seconds = time_to_exit(command)
        figures[binary] = (seconds, what, " ".join(flags))
    journal = os.path.join(work, "journal")
    log = os.path.join(work, "data_service.log")
    figures["kerasbert-data-service"] = (
        time_until([_script("kerasbert-data-service"), "--mode=dispatcher",
                    f"--work_dir={journal}"],
                   lambda: "serving at" in open(log).read(), log),
        "serving line", "--mode=dispatcher --work_dir=...")
    return figures


def _cpu():
    with open("/proc/cpuinfo") as file:
        model = next((line.split(":", 1)[1].strip() for line in file
                      if line.startswith("model name")), platform.processor())
    return f"{os.cpu_count()} cores, {model}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--help_runs", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--skip_first_steps", action="store_true")
    parser.add_argument("--smoke", action="store_true",
                        help=SMOKE_HELP + f" (--help once; first steps of {', '.join(SMOKE_JOBS)}"
                        " and the data service only)")
    arguments = parser.parse_args()
    if arguments.smoke:
        print(smoke_banner())
        arguments.help_runs = 1
    print(f"CPU: {_cpu()}; Python {platform.python_version()}, TensorFlow "
          f"{importlib.metadata.version('tensorflow')}, Keras {importlib.metadata.version('keras')}; "
          f"TF_CPP_MIN_LOG_LEVEL={os.environ.get('TF_CPP_MIN_LOG_LEVEL', 'unset')}, "
          f"TF_NUM_INTRAOP_THREADS={os.environ.get('TF_NUM_INTRAOP_THREADS', 'unset')}")
    helps = {binary: time_help(binary, arguments.help_runs) for binary in BINARIES}
    with tempfile.TemporaryDirectory() as work:
        steps = {} if arguments.skip_first_steps else first_steps(
            work, SMOKE_JOBS if arguments.smoke else None)
    rows = [[binary, f"{helps[binary]:.2f}",
             f"{steps[binary][0]:.1f}" if binary in steps else "-",
             steps[binary][1] if binary in steps else "-"] for binary in BINARIES]
    print(format_table(["binary", "--help s", "first step s", "first step is"], rows,
                       markdown=arguments.markdown))
    print("\nFlags of the first-step runs (inputs made in a temporary folder):")
    for binary, (_, _, flags) in steps.items():
        print(f"  {binary} {flags}")


if __name__ == "__main__":
    main()
