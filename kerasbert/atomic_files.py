"""Write files so that a reader never sees a half-written one: a temporary name, then rename."""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_output(path, mode="wb", encoding=None):
    """A file to write `path`'s content into, in pieces: it is a temporary file in the same
    directory, renamed to `path` when the `with` block ends without an error and removed
    otherwise (`path` is then left as it was). It gets the usual permissions (0666 less the
    umask), like a plain `open`.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with atomic_output(path, "w", encoding="utf-8") as file:
    ...     _ = file.write("one\\n"), file.write("two\\n")
    >>> open(path).read()
    'one\\ntwo\\n'
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-" + os.path.basename(path))
    try:
        with os.fdopen(handle, mode, encoding=encoding) as file:
            yield file
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def write_atomically(path, data):
    """Write `data` (bytes or str) to `path` via a temporary file in the same directory.

    The file gets the usual permissions (0666 less the umask), like a plain `open`.

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
