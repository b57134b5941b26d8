"""kerasbert.file_system and the atomic writers on TensorFlow's in-memory file system (`ram://`),
the stand-in here for `gs://` / `s3://` (no rename of folders, no locks)."""

import os
import uuid

import pytest
import tensorflow as tf

from kerasbert import atomic_files, file_system


@pytest.fixture
def ram_folder():
    folder = f"ram://test-file-system-{uuid.uuid4().hex}"
    yield folder
    file_system.rmtree(folder)


@pytest.fixture(autouse=True)
def no_local_ram_folder(tmp_path, monkeypatch):
    """Every test runs in an empty folder and must leave no local folder named `ram:` there."""
    monkeypatch.chdir(tmp_path)
    yield
    assert not os.path.exists(tmp_path / "ram:"), "a ram:// path was used as a local path"


def test_path_arithmetic_keeps_urls():
    assert file_system.join("gs://bucket/run", "ckpt", "x") == "gs://bucket/run/ckpt/x"
    assert file_system.dirname("gs://bucket/run/vocab.txt") == "gs://bucket/run"
    assert file_system.dirname("gs://bucket") == "gs://"
    assert file_system.basename("s3://bucket/run/") == "run"
    assert file_system.absolute("hdfs://name/run/") == "hdfs://name/run"
    assert file_system.absolute("file:///data/x") == "/data/x"
    assert file_system.has_atomic_rename("hdfs://name/x")
    assert not file_system.has_atomic_rename("gs://bucket/x")
    assert not file_system.has_atomic_rename("ram://x")
    assert not file_system.is_within("gs://bucket/run/../other", "gs://bucket/run")
    assert file_system.is_within("gs://bucket/run/a/b", "gs://bucket/run")


def test_read_write_list_and_glob(ram_folder):
    file_system.makedirs(file_system.join(ram_folder, "a"))
    with file_system.open_file(file_system.join(ram_folder, "a", "one.txt"), "w") as file:
        file.write("first line\nzweite Zeile ü\n")
    with file_system.open_file(file_system.join(ram_folder, "a", "one.txt")) as file:
        assert list(file) == ["first line\n", "zweite Zeile ü\n"]
    with file_system.open_file(file_system.join(ram_folder, "two.bin"), "wb") as file:
        file.write(b"\x00\x01")
    assert file_system.read_bytes(file_system.join(ram_folder, "two.bin")) == b"\x00\x01"
    assert file_system.listdir(ram_folder) == ["a", "two.bin"]
    assert file_system.glob(file_system.join(ram_folder, "a", "*.txt")) == [
        file_system.join(ram_folder, "a", "one.txt")]
    assert file_system.glob("ram://no-such-folder-here/*.txt") == []
    assert file_system.getsize(file_system.join(ram_folder, "two.bin")) == 2
    assert file_system.isdir(file_system.join(ram_folder, "a"))
    assert file_system.isfile(file_system.join(ram_folder, "two.bin"))


def test_writing_and_copying_over_a_remote_file_replace_it(ram_folder, tmp_path):
    """TensorFlow's `ram://` appends when a file is written or copied over; the layer replaces
    it, as every other file system does."""
    path = file_system.join(ram_folder, "notes.txt")
    for content in ("a longer first content\n", "short\n"):
        with file_system.open_file(path, "w") as file:
            file.write(content)
    assert file_system.read_text(path) == "short\n"
    with file_system.open_file(path, "wb") as file:
        file.write(b"bytes")
    assert file_system.read_bytes(path) == b"bytes"
    (tmp_path / "local.txt").write_text("copied")
    file_system.copy(str(tmp_path / "local.txt"), path)
    assert file_system.read_text(path) == "copied"
    with pytest.raises(FileExistsError):
        file_system.copy(str(tmp_path / "local.txt"), path, overwrite=False)


def test_remote_binary_lines_are_the_local_ones(ram_folder, tmp_path):
    content = b"tab\tand cr\r\ncr\rinside\nlast"
    (tmp_path / "local.bin").write_bytes(content)
    remote = file_system.join(ram_folder, "remote.bin")
    with file_system.open_file(remote, "wb") as file:
        file.write(content)
    with open(tmp_path / "local.bin", "rb") as local, file_system.open_file(remote, "rb") as file:
        assert list(file) == list(local) == [b"tab\tand cr\r\n", b"cr\rinside\n", b"last"]
    with file_system.open_file(remote, "rb") as file:
        assert file.read(5) == b"tab\ta" and file.read() == content[5:]


def test_missing_remote_file_is_a_python_error_naming_it(ram_folder):
    with file_system.open_file(file_system.join(ram_folder, "model.keras"), "wb") as file:
        file.write(b"a file, not a folder")
    assert not file_system.exists(file_system.join(ram_folder, "model.keras", "config.json"))
    missing = file_system.join(ram_folder, "vocab.txt")
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        file_system.open_file(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        file_system.getsize(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        with file_system.local_copy(missing):
            pass


def test_ram_names_are_not_found_by_prefix(ram_folder):
    # ram:// itself says that `run/eval` exists (and is a folder) when `run/eval_history.json`
    # is stored, and lists `runner`'s content as `ner` in `run`.
    for name in ("run/eval_history.json", "run/a/x.txt", "runner/y.txt"):
        path = file_system.join(ram_folder, name)
        file_system.makedirs(file_system.dirname(path))
        with file_system.open_file(path, "w") as file:
            file.write("x")
    run = file_system.join(ram_folder, "run")
    assert not file_system.exists(file_system.join(run, "eval"))
    assert not file_system.isdir(file_system.join(ram_folder, "ru"))
    assert file_system.isdir(run) and file_system.isfile(file_system.join(run, "a", "x.txt"))
    assert file_system.listdir(run) == ["a", "eval_history.json"]
    assert [folder for folder, _, _ in file_system.walk(run)] == [run, file_system.join(run, "a")]
    with pytest.raises(FileNotFoundError):
        file_system.listdir(file_system.join(ram_folder, "ru"))
    file_system.rmtree(run)
    assert file_system.listdir(ram_folder) == ["runner"]


def test_writing_over_a_ram_file_replaces_its_content(ram_folder, tmp_path):
    # ram:// writes over the start of an existing file without truncating it.
    path = file_system.join(ram_folder, "notes.txt")
    for text in ("a longer first text\n", "short\n"):
        with file_system.open_file(path, "w") as file:
            file.write(text)
    assert file_system.read_text(path) == "short\n"
    (tmp_path / "short.txt").write_text("tiny\n")
    file_system.copy(str(tmp_path / "short.txt"), path)
    assert file_system.read_text(path) == "tiny\n"


def test_folder_rename_on_ram_moves_the_content(ram_folder):
    # ram:// renames a folder's name only (its files stay under the old one): copied instead.
    source = file_system.join(ram_folder, "source")
    file_system.makedirs(file_system.join(source, "inner"))
    with file_system.open_file(file_system.join(source, "inner", "x.txt"), "w") as file:
        file.write("x")
    destination = file_system.join(ram_folder, "destination")
    file_system.rename(source, destination)
    assert file_system.read_text(file_system.join(destination, "inner", "x.txt")) == "x"
    assert not file_system.exists(file_system.join(source, "inner", "x.txt"))


def test_local_copy_of_a_remote_folder(ram_folder):
    file_system.makedirs(file_system.join(ram_folder, "model", "variables"))
    with file_system.open_file(file_system.join(ram_folder, "model", "variables", "v"), "wb") as f:
        f.write(b"weights")
    with file_system.local_copy(file_system.join(ram_folder, "model")) as copy:
        assert os.path.isdir(copy)
        with open(os.path.join(copy, "variables", "v"), "rb") as file:
            assert file.read() == b"weights"
    assert not os.path.exists(copy)


def test_atomic_output_and_write_on_ram(ram_folder):
    path = file_system.join(ram_folder, "out", "vocab.txt")
    atomic_files.write_atomically(path, "[PAD]\n")
    assert file_system.read_text(path) == "[PAD]\n"
    with pytest.raises(RuntimeError):
        with atomic_files.atomic_output(path, "w", encoding="utf-8") as file:
            file.write("half")
            raise RuntimeError("writer failed")
    assert file_system.read_text(path) == "[PAD]\n"
    assert file_system.listdir(file_system.join(ram_folder, "out")) == ["vocab.txt"]


def test_atomic_path_stages_locally_and_uploads(ram_folder):
    path = file_system.join(ram_folder, "student.keras")
    with atomic_files.atomic_path(path) as temporary:
        assert file_system.is_local(temporary)
        assert os.path.basename(temporary) == "student.keras"
        with open(temporary, "wb") as file:
            file.write(b"saved")
    assert file_system.read_bytes(path) == b"saved"
    assert file_system.listdir(ram_folder) == ["student.keras"]


def test_folder_is_published_with_json_markers_last(ram_folder, monkeypatch):
    copied = []
    real_copy = file_system.copy
    monkeypatch.setattr(file_system, "copy",
                        lambda source, destination, overwrite=True: (
                            copied.append(file_system.basename(destination)),
                            real_copy(source, destination, overwrite))[1])
    destination = file_system.join(ram_folder, "export")
    with atomic_files.TemporarySibling(destination, "partial", folder=True) as work:
        for name in ("export_report.json", "model.onnx", "model.tflite"):
            with open(os.path.join(work.path, name), "wb") as file:
                file.write(name.encode())
    assert copied[-1] == "export_report.json"
    assert file_system.listdir(destination) == ["export_report.json", "model.onnx",
                                                 "model.tflite"]
    assert file_system.listdir(ram_folder) == ["export"]


def test_failed_folder_write_leaves_nothing_on_ram(ram_folder):
    destination = file_system.join(ram_folder, "export")
    with pytest.raises(RuntimeError):
        with atomic_files.TemporarySibling(destination, "partial", folder=True) as work:
            with open(os.path.join(work.path, "model.onnx"), "wb") as file:
                file.write(b"half")
            raise RuntimeError("converter failed")
    assert not file_system.exists(destination)


def test_tfrecords_through_tensorflow_on_ram(ram_folder):
    path = file_system.join(ram_folder, "shard.tfrecord")
    with atomic_files.atomic_path(path) as temporary:
        with tf.io.TFRecordWriter(temporary) as writer:
            writer.write(b"record")
    assert [record.numpy() for record in tf.data.TFRecordDataset(path)] == [b"record"]
