"""Run the main job: each stage's console script in its own process with a flagfile in the run
directory, its progress on the terminal and TensorFlow's messages in a log, its result recorded
so that running the job again continues an interrupted run where it stopped."""

import dataclasses
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.bfloat16 import cpu_bfloat16_flags
from kerasbert.data import demo
from kerasbert.demo_pipeline.curves import ARMS, draw_curves
from kerasbert.demo_pipeline.stages import (AGREEMENT_COUNT, AGREEMENT_FILE, FULL, QUICK,
                                            SENTENCE_COUNT, SENTENCES_FILE, Settings, plan)
from kerasbert.json_files import read_json_file

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
CURVES_FILE = "curves.png"
RESULTS_DIR = "stages"
FLAGS_DIR = "flags"
LOGS_DIR = "logs"


class StageError(RuntimeError):
    """A stage's binary failed; the message names the stage, its error line and its log."""


def choose_run_dir(runs_dir, quick):
    """The newest unfinished run in `runs_dir` made with the same `quick` setting (to continue
    it), or a new `runs_dir/<timestamp>` folder.

    >>> import tempfile
    >>> runs = tempfile.mkdtemp()
    >>> first = choose_run_dir(runs, quick=True)
    >>> os.makedirs(first); start_run(first, quick=True)
    >>> choose_run_dir(runs, quick=True) == first, choose_run_dir(runs, quick=False) == first
    (True, False)
    """
    if file_system.isdir(runs_dir):
        for name in reversed(file_system.listdir(runs_dir)):
            candidate = file_system.join(runs_dir, name)
            run_file = file_system.join(candidate, RUN_FILE)
            if file_system.isfile(run_file) and not file_system.exists(
                    file_system.join(candidate, SUMMARY_FILE)):
                if read_json_file(run_file, "a main-job run record")["quick"] == quick:
                    return candidate
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate, suffix = file_system.join(runs_dir, stamp), 1
    while file_system.exists(candidate):
        suffix += 1
        candidate = file_system.join(runs_dir, f"{stamp}-{suffix}")
    return candidate


def start_run(run_dir, quick):
    """Record a run's settings and write the texts its export and last stage read (once)."""
    if file_system.isfile(file_system.join(run_dir, RUN_FILE)):
        return
    settings = QUICK if quick else FULL
    texts = ((SENTENCES_FILE, "test", SENTENCE_COUNT),
             (AGREEMENT_FILE, "dev", AGREEMENT_COUNT))
    for name, split, count in texts:
        write_atomically(file_system.join(run_dir, name),
                         "".join(text + "\n" for _, text in glosses(split, count)))
    write_atomically(file_system.join(run_dir, RUN_FILE), json.dumps(
        {"quick": quick, "settings": dataclasses.asdict(settings)}, indent=1) + "\n")


def read_run(run_dir):
    """`(quick, settings)` recorded in a run's `run.json`: what a continued run goes on with.

    >>> import tempfile
    >>> run_dir = tempfile.mkdtemp(); start_run(run_dir, quick=True)
    >>> read_run(run_dir) == (True, QUICK)
    True
    """
    path = file_system.join(run_dir, RUN_FILE)
    try:
        recorded = read_json_file(path, "a main-job run record")
        return bool(recorded["quick"]), Settings(**recorded["settings"])
    except (ValueError, KeyError, TypeError) as error:
        raise StageError(f"{path} is not a main-job run record ({type(error).__name__}: "
                         f"{error}); start a new run in another --run_dir") from None


def glosses(split, count):
    """`(label, text)` of the first `count` glosses of the shipped `split`.

    >>> glosses("test", 1)
    [('noun.communication', 'the system of phonemes recognized in a language')]
    """
    with gzip.open(demo.classification_files()[split], "rt", encoding="utf-8") as file:
        next(file)  # the header
        return [tuple(next(file).rstrip("\n").split("\t", 1)) for _ in range(count)]


def run_main_job(runs_dir="runs", quick=False, run_dir=None, out=print):
    """Run (or continue) every stage in order; return the summary written to `summary.json`."""
    run_dir = file_system.absolute(run_dir or choose_run_dir(runs_dir, quick))
    continuing = file_system.isfile(file_system.join(run_dir, RUN_FILE))
    if not continuing and file_system.isdir(run_dir) and file_system.listdir(run_dir):
        # Its stages would start by deleting their unfinished outputs (data/, export/, ...).
        raise FileExistsError(f"{run_dir} is not empty and is not a main-job run (no {RUN_FILE}); "
                              "give an empty or new --run_dir, or a run's folder to continue it")
    file_system.makedirs(run_dir)
    start_run(run_dir, quick)
    quick, settings = read_run(run_dir)  # a continued run goes on with its own settings
    out(f"{'Continuing' if continuing else 'Starting'} {'a quick' if quick else 'a'} run in "
        f"{run_dir}")
    precision, reason = training_precision()
    out(f"Pretraining and fine-tuning in {precision}: {reason}")
    started = time.time()
    stages = plan(run_dir, settings, precision)
    results = []
    for number, stage in enumerate(stages, start=1):
        out(f"\n[{number}/{len(stages)}] {stage.title}  ({stage.script})")
        result = run_stage(stage, run_dir)
        out(f"  {stage.name}: {result['metric']} ({result['seconds']:.0f} s"
            f"{', done before' if result.get('reused') else ''}) -> {result['artifact']}")
        results.append(result)
    summary = make_summary(run_dir, quick, results, time.time() - started)
    draw_curves(run_dir, file_system.join(run_dir, CURVES_FILE))
    write_atomically(file_system.join(run_dir, SUMMARY_FILE), json.dumps(summary, indent=1) + "\n")
    out("\n" + format_table(summary["stages"]))
    arms = summary["finetune"]
    out(f"\nHeld-out test accuracy: pretrained {arms['pretrained']['test_accuracy']:.3f}, "
        f"from scratch {arms['from_scratch']['test_accuracy']:.3f}")
    out(f"Wrote {file_system.join(run_dir, SUMMARY_FILE)} and "
        f"{file_system.join(run_dir, CURVES_FILE)}")
    return summary


def training_precision():
    """`(dtype policy, why)` for the training stages: `mixed_bfloat16` where the CPU computes in
    bfloat16 natively (`kerasbert.bfloat16`), else float32."""
    flags = cpu_bfloat16_flags()
    if flags:
        return "mixed_bfloat16", f"this CPU computes in bfloat16 natively ({', '.join(flags)})"
    return "float32", "this CPU has no native bfloat16 (no avx512_bf16 or amx_bf16)"


def run_stage(stage, run_dir):
    """Run `stage` unless a result of it is recorded; return its result."""
    result_path = file_system.join(run_dir, RESULTS_DIR, f"{stage.name}.json")
    if file_system.isfile(result_path):
        return {**read_json_file(result_path, "a stage result"), "reused": True}
    output = file_system.join(run_dir, stage.output)
    if not stage.resumable:
        _remove(output)
    flagfile = write_atomically(file_system.join(run_dir, FLAGS_DIR, f"{stage.name}.flags"),
                                "\n".join(stage.flagfile_lines()) + "\n")
    log_path = file_system.join(run_dir, LOGS_DIR, f"{stage.name}.log")
    file_system.makedirs(file_system.dirname(log_path))
    started = time.time()
    with file_system.local_copy(flagfile) as readable:  # absl reads flagfiles with `open`
        returncode = _run_showing_progress(
            [console_script(stage.script), f"--flagfile={readable}"], log_path)
    seconds = time.time() - started
    if returncode != 0:
        raise StageError(f"stage {stage.name} ({stage.script}) failed: {_last_line(log_path)} "
                         f"(full log: {log_path}; rerun to continue)")
    metric, values = stage.describe(run_dir)
    result = {"name": stage.name, "seconds": round(seconds, 1), "metric": metric,
              "artifact": stage.output,
              "size_bytes": _size(output), "values": values}
    write_atomically(result_path, json.dumps(result, indent=1) + "\n")
    return result


def console_script(name):
    """The path of kerasbert's console script `name`, beside this Python if installed there."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    found = beside if os.path.isfile(beside) else shutil.which(name)
    if found is None:
        raise StageError(f"{name}: not installed (pip install -e . installs kerasbert's binaries)")
    return found


def _run_showing_progress(command, log_path):
    """Run `command`: its stdout (progress bars, results) to the terminal and the log, its
    stderr (TensorFlow's messages) to the log only. On Ctrl-C (which the terminal also sends to
    the stage's binary, so that a training stage saves a checkpoint) it waits for the binary to
    end before it stops. A log on a remote file system is written locally, then copied there
    (appended to what it held) when the binary ends."""
    if not file_system.is_local(log_path):
        with tempfile.TemporaryDirectory(prefix="kerasbert-log-") as scratch:
            local_log = os.path.join(scratch, file_system.basename(log_path))
            if file_system.exists(log_path):
                file_system.copy(log_path, local_log)
            try:
                return _run_showing_progress(command, local_log)
            finally:
                file_system.copy(local_log, log_path)
    with open(log_path, "ab") as log:
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log,
                                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        terminal = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
        try:
            while chunk := os.read(process.stdout.fileno(), 4096):
                log.write(chunk)
                if terminal is not None:
                    terminal.write(chunk)
                    terminal.flush()
                else:
                    sys.stdout.write(chunk.decode("utf-8", "replace"))
        except KeyboardInterrupt:
            process.wait()
            raise
        return process.wait()


def _last_line(log_path):
    with file_system.open_file(log_path, errors="replace") as file:
        lines = [line.strip() for line in file if line.strip()]
    errors = [line for line in lines if ": error:" in line or "Error" in line]
    return (errors or lines or ["no output"])[-1]


def _remove(path):
    if file_system.isdir(path):
        file_system.rmtree(path)
    elif file_system.exists(path):
        file_system.remove(path)


def _size(path):
    if file_system.isfile(path):
        return file_system.getsize(path)
    return sum(file_system.getsize(file_system.join(folder, name))
               for folder, _, names in file_system.walk(path) for name in names)


def make_summary(run_dir, quick, results, seconds):
    """The content of `summary.json` (see README: `stages` and `finetune`)."""
    by_name = {result["name"]: result for result in results}
    finetune = {arm: {**by_name[f"finetune_{arm}"]["values"], **by_name[f"test_{arm}"]["values"]}
                for arm in ARMS}
    return {
        "run_dir": run_dir, "quick": quick, "seconds": round(seconds, 1),
        "stages": [{key: result[key] for key in ("name", "seconds", "metric", "artifact",
                                                  "size_bytes")} for result in results],
        "finetune": finetune,
        "pretraining": by_name["pretrain"]["values"],
        "classified": by_name["classify"]["values"]["predictions"],
    }


def format_table(rows):
    """The stages as an aligned text table.

    >>> print(format_table([{"name": "vocabulary", "seconds": 12.0, "metric": "3,000 tokens",
    ...                      "artifact": "vocabulary/vocab.txt", "size_bytes": 20480}]))
    stage       seconds  key metric    artifact              size
    ----------  -------  ------------  --------------------  -------
    vocabulary  12       3,000 tokens  vocabulary/vocab.txt  20.5 kB
    total       12
    """
    header = ("stage", "seconds", "key metric", "artifact", "size")
    lines = [(row["name"], f"{row['seconds']:.0f}", row["metric"], row["artifact"],
              _human(row["size_bytes"])) for row in rows]
    lines.append(("total", f"{sum(row['seconds'] for row in rows):.0f}", "", "", ""))
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
                     for line in [header, tuple("-" * width for width in widths), *lines])


def _human(size):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
