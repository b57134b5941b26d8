"""`kerasbert-distill`: distills a tiny BERT teacher's student from text end to end, writes a
`student.keras` that loads alone and a model directory that fine-tuning starts from, resumes
after a kill bit for bit where an uninterrupted run ends, refuses a rerun with other values,
hands `--task` runs to `kerasbert-finetune`, and reports bad input in one line. The binary runs
in this process (`tests.binaries.run_binary`), except the run that is killed and the `--task`
hand-over (it replaces its process)."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import EncoderConfig
from kerasbert.models import PretrainingModel, build_encoder
from kerasbert.training.pretrained_sources import PRETRAINED_MODEL_FILE, pretrained_source
from tests.binaries import run_binary

pytestmark = pytest.mark.slow

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [f"w{index}" for index in range(115)]
# The tiny teacher: 4 layers of hidden size 32 over a 120-token vocabulary.
TEACHER_CONFIG = EncoderConfig(family="bert", vocab_size=len(SPECIAL) + len(WORDS),
                               hidden_size=32, num_layers=4, num_heads=2, intermediate_size=64,
                               max_positions=64)
DATA = ["--max_seq_length=16", "--max_predictions_per_seq=3", "--batch_size=4",
        "--steps_per_loop=2", "--checkpoint_interval=2", "--optimizer=adam",
        "--learning_rate=1e-3"]


def _command(*flags):
    return [sys.executable, "-m", "kerasbert.cli.distill", *flags]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A vocabulary, a text corpus of it, a teacher saved as `.keras`, and things that fail."""
    root = tmp_path_factory.mktemp("distill_cli")
    (root / "vocab.txt").write_text("\n".join(SPECIAL + WORDS) + "\n")
    (root / "other_vocab.txt").write_text("\n".join(SPECIAL + WORDS[:50]) + "\n")
    rng = np.random.default_rng(0)
    documents = ["\n".join(" ".join(rng.choice(WORDS, size=rng.integers(4, 9)))
                           for _ in range(6)) for _ in range(8)]
    (root / "corpus.txt").write_text("\n\n".join(documents) + "\n")
    keras.utils.set_random_seed(0)
    teacher = PretrainingModel(build_encoder(TEACHER_CONFIG), ("mlm", "nsp"))
    teacher.save(root / "teacher.keras")
    teacher.encoder.save(root / "encoder.keras")
    return root


def _distill_flags(files, steps, model_dir="run"):
    return [f"--teacher={files / 'teacher.keras'}", f"--model_dir={files / model_dir}",
            f"--text_files={files / 'corpus.txt'}", f"--vocab_file={files / 'vocab.txt'}",
            f"--train_steps={steps}", *DATA]


def _distill(files, steps, model_dir="run"):
    return run_binary("distill", *_distill_flags(files, steps, model_dir))


def _checkpoint(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name, dtype in
            reader.get_variable_to_dtype_map().items() if dtype.is_floating or dtype.is_integer}


# Each expensive run belongs to one test, so that pytest-xdist workers never repeat it.

def test_distills_resumes_and_hands_the_student_to_finetuning(files):
    steps = 40
    first = _distill(files, steps)
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"step {steps}" in first.stdout and "soft_loss" in first.stdout
    assert "teacher bert, 4 layers" in first.stdout and "student bert, 2 layers" in first.stdout
    run = files / "run"
    student = keras.saving.load_model(run / "student.keras")  # no custom objects
    assert isinstance(student, PretrainingModel) and student.heads == ("mlm",)
    assert student.encoder.config == TEACHER_CONFIG.replace(num_layers=2, use_pooler=False)
    tags = {value.tag for name in os.listdir(run / "train")
            for event in tf.compat.v1.train.summary_iterator(str(run / "train" / name))
            for value in event.summary.value}
    assert {"loss", "soft_loss", "mlm_loss", "cosine_loss", "mlm_accuracy"} <= tags

    # What `kerasbert-finetune --init_from=<model_dir>` loads: the student of the last step.
    description = json.loads((run / PRETRAINED_MODEL_FILE).read_text())
    assert description["heads"] == ["mlm"]
    assert description["tokenizer"]["vocab_file"] == str(files / "vocab.txt")
    source = pretrained_source(run)
    assert source.tokenizer.vocabulary_size() == TEACHER_CONFIG.vocab_size
    for ours, theirs in zip(source.make_encoder().weights, student.encoder.weights):
        np.testing.assert_array_equal(ours, theirs)

    # Killed (SIGKILL) once its second checkpoint is on disk, then rerun: it resumes and ends
    # bit for bit where the uninterrupted run ended.
    killed = files / "killed"
    process = subprocess.Popen(_command(*_distill_flags(files, steps, "killed")),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.time() + 300
    while process.poll() is None and not (killed / "ckpt-4.index").exists():
        assert time.time() < deadline, "no checkpoint within 5 minutes"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / f"ckpt-{steps}.index").exists(), "finished before the kill"
    resumed = _distill(files, steps, "killed")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Restored" in resumed.stdout
    ours, theirs = _checkpoint(killed / f"ckpt-{steps}"), _checkpoint(run / f"ckpt-{steps}")
    assert ours.keys() == theirs.keys() and len(ours) > 50
    for name in theirs:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    for ours, theirs in zip(keras.saving.load_model(killed / "student.keras").weights,
                            student.weights):
        np.testing.assert_array_equal(ours, theirs)

    # More steps change the learning-rate schedule: not the recorded run, so refused.
    longer = _distill(files, steps + 2)
    assert longer.returncode == 1 and "Traceback" not in longer.stderr
    assert longer.stderr.strip().splitlines()[-1].startswith("kerasbert-distill: error: ")
    assert f"--train_steps: recorded {steps}, given {steps + 2}" in longer.stderr


def test_bad_input_is_one_line_and_task_runs_are_finetunes(files):
    text = [f"--text_files={files / 'corpus.txt'}", f"--vocab_file={files / 'vocab.txt'}",
            f"--model_dir={files / 'failed'}", "--train_steps=2", *DATA]
    teacher = f"--teacher={files / 'teacher.keras'}"
    failures = {  # flags -> the error
        (f"--teacher={files / 'encoder.keras'}", *text):
            "encoder.keras: The teacher (Encoder) has no MLM head",
        (teacher, "--layer_map=0,9", *text):
            "layer map index 9 is out of range: the teacher has 4 layers (0..3)",
        (teacher, *text, f"--vocab_file={files / 'other_vocab.txt'}"):
            f"Mismatched vocabularies: --vocab_file {files / 'other_vocab.txt'} has 55 tokens, "
            "the teacher's vocab_size is 120",
    }
    task = subprocess.Popen(_command("--task=mrpc", "--helpshort"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=ENV)
    for flags, message in failures.items():
        run = run_binary("distill", *flags)
        stderr = run.stderr
        assert run.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("kerasbert-distill: error: ") and message in last, last
    assert not (files / "failed").exists()  # nothing written
    output, _ = task.communicate(timeout=600)
    assert "`kerasbert-finetune`: fine-tune" in output and "kerasbert-distill" not in output
