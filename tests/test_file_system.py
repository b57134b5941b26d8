"""kerasbert.file_system and the atomic writers on remote file systems: one battery, run on
TensorFlow's in-memory file system (`ram://`) and on `gs://` through TensorFlow's own GCS client
against a local emulator (tests/gcs_emulator.py). Both lack folder renames and locks, as object
stores do; a few tests pin `ram://`'s own quirks."""

import os
import uuid

import pytest
import tensorflow as tf

from kerasbert import atomic_files, file_system
from tests.gcs_emulator import gcs_bucket  # noqa: F401  (a fixture)


@pytest.fixture(params=["ram", "gs"])
def remote_folder(request):
    """A fresh folder on `ram://` or on the emulator's `gs://` bucket."""
    root = "ram://" if request.param == "ram" else request.getfixturevalue("gcs_bucket") + "/"
    folder = f"{root}test-file-system-{uuid.uuid4().hex[:12]}"
    yield folder
    file_system.rmtree(folder)


@pytest.fixture
def ram_folder():
    folder = f"ram://test-file-system-{uuid.uuid4().hex}"
    yield folder
    file_system.rmtree(folder)


@pytest.fixture(autouse=True)
def no_local_url_folder(tmp_path, monkeypatch):
    """Every test runs in an empty folder and must leave no local `ram:` or `gs:` there."""
    monkeypatch.chdir(tmp_path)
    yield
    assert not {"ram:", "gs:"} & set(os.listdir(tmp_path)), "a URL was used as a local path"


def write(path, content):
    with file_system.open_file(path, "wb" if isinstance(content, bytes) else "w") as file:
        file.write(content)


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


def test_a_link_that_points_outside_is_not_within(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "folder" / "link")
    os.symlink(tmp_path / "folder" / "inner", tmp_path / "folder" / "inner_link")
    assert not file_system.is_within(tmp_path / "folder" / "link" / "x", tmp_path / "folder")
    assert file_system.is_within(tmp_path / "folder" / "inner_link", tmp_path / "folder")
    # The folder itself through a link is still the folder.
    os.symlink(tmp_path / "folder", tmp_path / "alias")
    assert file_system.is_within(tmp_path / "alias" / "a", tmp_path / "folder")


def test_read_write_list_glob_and_stat(remote_folder):
    file_system.makedirs(file_system.join(remote_folder, "a"))
    write(file_system.join(remote_folder, "a", "one.txt"), "first line\nzweite Zeile ü\n")
    with file_system.open_file(file_system.join(remote_folder, "a", "one.txt")) as file:
        assert list(file) == ["first line\n", "zweite Zeile ü\n"]
    write(file_system.join(remote_folder, "two.bin"), b"\x00\x01")
    assert file_system.read_bytes(file_system.join(remote_folder, "two.bin")) == b"\x00\x01"
    assert file_system.listdir(remote_folder) == ["a", "two.bin"]
    assert file_system.glob(file_system.join(remote_folder, "a", "*.txt")) == [
        file_system.join(remote_folder, "a", "one.txt")]
    assert file_system.glob(file_system.join(remote_folder, "no-such-folder", "*.txt")) == []
    assert file_system.getsize(file_system.join(remote_folder, "two.bin")) == 2
    assert file_system.isdir(file_system.join(remote_folder, "a"))
    assert file_system.isfile(file_system.join(remote_folder, "two.bin"))
    assert not file_system.isfile(file_system.join(remote_folder, "a"))
    assert list(file_system.walk(remote_folder)) == [
        (remote_folder, ["a"], ["two.bin"]),
        (file_system.join(remote_folder, "a"), [], ["one.txt"])]


def test_remote_binary_lines_are_the_local_ones(remote_folder, tmp_path):
    content = b"tab\tand cr\r\ncr\rinside\nlast"
    (tmp_path / "local.bin").write_bytes(content)
    remote = file_system.join(remote_folder, "remote.bin")
    write(remote, content)
    with open(tmp_path / "local.bin", "rb") as local, file_system.open_file(remote, "rb") as file:
        assert list(file) == list(local) == [b"tab\tand cr\r\n", b"cr\rinside\n", b"last"]
    with file_system.open_file(remote, "rb") as file:
        assert file.read(5) == b"tab\ta" and file.read() == content[5:]


def test_missing_remote_file_is_a_python_error_naming_it(remote_folder):
    write(file_system.join(remote_folder, "model.keras"), b"a file, not a folder")
    assert not file_system.exists(file_system.join(remote_folder, "model.keras", "config.json"))
    missing = file_system.join(remote_folder, "vocab.txt")
    assert not file_system.exists(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        file_system.open_file(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        file_system.getsize(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        with file_system.local_copy(missing):
            pass


def test_writing_copying_renaming_and_removing_files(remote_folder, tmp_path):
    """Writing or copying over a file replaces it (`ram://` itself writes over the start of the
    old content without truncating it)."""
    path = file_system.join(remote_folder, "notes.txt")
    for content in ("a longer first content\n", "short\n"):
        write(path, content)
    assert file_system.read_text(path) == "short\n"
    write(path, b"bytes")
    assert file_system.read_bytes(path) == b"bytes"
    (tmp_path / "local.txt").write_text("copied")
    file_system.copy(str(tmp_path / "local.txt"), path)
    assert file_system.read_text(path) == "copied"
    with pytest.raises(FileExistsError):
        file_system.copy(str(tmp_path / "local.txt"), path, overwrite=False)
    file_system.rename(path, file_system.join(remote_folder, "renamed.txt"))
    file_system.copy(file_system.join(remote_folder, "renamed.txt"),
                     file_system.join(remote_folder, "copy.txt"))
    assert file_system.listdir(remote_folder) == ["copy.txt", "renamed.txt"]
    file_system.remove(file_system.join(remote_folder, "renamed.txt"))
    assert file_system.listdir(remote_folder) == ["copy.txt"]
    assert file_system.read_text(file_system.join(remote_folder, "copy.txt")) == "copied"


def test_folder_rename_moves_the_content(remote_folder):
    """Copied file by file, then removed (`ram://` itself renames a folder's name only, leaving
    its files under the old one)."""
    source = file_system.join(remote_folder, "source")
    file_system.makedirs(file_system.join(source, "inner"))
    write(file_system.join(source, "inner", "x.txt"), "x")
    destination = file_system.join(remote_folder, "destination")
    file_system.rename(source, destination)
    assert file_system.read_text(file_system.join(destination, "inner", "x.txt")) == "x"
    assert not file_system.exists(file_system.join(source, "inner", "x.txt"))
    assert file_system.listdir(remote_folder) == ["destination"]


def test_local_copy_of_a_remote_folder_and_rmtree(remote_folder):
    model = file_system.join(remote_folder, "model")
    file_system.makedirs(file_system.join(model, "variables"))
    write(file_system.join(model, "variables", "v"), b"weights")
    with file_system.local_copy(model) as copy:
        assert os.path.isdir(copy)
        with open(os.path.join(copy, "variables", "v"), "rb") as file:
            assert file.read() == b"weights"
    assert not os.path.exists(copy)
    file_system.rmtree(model)
    assert not file_system.exists(model)
    assert file_system.listdir(remote_folder) == []


def test_atomic_write_replaces_whole_or_not_at_all(remote_folder):
    path = file_system.join(remote_folder, "out", "vocab.txt")
    atomic_files.write_atomically(path, "[PAD]\n")
    assert file_system.read_text(path) == "[PAD]\n"
    atomic_files.write_atomically(path, "[PAD]\n[UNK]\n")
    assert file_system.read_text(path) == "[PAD]\n[UNK]\n"
    with pytest.raises(RuntimeError):
        with atomic_files.atomic_output(path, "w", encoding="utf-8") as file:
            file.write("half")
            raise RuntimeError("writer failed")
    assert file_system.read_text(path) == "[PAD]\n[UNK]\n"
    assert file_system.listdir(file_system.join(remote_folder, "out")) == ["vocab.txt"]


def test_atomic_path_stages_locally_and_uploads(remote_folder):
    path = file_system.join(remote_folder, "student.keras")
    with atomic_files.atomic_path(path) as temporary:
        assert file_system.is_local(temporary)
        assert os.path.basename(temporary) == "student.keras"
        with open(temporary, "wb") as file:
            file.write(b"saved")
    assert file_system.read_bytes(path) == b"saved"
    assert file_system.listdir(remote_folder) == ["student.keras"]


def test_folder_is_published_whole_json_last_and_a_failed_one_not_at_all(remote_folder,
                                                                          monkeypatch):
    copied = []
    real_copy = file_system.copy
    monkeypatch.setattr(file_system, "copy",
                        lambda source, destination, overwrite=True: (
                            copied.append(file_system.basename(destination)),
                            real_copy(source, destination, overwrite))[1])
    destination = file_system.join(remote_folder, "export")
    with atomic_files.TemporarySibling(destination, "partial", folder=True) as work:
        os.mkdir(os.path.join(work.path, "saved_model"))
        for name in ("export_report.json", "model.tflite", os.path.join("saved_model", "pb")):
            with open(os.path.join(work.path, name), "wb") as file:
                file.write(name.encode())
    assert copied[-1] == "export_report.json"
    assert file_system.listdir(destination) == ["export_report.json", "model.tflite",
                                                "saved_model"]
    assert file_system.read_bytes(file_system.join(destination, "saved_model", "pb")) == \
        os.path.join("saved_model", "pb").encode()
    failed = file_system.join(remote_folder, "failed")
    with pytest.raises(RuntimeError):
        with atomic_files.TemporarySibling(failed, "partial", folder=True) as work:
            with open(os.path.join(work.path, "model.onnx"), "wb") as file:
                file.write(b"half")
            raise RuntimeError("converter failed")
    assert file_system.listdir(remote_folder) == ["export"]


def test_tfrecords_through_tensorflow(remote_folder):
    path = file_system.join(remote_folder, "shard.tfrecord")
    with atomic_files.atomic_path(path) as temporary:
        with tf.io.TFRecordWriter(temporary) as writer:
            for index in range(3):
                writer.write(b"record %d" % index)
    assert [record.numpy() for record in tf.data.TFRecordDataset(path)] == [
        b"record 0", b"record 1", b"record 2"]


def test_checkpoint_save_and_restore(remote_folder):
    variable = tf.Variable([1.0, 2.0])
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable),
                                         file_system.join(remote_folder, "ckpt"), max_to_keep=1)
    manager.save()
    variable.assign([3.0, 4.0])
    saved = manager.save()
    assert tf.train.latest_checkpoint(file_system.join(remote_folder, "ckpt")) == saved
    variable.assign([0.0, 0.0])
    tf.train.Checkpoint(v=variable).restore(saved).assert_consumed()
    assert variable.numpy().tolist() == [3.0, 4.0]
    assert not file_system.glob(file_system.join(remote_folder, "ckpt", "ckpt-1*"))


def test_ram_names_are_not_found_by_prefix(ram_folder):
    # ram:// itself says that `run/eval` exists (and is a folder) when `run/eval_history.json`
    # is stored, and lists `runner`'s content as `ner` in `run`.
    for name in ("run/eval_history.json", "run/a/x.txt", "runner/y.txt"):
        path = file_system.join(ram_folder, name)
        file_system.makedirs(file_system.dirname(path))
        write(path, "x")
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
