"""Read the lines of plain or gzip-compressed text files, for vocabulary training and corpora.

Paths may be local or on any of TensorFlow's file systems (`kerasbert.file_system`).
"""

import contextlib
import gzip
import io
import os

import tensorflow as tf

from kerasbert import file_system

_GZIP_MAGIC = b"\x1f\x8b"


def check_text_files(files):
    """`files` as a list of existing paths; a clear error otherwise."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    files = [os.fspath(path) for path in files]
    if not files:
        raise ValueError("No text files given")
    missing = [path for path in files if not file_system.isfile(path)]
    if missing:
        raise FileNotFoundError(f"Text file(s) not found: {missing}")
    return files


def is_gzip(path):
    """Whether the file at `path` is gzip-compressed (by its first two bytes)."""
    with file_system.open_file(path, "rb") as file:
        return file.read(2) == _GZIP_MAGIC


@contextlib.contextmanager
def open_decompressed(path, gzipped):
    """The bytes of the file at `path` as a binary file object, gunzipped when `gzipped`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt.gz")
    >>> with gzip.open(path, "wb") as file:
    ...     _ = file.write(b"one\\ntwo\\n")
    >>> with open_decompressed(path, gzipped=True) as file:
    ...     list(file)
    [b'one\\n', b'two\\n']
    """
    with file_system.open_file(path, "rb") as raw:
        if not gzipped:
            yield raw
            return
        with gzip.GzipFile(fileobj=raw, mode="rb") as file:
            yield file


def iterate_lines(files):
    """Non-empty lines (without the newline) of every file, in order, as str."""
    for path in check_text_files(files):
        with open_decompressed(path, is_gzip(path)) as raw:
            for line in io.TextIOWrapper(raw, encoding="utf-8"):
                line = line.rstrip("\n")
                if line.strip():
                    yield line


def line_dataset(files):
    """A `tf.data.Dataset` of the non-empty lines of every file (plain or gzip), in order."""
    files = check_text_files(files)
    datasets = [tf.data.TextLineDataset(path, compression_type="GZIP" if is_gzip(path) else "")
                for path in files]
    dataset = datasets[0]
    for other in datasets[1:]:
        dataset = dataset.concatenate(other)
    return dataset.filter(lambda line: tf.strings.length(tf.strings.strip(line)) > 0)


def report_progress(lines, progress):
    """`lines` unchanged, after calling `progress(number of lines)` (for use in `Dataset.map`)."""
    reported = tf.py_function(lambda count: (progress(int(count)), count)[1], [tf.size(lines)], tf.int32)
    with tf.control_dependencies([reported]):
        return tf.identity(lines)


def count_lines(files):
    """How many non-empty lines `iterate_lines(files)` yields."""
    return sum(1 for _ in iterate_lines(files))
