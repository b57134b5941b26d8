"""`kerasbert.atomic_files`: what a killed run left beside a destination is removed by the next
write to it (only our names, never a live writer's), writes are fsynced before the rename and the
folder after it, and the umask is never changed to learn it."""

import os
import stat

import pytest

from kerasbert import atomic_files
from kerasbert.atomic_files import (TemporarySibling, atomic_output, atomic_path,
                                    remove_stale_siblings, write_atomically)

# What a killed run leaves for destination "vocab.txt" (tempfile's alphabet in the last one, as
# older versions named the shards' temporary files), and names that only look alike.
STALE = [".tmp-vocab.txt-0a1b2c3d", ".partial-vocab.txt-99887766", ".convert-vocab.txt-ab_c9xyz"]
UNRELATED = [".tmp-vocab.txt-notes", ".tmp-vocab.txt.bak", ".tmp-vocab.txt-0a1b2c3d.keep",
             ".tmp-vocab.txt-0A1B2C3D", "vocab.txt.tmp-0a1b2c3d", ".tmp-other.txt-0a1b2c3d",
             ".tmp-vocab.txt-0a1b2c3d4", ".backup-vocab.txt-0a1b2c3d", "tmp-vocab.txt-0a1b2c3d"]


def _plant(folder):
    for name in STALE + UNRELATED:
        if name.startswith(".partial-"):  # a killed export leaves a folder
            (folder / name).mkdir()
            (folder / name / "model.tflite").write_bytes(b"half")
        else:
            (folder / name).write_bytes(b"half")


@pytest.mark.parametrize("write", [
    lambda path: write_atomically(path, "[PAD]\n"),
    lambda path: TemporarySibling(path).publish(),
    lambda path: TemporarySibling(path, "convert").discard(),  # also a run that fails
], ids=["write_atomically", "published", "discarded"])
def test_the_next_write_removes_a_killed_runs_temporaries_and_nothing_else(tmp_path, write):
    _plant(tmp_path)
    write(str(tmp_path / "vocab.txt"))
    left = set(os.listdir(tmp_path)) - {"vocab.txt"}
    assert left == set(UNRELATED)


def test_a_live_writers_temporary_is_never_removed(tmp_path):
    destination = tmp_path / "train.tfrecord"
    writing = TemporarySibling(destination)  # holds its lock until published
    folder = TemporarySibling(tmp_path / "export", "partial", folder=True)
    assert remove_stale_siblings(destination) == []
    assert remove_stale_siblings(tmp_path / "export") == []
    with atomic_output(destination) as file:  # another writer of the same destination
        file.write(b"other")
    assert os.path.exists(writing.path) and os.path.isdir(folder.path)
    with open(writing.path, "wb") as file:
        file.write(b"mine")
    assert writing.publish() == str(destination) and destination.read_bytes() == b"mine"
    folder.discard()
    assert sorted(os.listdir(tmp_path)) == ["train.tfrecord"]


def test_a_failed_write_leaves_the_destination_as_it_was(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output(path, "w") as file:
            file.write("new")
            raise RuntimeError("disk on fire")
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "model.keras") as temporary:
            open(temporary, "w").close()
            raise RuntimeError("save failed")
    assert sorted(os.listdir(tmp_path)) == ["results.json"] and path.read_text() == "old"


def test_the_file_is_fsynced_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{descriptor}")))
        return real_fsync(descriptor)

    def replace(source, destination):
        events.append(("replace", str(destination)))
        return real_replace(source, destination)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = str(tmp_path / "vocab.txt")
    write_atomically(path, "x")
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync"]
    assert os.path.basename(events[0][1]).startswith(".tmp-vocab.txt-")
    assert events[1][1] == path and events[2][1] == str(tmp_path)
    events.clear()
    with TemporarySibling(tmp_path / "export", "partial", folder=True) as work:
        os.mkdir(os.path.join(work.path, "saved_model"))
        open(os.path.join(work.path, "saved_model", "saved_model.pb"), "w").close()
    synced = [os.path.relpath(target, work.path) for kind, target in events[:-2]]
    assert sorted(synced) == [".", "saved_model", "saved_model/saved_model.pb"]
    assert events[-2:] == [("replace", str(tmp_path / "export")), ("fsync", str(tmp_path))]


def test_permissions_are_the_usual_ones_without_touching_the_umask(tmp_path, monkeypatch):
    umask = os.umask(0o027)
    os.umask(umask)
    assert atomic_files.UMASK == umask  # read at import, from /proc/self/status

    def no_umask(mask):
        raise AssertionError("the umask was changed while writing")

    monkeypatch.setattr(os, "umask", no_umask)
    write_atomically(tmp_path / "file.txt", "x")
    with TemporarySibling(tmp_path / "folder", folder=True):
        pass
    with atomic_path(tmp_path / "model.keras") as temporary:
        open(temporary, "w").close()
    assert stat.S_IMODE(os.stat(tmp_path / "file.txt").st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(os.stat(tmp_path / "folder").st_mode) == 0o777 & ~umask
    assert stat.S_IMODE(os.stat(tmp_path / "model.keras").st_mode) == 0o666 & ~umask
