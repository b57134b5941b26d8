"""Fault injection for the binaries: run one, SIGKILL it at a seeded random point of its busy
part, rerun it; and the small file helpers the reliability tests share (TFRecord framing, tmpfs
mounts, the figures file)."""

import contextlib
import glob
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import zipfile

import filelock

from tests.helpers import run_shared_folder

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
KILLS_PER_STAGE = 5
FIGURES_FILE = "fault_figures.jsonl"


def binary(module, *flags):
    """The command line of `python -m kerasbert.cli.<module> <flags>`."""
    return [sys.executable, "-m", f"kerasbert.cli.{module}", *map(str, flags)]


class Run:
    """One finished process: its command, exit status and output, and whether it was killed
    (still running when its kill came)."""

    def __init__(self, command, returncode, stdout, stderr, killed):
        self.command, self.returncode = command, returncode
        self.stdout, self.stderr, self.killed = stdout, stderr, killed

    def describe(self):
        return (f"{' '.join(map(str, self.command))}\nexit {self.returncode}\n"
                f"stdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-3000:]}")

    def error_lines(self, program):
        """The lines of stderr that start with `<program>: error:`."""
        return [line for line in self.stderr.splitlines() if line.startswith(f"{program}: error:")]


def run(command, log_dir, marker=None, kill_after=None, events=None, kill_at_cpu=None,
        kill_when=None):
    """Run `command` (stdout and stderr into files in `log_dir`). With `kill_after` seconds,
    SIGKILL it that long after `marker(stdout_path)` first holds (after the start, without a
    marker); with `kill_at_cpu`, once it has used that many CPU seconds (which, unlike wall
    time, does not depend on what else the machine runs). Returns a `Run`; `killed` says
    whether it was still running when the kill came; `cpu_seconds` what it used (sampled every
    10 ms); `events` ({name: marker}) are timed into the Run's `events` ({name: seconds after
    start}). `kill_when(stdout_path)`, if given, kills it as soon as it holds (a bound on a
    `kill_after` kill for a run that goes faster than the one its delay was measured on)."""
    events = dict(events or {})
    os.makedirs(log_dir, exist_ok=True)
    out_path, err_path = os.path.join(log_dir, "stdout.txt"), os.path.join(log_dir, "stderr.txt")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=ENV)
        marked = None
        killed = False
        seen = {}
        cpu = 0.0
        while process.poll() is None:
            now = time.monotonic()
            seen.update({name: now - started for name, event in events.items()
                         if name not in seen and event(out_path)})
            if now > started + 900:
                process.kill()
                raise AssertionError(f"still running after 900 s: {command}")
            if marked is None and (marker is None or marker(out_path)):
                marked = now
            cpu = _cpu_seconds(process.pid, cpu)
            if (kill_after is not None and marked is not None and now >= marked + kill_after) or (
                    kill_at_cpu is not None and cpu >= kill_at_cpu) or (
                    kill_when is not None and kill_when(out_path)):
                process.send_signal(signal.SIGKILL)
                killed = True
                process.wait()
                break
            time.sleep(0.01)
    with open(out_path) as out, open(err_path) as err:
        result = Run(command, process.returncode, out.read(), err.read(), killed)
    result.events, result.cpu_seconds = seen, cpu
    return result


def _cpu_seconds(pid, last):
    """User + system CPU seconds of process `pid` and its waited-for children (`last` if it has
    just ended)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return last
    # Fields 14-17 of proc(5) (utime, stime, cutime, cstime), counted after the command name.
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK") or last


def checked_run(command, log_dir, marker=None, events=None):
    """`run` to completion; an AssertionError with the output unless it exits 0."""
    result = run(command, log_dir, marker, events=events)
    assert result.returncode == 0, result.describe()
    return result


def appears(pattern):
    """A marker: a file matching the glob `pattern` exists."""
    return lambda _: bool(glob.glob(str(pattern)))


def recorded(prefix):
    """A marker: the checkpoint state file beside `prefix` (`.../ckpt-4`) names it, so the
    checkpoint is whole and a rerun resumes from it. Its `.index` file appears earlier: a kill
    between the two leaves a rerun starting from the checkpoint before."""
    state = os.path.join(os.path.dirname(str(prefix)), "checkpoint")
    name = re.compile(r'"(?:[^"]*/)?%s"' % re.escape(os.path.basename(str(prefix))))

    def check(_):
        try:
            with open(state, encoding="utf-8") as file:
                return bool(name.search(file.read()))
        except FileNotFoundError:
            return False
    return check


def appears_anew(pattern):
    """A marker: a file matching the glob `pattern` exists that did not when this was called."""
    before = set(glob.glob(str(pattern)))
    return lambda _: bool(set(glob.glob(str(pattern))) - before)


def kill_points(seed, span, count=KILLS_PER_STAGE, low=0.05, high=0.9):
    """`count` seeded random points of [low, high] x `span` (a run's seconds or CPU seconds):
    one drawn in each of `count` equal slices, so that early and late points are both tried."""
    rng = random.Random(seed)
    width = (high - low) / count
    return [span * (low + width * (index + rng.random())) for index in range(count)]


class KillChain:
    """Runs of one command over one output folder until `kills` of them were SIGKILLed; then a
    last run to completion (each run is the rerun of the kill before it).

    `plans[i]()`, called just before run i, gives `run`'s kill arguments (`marker` and
    `kill_after`, or `kill_at_cpu`); a plan can look at what the folder holds (where a resumed
    run will start). After each kill, `after_kill()` records what the folder holds. A run that
    finishes before its kill (a loaded machine makes timings drift) is checked with
    `finished_ok()`, then `reset()` empties the folder and the next plan starts over; without
    `reset` such a run is a problem. Give more plans than `kills` for that case. A kill that
    came after the output was complete (`complete()` holds after it: the run had finished its
    work, only its exit was left) injected no fault: it is not counted (`after_completion`
    keeps it), `reset()` empties the folder and the next plan is tried.
    """

    def __init__(self, command, log_dir, plans, after_kill=lambda: None, kills=KILLS_PER_STAGE,
                 reset=None, finished_ok=lambda: True, complete=lambda: False):
        self.killed, self.left, self.finished_early, self.after_completion = [], [], [], []
        self.kills = kills
        for index, plan in enumerate(plans):
            if self.injected >= kills:
                break
            result = run(command, os.path.join(log_dir, f"run_{index}"), **plan())
            if result.killed and reset is not None and complete():
                self.after_completion.append(result)
                reset()
            elif result.killed or reset is None:
                self.killed.append(result)
                self.left.append(after_kill())
            else:
                self.finished_early.append((result, result.returncode == 0 and finished_ok()))
                reset()
        self.final = run(command, os.path.join(log_dir, "final"))

    @property
    def injected(self):
        return sum(run.killed for run in self.killed)

    def reruns_ok(self):
        """Whether each rerun got going: it was running when its kill came, or (the last) it
        finished with status 0."""
        return [run.killed for run in self.killed[1:]] + [self.final.returncode == 0]

    def problems(self):
        """Descriptions of the runs that were not killed as planned or did not finish."""
        found = [f"run {index} ended before its kill:\n{run.describe()}"
                 for index, run in enumerate(self.killed) if not run.killed]
        found += [f"a run that finished before its kill left a wrong output:\n{run.describe()}"
                  for run, ok in self.finished_early if not ok]
        if self.injected < self.kills:
            found.append(f"only {self.injected} of {self.kills} kills landed")
        if self.final.returncode != 0:
            found.append("the last rerun failed:\n" + self.final.describe())
        return found


def figures_path(tmp_path_factory):
    """The session's figures file, shared by the pytest-xdist workers (their common folder)."""
    return run_shared_folder(tmp_path_factory) / FIGURES_FILE


def record_figures(path, fault, injected, survived, data_lost, not_counted=0):
    """Append one fault kind's figures as a JSON line (under a lock: several workers write);
    `not_counted`: kills that landed after the output was complete (`KillChain`)."""
    with filelock.FileLock(f"{path}.lock"):
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps({"fault": fault, "injected": injected, "survived": survived,
                                   "data_lost": data_lost, "not_counted": not_counted}) + "\n")


def read_figures(path):
    """{fault: {"injected", "survived", "data_lost", "not_counted"}} summed over the file's
    lines."""
    totals = {}
    if not os.path.exists(path):
        return totals
    with open(path, encoding="utf-8") as file:
        for line in file:
            entry = json.loads(line)
            total = totals.setdefault(entry["fault"], {"injected": 0, "survived": 0,
                                                       "data_lost": 0, "not_counted": 0})
            for name in total:
                total[name] += entry.get(name, 0)
    return totals


def tfrecord_spans(path):
    """[(start, end)] byte spans of each record's framing + data in the TFRecord file `path`
    (8-byte length, 4-byte length CRC, the data, 4-byte data CRC)."""
    data = open(path, "rb").read()
    spans, offset = [], 0
    while offset < len(data):
        length = int.from_bytes(data[offset:offset + 8], "little")
        spans.append((offset, offset + 16 + length))
        offset += 16 + length
    assert offset == len(data), f"{path} is not a plain TFRecord file"
    return spans


@contextlib.contextmanager
def tmpfs(directory, size="200k", read_only=False):
    """A small tmpfs mounted at `directory` for the block (read-only with `read_only`): a real
    full disk (ENOSPC) or read-only file system (EROFS) for a child process. Yields None once
    mounted, or why mounting failed (it needs privileges); the caller then skips, naming why."""
    os.makedirs(directory, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        yield mounted.stderr.strip() or f"mount exited {mounted.returncode}"
        return
    try:
        yield None
    finally:
        subprocess.run(["umount", str(directory)], check=True)


def small_corpus(directory, files=2, lines=300):
    """`files` text files of the shipped corpus's first `lines` lines of a shard each (documents
    separated by blank lines, as the shards are); returns their paths."""
    import gzip

    import kerasbert.data.demo

    os.makedirs(directory, exist_ok=True)
    paths = []
    for index, shard in enumerate(kerasbert.data.demo.pretraining_corpus_files()[:files]):
        with gzip.open(shard, "rt", encoding="utf-8") as file:
            text = "\n".join(file.read().split("\n")[:lines]).strip() + "\n"
        path = os.path.join(directory, f"part-{index}.txt")
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        paths.append(path)
    return paths


def final_files(directory):
    """{name: bytes} of the files in `directory` that carry a final name (not a `.tmp-` or other
    hidden temporary file)."""
    if not os.path.isdir(directory):
        return {}
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in sorted(os.listdir(directory))
            if not name.startswith(".") and os.path.isfile(os.path.join(directory, name))}


def damaged_outputs(path):
    """The outputs at `path` (a file, or a folder's files under final names, in any subfolder)
    that are half-written: a JSON file that does not parse, a `.keras` or zip file that is not
    whole, a TFRecord file whose framing does not add up, and a folder's latest checkpoint if it
    does not read."""
    import tensorflow as tf

    if not os.path.exists(path):
        return []
    files = [str(path)] if os.path.isfile(path) else []
    for folder, folders, names in os.walk(path):
        folders[:] = [name for name in folders if not name.startswith(".")]  # temporary ones
        files += [os.path.join(folder, name) for name in names if not name.startswith(".")]
    damaged = []
    for file in files:
        try:
            if file.endswith(".json"):
                with open(file, encoding="utf-8") as handle:
                    json.load(handle)
            elif file.endswith((".keras", ".zip")):
                with zipfile.ZipFile(file) as archive:
                    assert archive.testzip() is None
            elif file.endswith(".tfrecord"):
                tfrecord_spans(file)
        except Exception:  # noqa: BLE001 (any failure to read is the finding)
            damaged.append(file)
    for folder in {os.path.dirname(file) for file in files}:
        latest = tf.train.latest_checkpoint(folder)
        if latest is not None:
            try:
                checkpoint_values(latest)
            except Exception:  # noqa: BLE001
                damaged.append(latest)
    return sorted(damaged)


def contents(path):
    """{relative name: bytes} of the file `path` or of every file under the folder `path`."""
    if os.path.isfile(path):
        return {"": open(path, "rb").read()}
    return {os.path.relpath(os.path.join(folder, name), path):
            open(os.path.join(folder, name), "rb").read()
            for folder, _, names in os.walk(path) for name in names}


def chain_figures(chain, left_ok, final_ok):
    """(injected, survived, data lost, not counted) of a `KillChain`, from what the folder held:
    `left_ok[i]` says whether what kill i left on disk was sound (no damaged file under a final
    name), `final_ok` whether the last rerun's output equals an uninterrupted run's. A kill is
    survived when the rerun after it got going and `final_ok`; data is lost once for each kill
    that left a damaged file and once if the final output differs. Kills that landed after the
    output was complete are not counted (`KillChain.after_completion`)."""
    survived = sum(run.killed and rerun_ok and final_ok
                   for run, rerun_ok in zip(chain.killed, chain.reruns_ok()))
    return (chain.injected, survived, sum(not ok for ok in left_ok) + (not final_ok),
            len(chain.after_completion))


# The tiny pretraining setting the reliability tests share: BERT, 2 layers of hidden size 32,
# on pretraining TFRecords of sequences of 64 tokens.
MAX_SEQ_LENGTH, MAX_PREDICTIONS = 64, 8
TINY_BERT = "num_layers=2,hidden_size=32,num_heads=2,intermediate_size=64,max_positions=64"


def write_pretraining_records(path, corpus, tokenizer):
    """Masked NSP instances of the text files `corpus` as a plain TFRecord file at `path`
    (kerasbert's own writer, in this process); returns how many."""
    from kerasbert.data.pretraining import PretrainingDataConfig, pretraining_dataset
    from kerasbert.data.tfrecords import serialize_instances, write_tfrecord

    batches = pretraining_dataset(corpus, tokenizer, PretrainingDataConfig(
        objective="nsp", batch_size=16, max_seq_length=MAX_SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS), epochs=1, seed=3)
    records = [record for batch in batches for record in serialize_instances(batch).numpy()]
    write_tfrecord(str(path), records)
    return len(records)


def pretrain_command(model_dir, input_files, vocab_file, *flags):
    """`kerasbert-pretrain` of the tiny BERT on `input_files` (TFRecords)."""
    return binary("pretrain", "--model=bert_tiny_uncased", f"--model_dir={model_dir}",
                  f"--config_overrides={TINY_BERT}", f"--input_files={input_files}",
                  f"--vocab_file={vocab_file}", "--batch_size=8",
                  f"--max_seq_length={MAX_SEQ_LENGTH}",
                  f"--max_predictions_per_seq={MAX_PREDICTIONS}", "--learning_rate=1e-3", *flags)


def checkpoint_values(prefix):
    """{name: array} of every numeric tensor in the checkpoint `prefix` (weights, optimizer
    slots, step, data iterator position excluded: it is a string)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name, dtype in
            reader.get_variable_to_dtype_map().items() if dtype.is_floating or dtype.is_integer}


def same_values(first, second):
    """Whether two `checkpoint_values` are bit for bit equal."""
    import numpy as np

    return first.keys() == second.keys() and all(
        np.array_equal(first[name], second[name]) for name in first)


def finetune_command(root, rows, num_layers, *flags):
    """A `command(model_dir)` for `kerasbert-finetune` on the first `rows` (`{"train": n,
    "dev": m}`) shipped gloss examples, from a random tiny encoder of `num_layers` saved under
    `root`, with the shared vocabulary, sequences of 32, batches of 8 and `flags`."""
    import gzip

    import kerasbert
    from kerasbert.data import demo

    vocab = os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt")
    files = {}
    for split, count in rows.items():
        with gzip.open(demo.classification_files()[split], "rt", encoding="utf-8") as file:
            lines = file.read().splitlines()[:count + 1]
        files[split] = root / f"{split}.tsv"
        files[split].write_text("\n".join(lines) + "\n")
    with open(vocab, encoding="utf-8") as file:
        vocab_size = len(file.readlines())
    encoder = kerasbert.zoo.build("bert_tiny_uncased", vocab_size=vocab_size,
                                  num_layers=num_layers, hidden_size=32, num_heads=2,
                                  intermediate_size=64, max_positions=64)
    encoder.save(root / "encoder.keras")

    def command(model_dir):
        return binary("finetune", "--task=wordnet_gloss", f"--train_file={files['train']}",
                      f"--dev_file={files['dev']}", f"--init_from={root / 'encoder.keras'}",
                      f"--vocab_file={vocab}", f"--model_dir={model_dir}", "--max_seq_length=32",
                      "--train_batch_size=8", "--eval_batch_size=32", *flags)

    return command
