"""A binary on `gs://`, through TensorFlow's own GCS client against a local emulator
(tests/gcs_emulator.py: gcp-storage-emulator from the test extra, behind a TLS proxy, since
TensorFlow's GCS endpoints are built in and only its proxy and CA settings can be changed). The
file layer's battery on `gs://` is in tests/test_file_system.py."""

import gzip
import itertools
import os
import subprocess
import sys
import uuid

import pytest

from kerasbert import file_system
from kerasbert.data import demo
from tests.gcs_emulator import gcs_bucket  # noqa: F401  (a fixture)


@pytest.fixture
def gcs_folder(gcs_bucket):  # noqa: F811  (the fixture imported above)
    folder = f"{gcs_bucket}/test-{uuid.uuid4().hex[:12]}"
    yield folder
    file_system.rmtree(folder)


PRETRAIN_FLAGS = [
    "--model=bert_tiny_uncased", "--config_overrides=num_layers=2,hidden_size=32,num_heads=2,"
    "intermediate_size=64,max_positions=64", "--batch_size=8", "--max_seq_length=64",
    "--max_predictions_per_seq=8", "--learning_rate=1e-3", "--steps_per_loop=2",
    "--checkpoint_interval=2"]


@pytest.mark.slow
def test_pretraining_binary_reads_and_writes_gs_and_resumes_from_it(gcs_folder, tmp_path):
    """The cloud recipe's shape: `kerasbert-pretrain` with its text, vocabulary and model_dir on
    gs://, a separate process each time (the emulator is reached the way GCS is, over the
    network), then run again: the run record read from gs:// matches, and the last checkpoint
    is restored from there."""
    text, vocab = file_system.join(gcs_folder, "text.txt"), file_system.join(gcs_folder, "vocab.txt")
    file_system.copy(demo_corpus_sample(tmp_path), text)
    file_system.copy(os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt"), vocab)
    model_dir = file_system.join(gcs_folder, "runs", "bert")
    binary = os.path.join(os.path.dirname(sys.executable), "kerasbert-pretrain")
    flags = PRETRAIN_FLAGS + [f"--text_files={text}", f"--vocab_file={vocab}",
                              f"--model_dir={model_dir}", "--train_steps=4"]
    first = subprocess.run([binary, *flags], capture_output=True, text=True, cwd=tmp_path,
                           timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    written = set(file_system.listdir(model_dir))
    assert {"checkpoint", "ckpt-2.index", "ckpt-4.index", "kerasbert_model.json",
            "kerasbert_run.json", "train"} <= written, written
    assert file_system.glob(file_system.join(model_dir, "train", "events.out.tfevents.*"))
    second = subprocess.run([binary, *flags], capture_output=True, text=True, cwd=tmp_path,
                            timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"Restored {model_dir}/ckpt-4 at step 4" in second.stdout + second.stderr
    assert not os.path.exists(tmp_path / "gs:")


def demo_corpus_sample(folder, lines=600):
    """The first `lines` lines of the shipped corpus, as a local file."""
    path = os.path.join(folder, "corpus.txt")
    with gzip.open(demo.pretraining_corpus_files()[0], "rt", encoding="utf-8") as corpus:
        with open(path, "w", encoding="utf-8") as sample:
            sample.writelines(itertools.islice(corpus, lines))
    return path
