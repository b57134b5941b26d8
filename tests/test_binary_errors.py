"""Every binary, given an input file or vocabulary that does not exist, as a new user would: one line
naming the binary and the missing path, a non-zero exit status, no traceback."""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import filelock
import pytest

import kerasbert.data.demo
from tests.helpers import run_shared_folder

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
    command = [sys.executable, "-m", f"kerasbert.cli.{module}",
               *(argument.format(**places) for argument in arguments)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return {"status": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
            "missing": missing.format(**places)}


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
            with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
                outcomes = dict(zip(CASES, pool.map(lambda case: _run(case, tmp_path), CASES)))
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
