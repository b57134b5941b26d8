"""Write files and folders so that a reader never sees a half-written one: under a temporary name
beside the destination, made durable, then renamed into place.

Every kerasbert writer takes its temporary names from here: `.<kind>-<name>-<8 hex digits>` in the
destination's folder, where `<name>` is the destination's own name and `<kind>` is `tmp` (a file
or folder being written), `partial` (`kerasbert-export`'s work folder) or `convert`
(`kerasbert-convert`'s). A killed run leaves such a name behind; the next write to the same
destination removes it first (`remove_stale_siblings`): only names of exactly that shape, with
that destination's name, that no running process is writing (a writer holds an advisory lock,
`flock`, on its temporary file or folder until it is renamed or removed; the kernel drops the
lock of a killed process). On a file system without `flock` nothing is removed.

Durability: the temporary file is fsynced before the rename (a folder: every file and folder in
it), and the destination's folder after it, so after a crash the destination holds the old or
the whole new content. The permissions are the usual ones (0666 for a file, 0777 for a folder,
less the umask), like a plain `open` or `os.makedirs`; the umask is read once, when this module
is imported (from `/proc/self/status` where the kernel shows it; elsewhere by setting and
restoring it then), never by changing it while other threads (TensorFlow's) create files.

Remote destinations (`gs://`, `s3://`, `hdfs://`, `ram://`, see `kerasbert.file_system`): the
writer writes into a local temporary file or folder (so any tool can write it), which
`publish` then copies beside the destination under a temporary name and renames into place.
Where the file system has no atomic rename (object stores, `ram://`) a folder is copied into
place file by file, its top-level JSON files (manifests, reports: the markers readers trust)
last; each object appears whole, and the marker written last says the folder is complete. No
lock and no stale-name clean-up there: object stores have no `flock`.
"""

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
import stat
import tempfile

from kerasbert import file_system

TEMPORARY_KINDS = ("tmp", "partial", "convert")
# The random part: 8 hex digits here; 8 of [a-z0-9_] in names `tempfile` made for older versions.
_RANDOM = "[a-z0-9_]{8}"


def _read_umask():
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


UMASK = _read_umask()


def temporary_name(destination, kind="tmp"):
    """A fresh temporary name for `destination` (`.<kind>-<name>-<8 hex digits>` beside it).

    >>> temporary_name("/data/vocab.txt")  # doctest: +ELLIPSIS
    '/data/.tmp-vocab.txt-...'
    """
    if kind not in TEMPORARY_KINDS:
        raise ValueError(f"kind must be one of {TEMPORARY_KINDS}, got {kind!r}")
    destination = file_system.absolute(destination)
    directory, name = file_system.dirname(destination), file_system.basename(destination)
    return file_system.join(directory, f".{kind}-{name}-{secrets.token_hex(4)}")


def is_temporary_of(name, destination):
    """Whether the file name `name` is one of the temporary names of `destination`.

    >>> is_temporary_of(".tmp-vocab.txt-0a1b2c3d", "out/vocab.txt")
    True
    >>> is_temporary_of(".tmp-vocab.txt-notes", "out/vocab.txt")
    False
    """
    destination_name = file_system.basename(file_system.absolute(destination))
    kinds = "|".join(TEMPORARY_KINDS)
    return re.fullmatch(rf"\.(?:{kinds})-{re.escape(destination_name)}-{_RANDOM}", name) is not None


def remove_stale_siblings(destination):
    """Remove the temporary files and folders of `destination` that a killed run left beside it
    (see the module docstring); the paths removed.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> for name in (".tmp-vocab.txt-0a1b2c3d", ".tmp-vocab.txt-notes", "vocab.txt"):
    ...     open(os.path.join(folder, name), "w").close()
    >>> removed = remove_stale_siblings(os.path.join(folder, "vocab.txt"))
    >>> [os.path.basename(path) for path in removed]
    ['.tmp-vocab.txt-0a1b2c3d']
    >>> sorted(os.listdir(folder))
    ['.tmp-vocab.txt-notes', 'vocab.txt']
    """
    if not file_system.is_local(destination):
        return []
    destination = file_system.local_path(destination)
    directory = os.path.dirname(os.path.abspath(os.fspath(destination)))
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    removed = []
    for name in sorted(names):
        if is_temporary_of(name, destination):
            path = os.path.join(directory, name)
            if _remove_if_unlocked(path):
                removed.append(path)
    return removed


def _remove_if_unlocked(path):
    """Remove `path` (a file or folder; a link is left alone) unless a live process holds its
    lock; whether it was removed."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False  # gone meanwhile, a symbolic link (never ours) or unreadable: left alone
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a running writer holds it (or the file system has no locks)
        if stat.S_ISDIR(os.fstat(descriptor).st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        return True
    finally:
        os.close(descriptor)


class TemporarySibling:
    """A new, empty temporary file (or folder, `folder=True`) beside `destination`, locked while
    this process writes it: `publish()` renames it to `destination` (durably, see the module
    docstring), `discard()` removes it. Creating one first removes the stale temporaries a killed
    run left for the same destination. As a context manager it publishes when the block ends
    without an error and discards otherwise.

    >>> import os, tempfile
    >>> destination = os.path.join(tempfile.mkdtemp(), "export")
    >>> with TemporarySibling(destination, "partial", folder=True) as work:
    ...     open(os.path.join(work.path, "model.onnx"), "wb").close()
    >>> os.listdir(destination), os.listdir(os.path.dirname(destination))
    (['model.onnx'], ['export'])
    """

    def __init__(self, destination, kind="tmp", folder=False):
        self.destination = file_system.absolute(destination)
        self.folder = folder
        self._staging = None  # the local folder a remote destination is written in
        if not file_system.is_local(self.destination):
            self._staging = tempfile.mkdtemp(prefix=f"kerasbert-{kind}-")
            self.path = os.path.join(self._staging, file_system.basename(self.destination))
            self._lock = None
            if folder:
                os.mkdir(self.path)
            else:
                open(self.path, "wb").close()
            return
        os.makedirs(os.path.dirname(self.destination), exist_ok=True)
        remove_stale_siblings(self.destination)
        self.path, self._lock = self._create(kind)

    def _create(self, kind):
        while True:
            path = temporary_name(self.destination, kind)
            try:
                if self.folder:
                    os.mkdir(path, 0o700)
                    descriptor = os.open(path, os.O_RDONLY)
                else:
                    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with contextlib.suppress(OSError):  # no locks on this file system: nothing to hold
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            if os.fstat(descriptor).st_nlink > 0:
                return path, descriptor
            os.close(descriptor)  # removed by another run's clean-up before we held it: anew

    def publish(self):
        """Rename the temporary to `destination` (fsyncs before and after); returns
        `destination`."""
        try:
            os.chmod(self.path, (0o777 if self.folder else 0o666) & ~UMASK)
            publish(self.path, self.destination)
        finally:
            self._unlock()
            self._remove_staging()
        return self.destination

    def discard(self):
        """Remove the temporary (if it is still there)."""
        try:
            if self.folder:
                shutil.rmtree(self.path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
        finally:
            self._unlock()
            self._remove_staging()

    def _remove_staging(self):
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None

    def _unlock(self):
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self):
        return self

    def __exit__(self, error_type, error, traceback):
        if error_type is None:
            self.publish()
        else:
            self.discard()


def publish(source, destination):
    """`os.replace(source, destination)`, durably: `source` (a file, or a folder and everything
    in it) is fsynced before the rename and the destination's folder after it. A remote
    `destination` is uploaded from the local `source` (see the module docstring)."""
    if not file_system.is_local(destination):
        _upload(source, file_system.absolute(destination))
        return
    destination = file_system.local_path(destination)
    _fsync_tree(source)
    os.replace(source, destination)
    _fsync_path(os.path.dirname(os.path.abspath(destination)))


def _upload(source, destination):
    """Copy the local file or folder `source` to the remote `destination` (see the module
    docstring for the order and what is atomic)."""
    file_system.makedirs(file_system.dirname(destination))
    if not os.path.isdir(source):
        temporary = temporary_name(destination)
        try:
            file_system.copy(source, temporary)
            file_system.rename(temporary, destination, overwrite=True)
        finally:
            if file_system.exists(temporary):
                file_system.remove(temporary)
        return
    if file_system.isdir(destination) and file_system.listdir(destination):
        raise OSError(errno.ENOTEMPTY, "Directory not empty", destination)
    if file_system.has_atomic_rename(destination):
        temporary = temporary_name(destination)
        try:
            file_system.copy_tree(source, temporary)
            file_system.rename(temporary, destination, overwrite=True)
        finally:
            file_system.rmtree(temporary)
        return
    markers = [name for name in sorted(os.listdir(source))
               if name.endswith(".json") and os.path.isfile(os.path.join(source, name))]
    file_system.makedirs(destination)
    for name in sorted(os.listdir(source)):
        if name in markers:
            continue
        if os.path.isdir(os.path.join(source, name)):
            file_system.copy_tree(os.path.join(source, name), file_system.join(destination, name))
        else:
            file_system.copy(os.path.join(source, name), file_system.join(destination, name))
    for name in markers:
        file_system.copy(os.path.join(source, name), file_system.join(destination, name))


def _fsync_tree(path):
    if os.path.isdir(path) and not os.path.islink(path):
        for folder, _, names in os.walk(path, topdown=False):
            for name in names:
                if not os.path.islink(os.path.join(folder, name)):
                    _fsync_path(os.path.join(folder, name))
            _fsync_path(folder)
    else:
        _fsync_path(path)


def _fsync_path(path):
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError as error:
        # Some file systems cannot fsync a folder (EINVAL); the file's own fsync still happened.
        if error.errno not in (errno.EINVAL, errno.ENOTSUP) or not os.path.isdir(path):
            raise
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def atomic_output(path, mode="wb", encoding=None):
    """A file to write `path`'s content into, in pieces: a temporary file beside `path`, renamed
    to `path` when the `with` block ends without an error and removed otherwise (`path` is then
    left as it was).

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with atomic_output(path, "w", encoding="utf-8") as file:
    ...     _ = file.write("one\\n"), file.write("two\\n")
    >>> open(path).read()
    'one\\ntwo\\n'
    """
    with TemporarySibling(path) as temporary:
        with open(temporary.path, mode, encoding=encoding) as file:
            yield file


@contextlib.contextmanager
def atomic_path(path, kind="tmp"):
    """A path to create `path` at, with any writer (`model.save`, `savefig`, ...): it has
    `path`'s name, in a new temporary folder beside `path`. What the writer made there is
    renamed to `path` when the block ends without an error; the temporary folder is removed
    either way.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
    >>> with atomic_path(path) as temporary:
    ...     os.path.basename(temporary), os.path.basename(os.path.dirname(temporary))[:17]
    ...     open(temporary, "w").close()
    ('model.keras', '.tmp-model.keras-')
    >>> os.listdir(os.path.dirname(path))
    ['model.keras']
    """
    scratch = TemporarySibling(path, kind, folder=True)
    try:
        inner = os.path.join(scratch.path, file_system.basename(scratch.destination))
        yield inner
        publish(inner, scratch.destination)
    finally:
        scratch.discard()


def write_atomically(path, data):
    """Write `data` (bytes or str) to `path` via a temporary file in the same directory.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_atomically(path, "[PAD]\\n[UNK]\\n") == path, open(path).read()
    (True, '[PAD]\\n[UNK]\\n')
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    with atomic_output(path) as file:
        file.write(data)
    return path
