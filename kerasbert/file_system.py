"""Every path kerasbert reads or writes goes through here, so that a path may be a local one or a
URL of one of TensorFlow's file systems (`gs://`, `s3://`, `hdfs://`, `ram://`, ...).

Local paths (and `file://` URLs) use Python's `os` and `open`, so local behaviour, speed and
error types stay as they are; any other URL uses `tf.io.gfile` (TensorFlow is imported on the
first such call, not before). Errors are the usual Python ones on both: a missing file is a
`FileNotFoundError` naming the path, whatever file system it is on.

What a file system can do differs, and the writers in `kerasbert.atomic_files` read it here:
`has_atomic_rename` is true for local folders and HDFS (a rename is one step), false for object
stores (`gs://`, `s3://`: a "rename" copies then deletes) and for `ram://` (its folder rename
moves the folder's name only). Tools that need a real local file (the TFLite converter, tf2onnx,
ONNX Runtime, a safetensors read) use `local_copy` to read and `kerasbert.atomic_files.atomic_path`
to write: both stage in a local temporary folder when the path is remote.

>>> import tempfile
>>> folder = join(tempfile.mkdtemp(), "run")
>>> makedirs(folder)
>>> with open_file(join(folder, "notes.txt"), "w") as file:
...     _ = file.write("one\\n")
>>> listdir(folder), is_local(folder), is_local("gs://bucket/run"), join("gs://bucket", "run")
(['notes.txt'], True, False, 'gs://bucket/run')
"""

import contextlib
import errno
import glob as _glob
import io
import os
import posixpath
import re
import shutil
import tempfile

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# File systems whose rename of a file or a folder is one atomic step.
_ATOMIC_RENAME_SCHEMES = ("hdfs", "viewfs")
# File systems whose writes and copies append to a file already there instead of replacing it
# (TensorFlow's `ram://`): that file is removed first.
_APPENDING_SCHEMES = ("ram",)


def scheme(path):
    """The URL scheme of `path` (`"gs"`, `"ram"`, ...), or `""` for a local path.

    >>> scheme("gs://bucket/x"), scheme("/data/x"), scheme("file:///data/x")
    ('gs', '', '')
    """
    match = _SCHEME.match(os.fspath(path))
    if match is None or match.group(1).lower() == "file":
        return ""
    return match.group(1).lower()


def is_local(path):
    """Whether `path` is on the local file system (a plain path or a `file://` URL)."""
    return scheme(path) == ""


def local_path(path):
    """`path` as a plain local path (`file://` removed); a remote URL is returned unchanged.

    >>> local_path("file:///data/x"), local_path("data/x")
    ('/data/x', 'data/x')
    """
    path = os.fspath(path)
    if is_local(path) and _SCHEME.match(path):
        return path[len("file://"):]
    return path


def has_atomic_rename(path):
    """Whether renaming a file or folder on `path`'s file system is one atomic step."""
    return is_local(path) or scheme(path) in _ATOMIC_RENAME_SCHEMES


def _gfile():
    import tensorflow as tf  # only when a remote path is used

    return tf.io.gfile


def _not_found(path):
    return FileNotFoundError(errno.ENOENT, "No such file or directory", os.fspath(path))


@contextlib.contextmanager
def _python_errors(path):
    """TensorFlow's file errors as the Python ones a local path raises."""
    import tensorflow as tf

    try:
        yield
    except tf.errors.NotFoundError:
        raise _not_found(path) from None
    except tf.errors.AlreadyExistsError:
        raise FileExistsError(errno.EEXIST, "File exists", os.fspath(path)) from None
    except tf.errors.PermissionDeniedError:
        raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path)) from None


# Path arithmetic: URLs are "/"-separated whatever the local system is.

def join(path, *parts):
    return os.path.join(path, *parts) if is_local(path) else posixpath.join(path, *parts)


def dirname(path):
    path = os.fspath(path)
    if is_local(path):
        return os.path.dirname(path)
    prefix = _SCHEME.match(path).group(0)
    return prefix + posixpath.dirname(path[len(prefix):].rstrip("/"))


def basename(path):
    path = os.fspath(path)
    return os.path.basename(path) if is_local(path) else posixpath.basename(path.rstrip("/"))


def absolute(path):
    """A local path made absolute (`file://` removed); a URL as it is.

    >>> absolute("gs://bucket/x")
    'gs://bucket/x'
    """
    path = os.fspath(path)
    return os.path.abspath(local_path(path)) if is_local(path) else path.rstrip("/")


def is_within(path, folder):
    """Whether `path` names `folder` or something inside it: `..` resolved, and on the local
    file system symbolic links too (a link inside `folder` that points outside is outside).

    >>> is_within("ram://out/a/../b", "ram://out"), is_within("/out/../etc/passwd", "/out")
    (True, False)
    """
    path, folder = absolute(path), absolute(folder)
    if is_local(path) and is_local(folder):
        path, folder = os.path.realpath(local_path(path)), os.path.realpath(local_path(folder))
    elif not is_local(path):
        path, folder = posixpath.normpath(path), posixpath.normpath(folder)
        path, folder = path.replace(":/", "://", 1), folder.replace(":/", "://", 1)
    return path == folder or path.startswith(folder.rstrip("/") + "/")


# Queries.

def _ram_listdir(path):
    """The names in folder `path` on `ram://`, which lists by name prefix: listing `ram://b/run`
    when `ram://b/runner/x` is stored also gives `ner`. A name is kept if something is stored
    under it (a prefix check, which a stray name passes only if a real one begins with it)."""
    with _python_errors(path):
        names = {name.rstrip("/") for name in _gfile().listdir(path)}
    return sorted(name for name in names if _gfile().exists(join(path, name)))


def _ram_exists(path):
    """Whether `path` is a file or folder on `ram://`, which says "exists" (and "folder") for
    any prefix of a stored name (`ram://b/ru` when `ram://b/run/x` is stored): the name is
    looked up in the listing of its folder instead."""
    path = path.rstrip("/")
    parent = dirname(path)
    if not _gfile().exists(parent):
        return False
    try:
        return basename(path) in _ram_listdir(parent)
    except FileNotFoundError:  # the "folder" is a file
        return False


def exists(path):
    if is_local(path):
        return os.path.exists(local_path(path))
    return _ram_exists(path) if scheme(path) == "ram" else _gfile().exists(path)


def isdir(path):
    if is_local(path):
        return os.path.isdir(local_path(path))
    return exists(path) and _gfile().isdir(path)


def isfile(path):
    if is_local(path):
        return os.path.isfile(local_path(path))
    return exists(path) and not _gfile().isdir(path)


def listdir(path):
    """The names in folder `path`, sorted."""
    if is_local(path):
        return sorted(os.listdir(local_path(path)))
    if scheme(path) == "ram":
        if not exists(path):
            raise _not_found(path)
        return _ram_listdir(path)
    with _python_errors(path):
        return sorted(name.rstrip("/") for name in _gfile().listdir(path))


def glob(pattern):
    """The paths matching `pattern` (`*`, `?`, `[...]`), sorted."""
    if is_local(pattern):
        return sorted(_glob.glob(local_path(pattern)))
    import tensorflow as tf

    try:
        return sorted(_gfile().glob(pattern))
    except tf.errors.NotFoundError:  # a missing bucket or folder matches nothing
        return []


def modification_time(path):
    """When the file at `path` was last modified, in seconds since the epoch."""
    if is_local(path):
        return os.path.getmtime(local_path(path))
    with _python_errors(path):
        return _gfile().stat(path).mtime_nsec / 1e9


def getsize(path):
    if is_local(path):
        return os.path.getsize(local_path(path))
    with _python_errors(path):
        return _gfile().stat(path).length


def walk(path):
    """`os.walk(path)` on any file system: (folder, folder names, file names), top down."""
    if is_local(path):
        yield from os.walk(local_path(path))
        return
    if not isdir(path):
        return
    names = listdir(path)
    folders = [name for name in names if isdir(join(path, name))]
    yield path, folders, [name for name in names if name not in folders]
    for name in folders:
        yield from walk(join(path, name))


# Changes.

def makedirs(path, exist_ok=True):
    if is_local(path):
        os.makedirs(local_path(path), exist_ok=exist_ok)
        return
    if not exist_ok and _gfile().exists(path):
        raise FileExistsError(errno.EEXIST, "File exists", path)
    with _python_errors(path):
        _gfile().makedirs(path)


def remove(path):
    """Remove the file `path`."""
    if is_local(path):
        os.remove(local_path(path))
        return
    with _python_errors(path):
        _gfile().remove(path)


def rmtree(path):
    """Remove the folder `path` and everything in it (nothing if it is not there)."""
    if is_local(path):
        shutil.rmtree(local_path(path), ignore_errors=True)
        return
    if exists(path):
        for folder, _, files in list(walk(path)):
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    remove(join(folder, name))
        with contextlib.suppress(Exception):
            _gfile().rmtree(path)


def copy(source, destination, overwrite=True):
    """Copy the file `source` to `destination` (either may be remote)."""
    if is_local(source) and is_local(destination):
        if not overwrite and os.path.exists(local_path(destination)):
            raise FileExistsError(errno.EEXIST, "File exists", destination)
        shutil.copyfile(local_path(source), local_path(destination))
        return
    with _python_errors(source):
        if overwrite:
            _clear_for_writing(destination)
        _gfile().copy(source, destination, overwrite=overwrite)


def _clear_for_writing(path):
    """Remove the remote file `path` where a write would append to it (see
    `_APPENDING_SCHEMES`)."""
    if scheme(path) in _APPENDING_SCHEMES and isfile(path):
        remove(path)


def copy_tree(source, destination):
    """Copy the folder `source` and everything in it into `destination` (made if needed); files
    already there with the same names are replaced."""
    source = absolute(source)
    for folder, _, files in walk(source):
        relative = os.path.relpath(folder, source) if is_local(source) else \
            posixpath.relpath(folder, source)
        target = destination if relative == "." else join(destination, *relative.split(os.sep))
        makedirs(target)
        for name in files:
            copy(join(folder, name), join(target, name))


def rename(source, destination, overwrite=False):
    """Rename a file or folder. Where the file system has no atomic rename a folder is copied
    file by file and the source removed (see `has_atomic_rename`)."""
    if is_local(source) and is_local(destination):
        if overwrite:
            os.replace(local_path(source), local_path(destination))
        elif os.path.exists(local_path(destination)):
            raise FileExistsError(errno.EEXIST, "File exists", destination)
        else:
            os.rename(local_path(source), local_path(destination))
        return
    if isdir(source) and not (has_atomic_rename(source) and scheme(source) == scheme(destination)):
        if exists(destination) and not overwrite:
            raise FileExistsError(errno.EEXIST, "File exists", destination)
        copy_tree(source, destination)
        rmtree(source)
        return
    with _python_errors(source):
        _gfile().rename(source, destination, overwrite=overwrite)


def open_file(path, mode="r", encoding="utf-8", errors=None, newline=None):
    """`open(path, mode)` on any file system; text modes decode with `encoding`.

    A remote file opened for reading that is not there raises `FileNotFoundError` at once. A
    remote binary file reads and splits lines as a local one does (TensorFlow's own `GFile`
    drops every `\\r` from the lines it gives). Writing a remote file makes its folder first
    (object stores need none, but `ram://` lists only the folders made).
    """
    if is_local(path):
        if "b" in mode:
            return open(local_path(path), mode)
        return open(local_path(path), mode, encoding=encoding, errors=errors, newline=newline)
    if "r" in mode and not exists(path):
        raise _not_found(path)
    if "w" in mode:
        _clear_for_writing(path)
    if "w" in mode or "a" in mode:
        makedirs(dirname(path))
    binary_mode = mode.replace("t", "").replace("b", "") + "b"
    raw = _RawGFile(_gfile().GFile(path, binary_mode))
    if "b" in mode:
        return io.BufferedReader(raw) if "r" in mode else io.BufferedWriter(raw)
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors, newline=newline)


class _RawGFile(io.RawIOBase):
    """A `tf.io.gfile.GFile` opened in binary mode, as the raw stream `io.TextIOWrapper` reads."""

    def __init__(self, gfile):
        self._gfile = gfile

    def readable(self):
        return "r" in self._gfile.mode

    def writable(self):
        return "w" in self._gfile.mode or "a" in self._gfile.mode

    def readinto(self, buffer):
        data = self._gfile.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def write(self, data):
        self._gfile.write(bytes(data))
        return len(data)

    def close(self):
        if not self.closed:
            self._gfile.close()
        super().close()


def read_range(path, offset, length):
    """Up to `length` bytes of the file at `path` from byte `offset`, on any file system.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> open(path, "wb").write(b"0123456789")
    10
    >>> read_range(path, 8, 4)
    b'89'
    """
    if is_local(path):
        with open(local_path(path), "rb") as file:
            file.seek(offset)
            return file.read(length)
    with _python_errors(path), _gfile().GFile(path, "rb") as file:
        file.seek(offset)
        return file.read(length)


def read_text(path, encoding="utf-8"):
    with open_file(path, "r", encoding=encoding) as file:
        return file.read()


def read_bytes(path):
    with open_file(path, "rb") as file:
        return file.read()


@contextlib.contextmanager
def local_copy(path):
    """A local path holding what `path` (a file or a folder) holds: `path` itself when it is
    local, else a copy in a temporary local folder, removed when the block ends.

    >>> with local_copy("ram://missing/model.tflite") as copy:  # doctest: +ELLIPSIS
    ...     pass
    Traceback (most recent call last):
    ...
    FileNotFoundError: [Errno 2] No such file or directory: 'ram://missing/model.tflite'
    """
    if is_local(path):
        yield local_path(path)
        return
    if not exists(path):
        raise _not_found(path)
    scratch = tempfile.mkdtemp(prefix="kerasbert-stage-")
    try:
        copied = os.path.join(scratch, basename(path))
        if isdir(path):
            copy_tree(path, copied)
        else:
            copy(path, copied)
        yield copied
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
