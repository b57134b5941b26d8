"""kerasbert.file_system and the atomic writers on `gs://`, through TensorFlow's own GCS client
against a local emulator (tests/gcs_emulator.py: gcp-storage-emulator from the test extra,
behind a TLS proxy, since TensorFlow's GCS endpoints are built in and only its proxy and CA
settings can be changed)."""

import gzip
import itertools
import os
import subprocess
import sys
import uuid

import pytest
import tensorflow as tf

from kerasbert import atomic_files, file_system
from kerasbert.data import demo
from tests.gcs_emulator import BUCKET, serving

@pytest.fixture(scope="module")
def gcs_bucket(tmp_path_factory):
    """`gs://kerasbert-test`, served by the emulator, with the environment TensorFlow's GCS
    client reads pointed at it for the module's tests (restored after)."""
    with serving(tmp_path_factory.mktemp("gcs-emulator")) as environment_variables:
        with pytest.MonkeyPatch.context() as environment:
            for name in ("HTTPS_PROXY", "ALL_PROXY", "all_proxy", "NO_PROXY"):
                environment.delenv(name, raising=False)
            for name, value in environment_variables.items():
                environment.setenv(name, value)
            yield f"gs://{BUCKET}"


@pytest.fixture
def gcs_folder(gcs_bucket):
    folder = f"{gcs_bucket}/test-{uuid.uuid4().hex[:12]}"
    yield folder
    file_system.rmtree(folder)


@pytest.fixture(autouse=True)
def no_local_gs_folder(tmp_path, monkeypatch):
    """Every test runs in an empty folder and must leave no local folder named `gs:` there."""
    monkeypatch.chdir(tmp_path)
    yield
    assert not os.path.exists(tmp_path / "gs:"), "a gs:// path was used as a local path"


def test_read_write_list_glob_and_stat(gcs_folder):
    file_system.makedirs(file_system.join(gcs_folder, "a"))
    assert file_system.isdir(file_system.join(gcs_folder, "a"))
    with file_system.open_file(file_system.join(gcs_folder, "a", "one.txt"), "w") as file:
        file.write("first line\nzweite Zeile ü\n")
    with file_system.open_file(file_system.join(gcs_folder, "a", "one.txt")) as file:
        assert list(file) == ["first line\n", "zweite Zeile ü\n"]
    with file_system.open_file(file_system.join(gcs_folder, "two.bin"), "wb") as file:
        file.write(b"\x00\x01")
    assert file_system.read_bytes(file_system.join(gcs_folder, "two.bin")) == b"\x00\x01"
    assert file_system.listdir(gcs_folder) == ["a", "two.bin"]
    assert file_system.glob(file_system.join(gcs_folder, "a", "*.txt")) == [
        file_system.join(gcs_folder, "a", "one.txt")]
    assert file_system.glob(f"gs://{BUCKET}/no-such-folder/*.txt") == []
    assert file_system.getsize(file_system.join(gcs_folder, "two.bin")) == 2
    assert file_system.isfile(file_system.join(gcs_folder, "two.bin"))
    assert not file_system.isfile(file_system.join(gcs_folder, "a"))
    assert [(folder, folders, files) for folder, folders, files in file_system.walk(gcs_folder)
            ] == [(gcs_folder, ["a"], ["two.bin"]),
                  (file_system.join(gcs_folder, "a"), [], ["one.txt"])]


def test_missing_object_is_a_python_error_naming_it(gcs_folder):
    missing = file_system.join(gcs_folder, "vocab.txt")
    assert not file_system.exists(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        file_system.open_file(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        file_system.getsize(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        with file_system.local_copy(missing):
            pass


def test_rename_copy_and_remove(gcs_folder):
    source = file_system.join(gcs_folder, "source.txt")
    with file_system.open_file(source, "w") as file:
        file.write("x")
    file_system.rename(source, file_system.join(gcs_folder, "renamed.txt"))
    with pytest.raises(FileExistsError):
        file_system.copy(file_system.join(gcs_folder, "renamed.txt"),
                         file_system.join(gcs_folder, "renamed.txt"), overwrite=False)
    file_system.copy(file_system.join(gcs_folder, "renamed.txt"),
                     file_system.join(gcs_folder, "copy.txt"))
    assert file_system.listdir(gcs_folder) == ["copy.txt", "renamed.txt"]
    file_system.remove(file_system.join(gcs_folder, "renamed.txt"))
    assert file_system.listdir(gcs_folder) == ["copy.txt"]
    assert file_system.read_text(file_system.join(gcs_folder, "copy.txt")) == "x"


def test_folder_rename_copies_then_removes(gcs_folder):
    source = file_system.join(gcs_folder, "source")
    file_system.makedirs(file_system.join(source, "inner"))
    with file_system.open_file(file_system.join(source, "inner", "x.txt"), "w") as file:
        file.write("x")
    destination = file_system.join(gcs_folder, "destination")
    file_system.rename(source, destination)
    assert file_system.read_text(file_system.join(destination, "inner", "x.txt")) == "x"
    assert not file_system.exists(file_system.join(source, "inner", "x.txt"))
    assert file_system.listdir(gcs_folder) == ["destination"]


def test_local_copy_of_a_remote_folder_and_rmtree(gcs_folder):
    model = file_system.join(gcs_folder, "model")
    file_system.makedirs(file_system.join(model, "variables"))
    with file_system.open_file(file_system.join(model, "variables", "v"), "wb") as file:
        file.write(b"weights")
    with file_system.local_copy(model) as copy:
        with open(os.path.join(copy, "variables", "v"), "rb") as file:
            assert file.read() == b"weights"
    assert not os.path.exists(copy)
    file_system.rmtree(model)
    assert not file_system.exists(model)
    assert file_system.listdir(gcs_folder) == []


def test_atomic_write_replaces_whole_or_not_at_all(gcs_folder):
    path = file_system.join(gcs_folder, "out", "vocab.txt")
    atomic_files.write_atomically(path, "[PAD]\n")
    assert file_system.read_text(path) == "[PAD]\n"
    atomic_files.write_atomically(path, "[PAD]\n[UNK]\n")
    assert file_system.read_text(path) == "[PAD]\n[UNK]\n"
    with pytest.raises(RuntimeError):
        with atomic_files.atomic_output(path, "w", encoding="utf-8") as file:
            file.write("half")
            raise RuntimeError("writer failed")
    assert file_system.read_text(path) == "[PAD]\n[UNK]\n"
    assert file_system.listdir(file_system.join(gcs_folder, "out")) == ["vocab.txt"]


def test_atomic_path_stages_locally_and_uploads(gcs_folder):
    path = file_system.join(gcs_folder, "student.keras")
    with atomic_files.atomic_path(path) as temporary:
        assert file_system.is_local(temporary)
        with open(temporary, "wb") as file:
            file.write(b"saved")
    assert file_system.read_bytes(path) == b"saved"
    assert file_system.listdir(gcs_folder) == ["student.keras"]


def test_folder_is_published_whole_and_a_failed_one_not_at_all(gcs_folder):
    destination = file_system.join(gcs_folder, "export")
    with atomic_files.TemporarySibling(destination, "partial", folder=True) as work:
        os.mkdir(os.path.join(work.path, "saved_model"))
        for name in ("export_report.json", "model.tflite", os.path.join("saved_model", "pb")):
            with open(os.path.join(work.path, name), "wb") as file:
                file.write(name.encode())
    assert file_system.listdir(destination) == ["export_report.json", "model.tflite",
                                                "saved_model"]
    assert file_system.read_bytes(file_system.join(destination, "saved_model", "pb")) == \
        os.path.join("saved_model", "pb").encode()
    failed = file_system.join(gcs_folder, "failed")
    with pytest.raises(RuntimeError):
        with atomic_files.TemporarySibling(failed, "partial", folder=True) as work:
            with open(os.path.join(work.path, "model.onnx"), "wb") as file:
                file.write(b"half")
            raise RuntimeError("converter failed")
    assert file_system.listdir(gcs_folder) == ["export"]


def test_tfrecords_through_tensorflow(gcs_folder):
    path = file_system.join(gcs_folder, "shard.tfrecord")
    with atomic_files.atomic_path(path) as temporary:
        with tf.io.TFRecordWriter(temporary) as writer:
            for index in range(3):
                writer.write(b"record %d" % index)
    assert [record.numpy() for record in tf.data.TFRecordDataset(path)] == [
        b"record 0", b"record 1", b"record 2"]
    direct = file_system.join(gcs_folder, "direct.tfrecord")
    with tf.io.TFRecordWriter(direct) as writer:
        writer.write(b"written by TensorFlow on gs://")
    assert [record.numpy() for record in tf.data.TFRecordDataset(direct)] == [
        b"written by TensorFlow on gs://"]


def test_checkpoint_save_and_restore(gcs_folder):
    variable = tf.Variable([1.0, 2.0])
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable),
                                         file_system.join(gcs_folder, "ckpt"), max_to_keep=1)
    manager.save()
    variable.assign([3.0, 4.0])
    saved = manager.save()
    assert tf.train.latest_checkpoint(file_system.join(gcs_folder, "ckpt")) == saved
    variable.assign([0.0, 0.0])
    tf.train.Checkpoint(v=variable).restore(saved).assert_consumed()
    assert variable.numpy().tolist() == [3.0, 4.0]
    assert not file_system.glob(file_system.join(gcs_folder, "ckpt", "ckpt-1*"))


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
