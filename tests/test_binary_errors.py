"""Every binary, given an input file or vocabulary that does not exist, as a new user would: one line
naming the binary and the missing path, a non-zero exit status, no traceback (each binary's
`run()` in this process: `tests.binaries.run_binary`). And, through the
installed console scripts (as a user runs them: stderr must then be exactly that one line), the
other ways a binary stops: an error from inside TensorFlow (its first message line), a flag out of
bounds, a Hugging Face config.json that is not a JSON object, damaged run files (named, with the
missing field), Ctrl-C while a binary starts (status 130), and Ctrl-C while kerasbert-pretrain
trains: it saves at the current step, exits 130 in one line, and the same command resumes there."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import filelock
import pytest

import kerasbert.data.demo
from tests.binaries import run_binary
from tests.helpers import run_shared_folder

# Every test reads the module's one batch of runs (`results`, about a minute of processes).
pytestmark = pytest.mark.slow

VOCAB = os.path.join(kerasbert.data.demo.vocabulary_dir("wordpiece"), "vocab.txt")
CORPUS = kerasbert.data.demo.pretraining_corpus_files()[0]

# binary: (module, its arguments, the missing path); "{missing}" is a folder that does not exist,
# "{out}" the case's own folder to write to, "{file}" an existing plain file.
CASES = {
    "kerasbert-vocab": ("vocab", ["--input_files={missing}/corpus.txt", "--type=wordpiece",
                                  "--vocab_size=100", "--output_dir={out}/vocab"],
                        "{missing}/corpus.txt"),
    "kerasbert-create-pretraining-data (corpus)": (
        "create_pretraining_data", ["--input_file={missing}/corpus.txt",
                                    "--output_file={out}/data/train.tfrecord", f"--vocab_file={VOCAB}"],
        "{missing}/corpus.txt"),
    "kerasbert-create-pretraining-data (vocabulary)": (
        "create_pretraining_data", [f"--input_file={CORPUS}", "--output_file={out}/data2/train.tfrecord",
                                    "--vocab_file={missing}/vocab.txt"],
        "{missing}/vocab.txt"),
    "kerasbert-pretrain (records)": (
        "pretrain", ["--model=bert_tiny_uncased", "--input_files={missing}/train-*.tfrecord",
                     "--train_steps=1", "--model_dir={out}/pretrain"],
        "{missing}/train-*.tfrecord"),
    "kerasbert-pretrain (vocabulary)": (
        "pretrain", ["--model=bert_tiny_uncased", f"--text_files={CORPUS}",
                     "--vocab_file={missing}/vocab.txt",
                     "--train_steps=1", "--model_dir={out}/pretrain2"],
        "{missing}/vocab.txt"),
    "kerasbert-finetune": (
        "finetune", ["--task=sst2", "--init_from=bert_tiny_uncased", f"--vocab_file={VOCAB}",
                     "--train_file={missing}/train.tsv", "--dev_file={missing}/dev.tsv",
                     "--model_dir={out}/finetune"],
        "{missing}/train.tsv"),
    "kerasbert-distill": (
        "distill", ["--teacher={missing}/teacher.keras", f"--text_files={CORPUS}", f"--vocab_file={VOCAB}",
                    "--train_steps=1", "--model_dir={out}/distill"],
        "{missing}/teacher.keras"),
    "kerasbert-export": ("export", ["--model={missing}/model.keras", "--output_dir={out}/export"],
                         "{missing}/model.keras"),
    "kerasbert-convert": ("convert", ["--input={missing}/hf_model", "--output={out}/model.keras"],
                          "{missing}/hf_model"),
    "kerasbert-classify": ("classify", ["--export_dir={missing}/export", "--input_file={file}"],
                           "{missing}/export"),
    "kerasbert-extract-features": (
        "extract_features", ["--model={missing}/model.keras", "--input_file={file}",
                             "--output_file={out}/features.jsonl"],
        "{missing}/model.keras"),
    "kerasbert-demo": ("demo", ["--run_dir={file}/run"], "{file}/run"),
}


# The binaries whose outputs are files: a failed run leaves none (the trainers may have started
# their --model_dir).
WRITE_NOTHING = ("kerasbert-vocab", "kerasbert-create-pretraining-data", "kerasbert-export",
                 "kerasbert-convert", "kerasbert-extract-features")


def _output_folder(tmp_path, case):
    return tmp_path / "out" / "".join(c if c.isalnum() else "_" for c in case)


def _run(case, tmp_path):
    module, arguments, missing = CASES[case]
    places = {"missing": str(tmp_path / "missing"), "out": str(_output_folder(tmp_path, case)),
              "file": str(tmp_path / "input.txt")}
    result = run_binary(module, *(argument.format(**places) for argument in arguments))
    return {"status": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
            "missing": missing.format(**places)}


# Beyond a missing input. binary: (its arguments, exit status, the line it must print); "{op_error}"
# stands for the first message line of the TensorFlow error a missing checkpoint raises (which
# the binary names with its flag and path), "{dir}"
# for a folder the case's setup made (`_prepare`).
ONE_LINE_CASES = {
    "error inside TensorFlow (kerasbert-pretrain --init_checkpoint)": (
        "kerasbert-pretrain", ["--model=bert_tiny_uncased", "--input_files={file}",
                               "--train_steps=1", "--init_checkpoint={missing}/ckpt-1",
                               "--model_dir={out}"],
        1, "kerasbert-pretrain: error: --init_checkpoint {missing}/ckpt-1: cannot be read as a "
           "checkpoint ({op_error})"),
    "flag out of bounds (kerasbert-finetune --num_train_epochs=0)": (
        "kerasbert-finetune", ["--task=sst2", "--model_dir={out}", "--num_train_epochs=0"],
        1, "kerasbert-finetune: error: flag --num_train_epochs=0.0: --num_train_epochs must be "
           "more than 0"),
    "flag out of bounds (kerasbert-create-pretraining-data --dupe_factor=0)": (
        "kerasbert-create-pretraining-data", ["--input_file={file}", "--output_file={out}/x",
                                              "--dupe_factor=0"],
        1, "kerasbert-create-pretraining-data: error: flag --dupe_factor=0: 0 is not a positive "
           "integer"),
    "config.json not an object (kerasbert-convert)": (
        "kerasbert-convert", ["--input={dir}", "--output={out}/model.keras"],
        1, "kerasbert-convert: error: {dir}/config.json is not a Hugging Face config: it holds an "
           "array, not an object"),
    "kerasbert_model.json not JSON (kerasbert-extract-features)": (
        "kerasbert-extract-features", ["--model={dir}", "--input_file={file}",
                                       "--output_file={out}/features.jsonl"],
        1, "kerasbert-extract-features: error: {dir}/kerasbert_model.json is not a "
           "kerasbert_model.json: not valid JSON (Expecting property name enclosed in double "
           "quotes: line 1 column 2 (char 1))"),
    "manifest without a field (kerasbert-create-pretraining-data)": (
        "kerasbert-create-pretraining-data", ["--input_file={file}", "--output_file={dir}/train",
                                              f"--vocab_file={VOCAB}"],
        1, "kerasbert-create-pretraining-data: error: {dir}/train.manifest.json: no field 'flags'"),
}

# The flags of a tiny pretraining run that checkpoints every 5 steps.
TINY_PRETRAINING = ["--model=bert_tiny_uncased", f"--text_files={CORPUS}", f"--vocab_file={VOCAB}",
                    "--config_overrides=num_layers=1,hidden_size=32,num_heads=2,"
                    "intermediate_size=64,max_positions=32",
                    "--max_seq_length=32", "--max_predictions_per_seq=4", "--batch_size=4",
                    "--train_steps=40", "--checkpoint_interval=5", "--steps_per_loop=1"]
TIMEOUT_SECONDS = 600
# The console scripts run in a user's environment: without the test session's
# TF_CPP_MIN_LOG_LEVEL (tests/conftest.py sets 2, which lets TensorFlow's C++ error-level lines,
# such as oneDNN's int64 fallback notice, reach stderr), so a binary's own quiet default applies.
USER_ENV = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}


def console_script(name):
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.isfile(beside) else shutil.which(name)


def _prepare(case, folder):
    """The files a case reads (beside its output folder); their folder."""
    folder.mkdir(parents=True)
    if "config.json" in case:
        (folder / "config.json").write_text("[]\n")
    elif "kerasbert_model.json" in case:
        (folder / "kerasbert_model.json").write_text("{encoder_config: 1}\n")
    elif "manifest" in case:
        (folder / "train.manifest.json").write_text('{"version": 1}\n')
    return folder


def _op_error(checkpoint):
    """The first message line of the error TensorFlow raises restoring a missing checkpoint."""
    import tensorflow as tf

    try:
        tf.train.Checkpoint(value=tf.Variable(0.0)).restore(checkpoint)
    except tf.errors.OpError as error:
        return error.message.strip().splitlines()[0]
    raise AssertionError(f"restoring {checkpoint} raised nothing")


def _run_one_line_case(case, tmp_path):
    binary, arguments, status, line = ONE_LINE_CASES[case]
    out = _output_folder(tmp_path, case)
    places = {"missing": str(tmp_path / "missing"), "out": str(out),
              "file": str(tmp_path / "input.txt"),
              "dir": str(_prepare(case, tmp_path / "inputs" / out.name))}
    result = subprocess.run([console_script(binary), *(a.format(**places) for a in arguments)],
                            capture_output=True, text=True, timeout=TIMEOUT_SECONDS, env=USER_ENV)
    places["op_error"] = _op_error(f"{places['missing']}/ckpt-1")
    return {"status": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
            "expected_status": status, "expected_line": line.format(**places)}


def _ctrl_c_as_in_a_terminal():
    """In the binary's process: Ctrl-C (SIGINT) handled as a terminal's program gets it, also when
    the tests run in a background job of a shell, which starts them with SIGINT ignored (and an
    ignored signal stays ignored across `exec`)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_while_starting(tmp_path):
    """Ctrl-C to kerasbert-vocab while it loads TensorFlow (its library is mapped)."""
    process = subprocess.Popen(
        [console_script("kerasbert-vocab"), f"--input_files={CORPUS}", "--type=wordpiece",
         "--vocab_size=100", f"--output_dir={tmp_path / 'interrupted_vocab'}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=USER_ENV,
        preexec_fn=_ctrl_c_as_in_a_terminal)
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while "libtensorflow" not in open(f"/proc/{process.pid}/maps").read():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=TIMEOUT_SECONDS)
    return {"status": process.returncode, "stdout": stdout, "stderr": stderr}


def _interrupt_training(tmp_path):
    """Ctrl-C to kerasbert-pretrain once it has saved step 5; then the same command again."""
    model_dir = tmp_path / "interrupted_pretraining"
    command = [console_script("kerasbert-pretrain"), f"--model_dir={model_dir}", *TINY_PRETRAINING]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=USER_ENV, preexec_fn=_ctrl_c_as_in_a_terminal)
    state, deadline = model_dir / "checkpoint", time.monotonic() + TIMEOUT_SECONDS
    while not (state.exists() and 'ckpt-5"' in state.read_text()):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=TIMEOUT_SECONDS)
    latest = state.read_text().splitlines()[0]
    saved = sorted(name for name in os.listdir(model_dir) if name.endswith(".index"))
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                           env=USER_ENV)
    return {"status": process.returncode, "stdout": stdout, "stderr": stderr,
            "model_dir": str(model_dir), "latest": latest, "saved": saved,
            "rerun_status": rerun.returncode, "rerun_stdout": rerun.stdout,
            "rerun_stderr": rerun.stderr}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every case run at once (each process spends most of its few seconds importing TensorFlow);
    once per test run: under pytest-xdist the first worker runs them in the run's shared folder,
    holding a lock, and the other reads what they printed."""
    shared = run_shared_folder(tmp_path_factory)
    tmp_path = shared / "binary_errors"
    with filelock.FileLock(str(shared / "binary_errors.lock")):
        if not (tmp_path / "results.json").exists():
            tmp_path.mkdir()
            (tmp_path / "input.txt").write_text("a sentence\n")
            jobs = {**{case: (_run_one_line_case, case) for case in ONE_LINE_CASES},
                    "interrupted while starting": (_interrupt_while_starting,),
                    "interrupted while training": (_interrupt_training,)}
            # The training run first: it is the longest chain (two runs, one after the other).
            order = sorted(jobs, key=lambda name: name != "interrupted while training")
            with ThreadPoolExecutor(max_workers=8) as pool:
                futures = {name: pool.submit(*jobs[name], tmp_path) for name in order}
                # Meanwhile, the in-process cases here (the pool's threads only wait for
                # their processes).
                outcomes = {case: _run(case, tmp_path) for case in CASES}
                outcomes.update({name: future.result() for name, future in futures.items()})
            (tmp_path / "results.json").write_text(json.dumps(outcomes))
    return tmp_path, json.loads((tmp_path / "results.json").read_text())


@pytest.mark.parametrize("case", CASES)
def test_missing_input_is_one_line_naming_it(results, case):
    tmp_path, outcomes = results
    outcome = outcomes[case]
    stderr, missing = outcome["stderr"].strip(), outcome["missing"]
    assert outcome["status"] != 0, outcome["stdout"][-2000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    last_line = stderr.splitlines()[-1] if stderr else ""
    binary = case.split(" ")[0]
    assert last_line.startswith(f"{binary}: "), stderr[-3000:]
    assert missing in last_line, last_line
    if binary in WRITE_NOTHING:
        written = [files for _, _, files in os.walk(_output_folder(tmp_path, case)) if files]
        assert not written, written


@pytest.mark.parametrize("case", ONE_LINE_CASES)
def test_other_failures_are_one_line(results, case):
    outcome = results[1][case]
    assert outcome["stderr"].strip() == outcome["expected_line"], outcome["stderr"][-3000:]
    assert outcome["status"] == outcome["expected_status"], outcome["stdout"][-2000:]


def test_ctrl_c_while_starting_is_one_line_and_status_130(results):
    outcome = results[1]["interrupted while starting"]
    assert outcome["stderr"].strip() == "kerasbert-vocab: interrupted", outcome["stderr"][-3000:]
    assert outcome["status"] == 130


def test_ctrl_c_in_training_saves_the_current_step_and_the_rerun_resumes_there(results):
    outcome = results[1]["interrupted while training"]
    model_dir = outcome["model_dir"]
    lines = outcome["stderr"].strip().splitlines()
    assert len(lines) == 1 and outcome["status"] == 130, outcome["stderr"][-3000:]
    prefix = f"kerasbert-pretrain: interrupted; saved {model_dir}/ckpt-"
    assert lines[0].startswith(prefix), lines
    step = int(lines[0][len(prefix):].split(" ")[0])
    assert lines[0] == (f"{prefix}{step} at step {step}; run the same command again to resume")
    assert step >= 5 and outcome["latest"] == f'model_checkpoint_path: "ckpt-{step}"'
    assert f"ckpt-{step}.index" in outcome["saved"]
    assert outcome["rerun_status"] == 0, outcome["rerun_stderr"][-3000:]
    assert f"Restored {model_dir}/ckpt-{step} at step {step}" in outcome["rerun_stdout"]
    assert "Done:" in outcome["rerun_stdout"]
