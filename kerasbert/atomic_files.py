"""Write files so that a reader never sees a half-written one: a temporary name, then rename."""

import os
import tempfile


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
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-" + os.path.basename(path))
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path
