"""`kerasbert-distill`: distills a tiny BERT teacher's student from text end to end, writes a
`student.keras` that loads alone and a model directory that fine-tuning starts from, resumes
from its checkpoints, hands `--task` runs to `kerasbert-finetune`, and reports bad input in
one line."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import EncoderConfig
from kerasbert.models import PretrainingModel, build_encoder
from kerasbert.training.pretrained_sources import PRETRAINED_MODEL_FILE, pretrained_source

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


def _distill(files, steps):
    return subprocess.run(_command(
        f"--teacher={files / 'teacher.keras'}", f"--model_dir={files / 'run'}",
        f"--text_files={files / 'corpus.txt'}", f"--vocab_file={files / 'vocab.txt'}",
        f"--train_steps={steps}", *DATA), capture_output=True, text=True, env=ENV, timeout=600)


# Each expensive run belongs to one test, so that pytest-xdist workers never repeat it.

def test_distills_resumes_and_hands_the_student_to_finetuning(files):
    first = _distill(files, 4)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "step 4" in first.stdout and "soft_loss" in first.stdout
    assert "teacher bert, 4 layers" in first.stdout and "student bert, 2 layers" in first.stdout
    run = files / "run"
    after_4 = keras.saving.load_model(run / "student.keras")  # no custom objects
    assert isinstance(after_4, PretrainingModel) and after_4.heads == ("mlm",)
    assert after_4.encoder.config == TEACHER_CONFIG.replace(num_layers=2, use_pooler=False)
    tags = {value.tag for name in os.listdir(run / "train")
            for event in tf.compat.v1.train.summary_iterator(str(run / "train" / name))
            for value in event.summary.value}
    assert {"loss", "soft_loss", "mlm_loss", "cosine_loss", "mlm_accuracy"} <= tags

    # The same command with more steps resumes from the step-4 checkpoint.
    second = _distill(files, 6)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "ckpt-4 at step 4" in second.stdout and "step 6" in second.stdout
    assert "ckpt-6.index" in os.listdir(run)
    after_6 = keras.saving.load_model(run / "student.keras")
    assert any(np.abs(np.array(a) - np.array(b)).max() > 0
               for a, b in zip(after_6.weights, after_4.weights))  # it trained on

    # What `kerasbert-finetune --init_from=<model_dir>` loads: the student of the last step.
    description = json.loads((run / PRETRAINED_MODEL_FILE).read_text())
    assert description["heads"] == ["mlm"]
    assert description["tokenizer"]["vocab_file"] == str(files / "vocab.txt")
    source = pretrained_source(run)
    assert source.tokenizer.vocabulary_size() == TEACHER_CONFIG.vocab_size
    for ours, theirs in zip(source.make_encoder().weights, after_6.encoder.weights):
        np.testing.assert_array_equal(ours, theirs)


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
    # All at once (each is mostly imports).
    task = subprocess.Popen(_command("--task=mrpc", "--helpshort"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=ENV)
    runs = {flags: subprocess.Popen(_command(*flags), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=ENV)
            for flags in failures}
    for flags, message in failures.items():
        _, stderr = runs[flags].communicate(timeout=600)
        assert runs[flags].returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("kerasbert-distill: error: ") and message in last, last
    assert not (files / "failed").exists()  # nothing written
    output, _ = task.communicate(timeout=600)
    assert "`kerasbert-finetune`: fine-tune" in output and "kerasbert-distill" not in output
