"""Fingerprints of a training run's input files, so that a rerun continues only on the data it
started with (`kerasbert.training.run_record`).

A file's fingerprint is its size, its modification time and a SHA-256 of its first and last
`ENDS_BYTES` (the whole file when it is smaller than both). A file has changed when its size or
that hash differ, or, for a file larger than what the hash covers, its modification time.

What is fingerprinted for a path flag's value: a file; each file a glob matches; the files
directly inside a folder (a tokenizer, a Hugging Face or kerasbert model folder, a task's data
folder: not its subfolders, such as a pretraining run's TensorBoard logs); the files of a
checkpoint prefix (`ckpt-10.index`, `ckpt-10.data-*`). A value that names nothing is left to the
binary, which reports it.
"""

import glob as _glob
import hashlib

from kerasbert import file_system

ENDS_BYTES = 1 << 20


def fingerprint(path):
    """`{"size", "modified", "ends_sha256"}` of the file at `path`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
    >>> open(path, "w").write("a\\tb\\n")
    4
    >>> sorted(fingerprint(path)), fingerprint(path)["size"]
    (['ends_sha256', 'modified', 'size'], 4)
    """
    size = file_system.getsize(path)
    digest = hashlib.sha256()
    digest.update(file_system.read_range(path, 0, min(size, ENDS_BYTES)))
    if size > ENDS_BYTES:
        tail = max(ENDS_BYTES, size - ENDS_BYTES)
        digest.update(file_system.read_range(path, tail, size - tail))
    return {"size": size, "modified": round(file_system.modification_time(path), 6),
            "ends_sha256": digest.hexdigest()}


def input_files(value):
    """The files a path flag's `value` (a path, glob, folder or checkpoint prefix, or a list of
    them) names, sorted (module docstring)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    files = set()
    for item in values:
        if not item:
            continue
        item = str(item)
        if file_system.isfile(item):
            files.add(item)
        elif file_system.isdir(item):
            files.update(path for path in (file_system.join(item, name)
                                           for name in file_system.listdir(item))
                         if file_system.isfile(path))
        elif _glob.has_magic(item):
            files.update(path for path in file_system.glob(item) if file_system.isfile(path))
        else:  # a checkpoint prefix
            files.update(path for path in file_system.glob(_glob.escape(item) + ".*")
                         if file_system.isfile(path))
    return sorted(files)


def fingerprints(values):
    """`{file: fingerprint}` of every file the path flag values `values` (`{flag: value}`)
    name."""
    return {path: fingerprint(path) for value in values.values() for path in input_files(value)}


def changed(recorded, path):
    """How the file at `path` differs from its `recorded` fingerprint, or None if it does not."""
    if not file_system.isfile(path):
        return "it is no longer there"
    now = fingerprint(path)
    if now["size"] != recorded.get("size"):
        return f"its size was {recorded.get('size')} bytes and is {now['size']}"
    if now["ends_sha256"] != recorded.get("ends_sha256"):
        return "its content differs"
    if now["size"] > 2 * ENDS_BYTES and now["modified"] != recorded.get("modified"):
        return "it was modified since (same size; the middle of the file is not hashed)"
    return None
