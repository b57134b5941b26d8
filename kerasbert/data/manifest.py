"""The manifest of a pretraining data set: which shards it has, how many instances each holds, their
sizes and checksums, and the flags and seed that made them.

A data creation task writes its manifest after its last shard, atomically, so a manifest that exists
says its shards are complete. Task I of N (N > 1) first writes its own
`<output_file>.task-0000I-of-0000N.manifest.json`, then, last, the data set's
`<output_file>.manifest.json`: the union of the task manifests present beside it, with `complete`
true once all N are (`task_indices` says which are in). With one task only `<output_file>.manifest.json`
is written. A reader knows the data set is complete when that file says `"complete": true`.

Example:
>>> import os, tempfile
>>> from kerasbert.data.tfrecords import write_tfrecord
>>> output_file = os.path.join(tempfile.mkdtemp(), "train.tfrecord")
>>> _ = write_tfrecord(output_file, [b"one", b"two"])
>>> manifest = task_manifest({output_file: ["corpus.txt"]}, seed=7, flags={"dupe_factor": 1},
...                          task_index=0, num_tasks=1)
>>> write_manifest(manifest_path(output_file), manifest)
>>> read_manifest(manifest_path(output_file))["instances"]
2
"""

import contextlib
import glob
import hashlib
import json

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.data.tfrecords import count_records
from kerasbert.json_files import read_json_file

MANIFEST_VERSION = 1
_CHUNK_BYTES = 1 << 20


def manifest_path(output_file):
    """The data set's manifest: `<output_file>.manifest.json`.

    >>> manifest_path("data/train.tfrecord")
    'data/train.tfrecord.manifest.json'
    """
    return f"{output_file}.manifest.json"


def task_manifest_path(output_file, task_index, num_tasks):
    """Task `task_index`'s manifest: the data set's own with one task, else a name of its own.

    >>> task_manifest_path("data/train.tfrecord", 1, 3)
    'data/train.tfrecord.task-00001-of-00003.manifest.json'
    >>> task_manifest_path("data/train.tfrecord", 0, 1)
    'data/train.tfrecord.manifest.json'
    """
    if num_tasks == 1:
        return manifest_path(output_file)
    return f"{output_file}.task-{task_index:05d}-of-{num_tasks:05d}.manifest.json"


def shard_entry(path, input_files, compression=None):
    """What the manifest says of one shard: its file name (relative to the manifest), the corpus
    files it was made from, instances, bytes and sha256."""
    digest = hashlib.sha256()
    with file_system.open_file(path, "rb") as file:
        for chunk in iter(lambda: file.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    instances = count_records(path, compression)
    return {"path": file_system.basename(path), "input_files": list(input_files),
            "instances": instances, "bytes": file_system.getsize(path),
            "sha256": digest.hexdigest()}


def task_manifest(shard_inputs, seed, flags, task_index, num_tasks, compression=None):
    """The manifest of one task's finished shards, given as {shard path: its corpus files}."""
    shards = [shard_entry(path, inputs, compression) for path, inputs in shard_inputs.items()]
    return {"version": MANIFEST_VERSION, "complete": True, "num_tasks": num_tasks,
            "task_indices": [task_index], "instances": sum(shard["instances"] for shard in shards),
            "random_seed": seed, "flags": flags, "shards": shards}


def combined_manifest(output_file, num_tasks):
    """The data set's manifest: the union of the `num_tasks` task manifests present, `complete`
    once all are. The tasks must agree on the seed and the flags."""
    parts = []
    for index in range(num_tasks):
        path = task_manifest_path(output_file, index, num_tasks)
        if file_system.exists(path):
            parts.append((path, read_manifest(path)))
    if not parts:
        raise ValueError(f"No task manifest of {output_file} to combine")
    first_path, first = parts[0]
    for path, part in parts[1:]:
        for key in ("random_seed", "flags"):
            if part[key] != first[key]:
                raise ValueError(f"The task manifests {first_path} and {path} disagree on {key}: "
                                 f"{first[key]} != {part[key]}")
    shards = sorted((shard for _, part in parts for shard in part["shards"]), key=lambda s: s["path"])
    indices = sorted(index for _, part in parts for index in part["task_indices"])
    return {"version": MANIFEST_VERSION, "complete": len(indices) == num_tasks,
            "num_tasks": num_tasks, "task_indices": indices,
            "instances": sum(shard["instances"] for shard in shards),
            "random_seed": first["random_seed"], "flags": first["flags"], "shards": shards}


def write_manifest(path, manifest):
    """Write `manifest` (a dict) to `path` as JSON, atomically."""
    write_atomically(path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def read_manifest(path):
    """The manifest at `path`; a ValueError naming the file if it is not a manifest (and the
    field, if one is missing when read)."""
    manifest = read_json_file(path, "a data set manifest")
    if manifest.get("version") != MANIFEST_VERSION:
        raise ValueError(f"{path} is not a version {MANIFEST_VERSION} data set manifest")
    return manifest


# What an unfinished data set was started with: written before its first shard, removed once the
# data set's manifest says it is complete (the manifest then holds the flags).
_PATH_FLAGS = ("input_file", "vocab_file", "merges_file", "tokenizer_dir")


def intent_path(output_file):
    """The intent of an unfinished data set: `<output_file>.intent.json`.

    >>> intent_path("data/train.tfrecord")
    'data/train.tfrecord.intent.json'
    """
    return f"{output_file}.intent.json"


def start_intent(output_file, flags, input_files, started_shards):
    """Before the first shard of an unfinished data set: record its intent (`flags`, paths made
    absolute, and the corpus files they match), or, if one is recorded, check that it is this
    one. A `ValueError` (one line) names every differing flag with its recorded and given
    value; shards already present (`started_shards`) without an intent are an error too, as
    what they were made with is unknown, unless a manifest of the data set (or of one of its
    tasks) says they were made with these flags. Nothing is written when it raises. Returns
    whether it wrote the intent (a new data set).

    >>> import os, tempfile
    >>> output_file = os.path.join(tempfile.mkdtemp(), "train.tfrecord")
    >>> start_intent(output_file, {"dupe_factor": 1}, ["/corpus/a.txt"], [])
    True
    >>> start_intent(output_file, {"dupe_factor": 2}, ["/corpus/a.txt"], [])
    Traceback (most recent call last):
    ...
    ValueError: ... --dupe_factor: recorded 1, given 2; ...
    """
    intent = {"version": MANIFEST_VERSION, "flags": {
        name: _absolute(value) if name in _PATH_FLAGS else value for name, value in flags.items()},
        "input_files": [file_system.absolute(path) for path in input_files]}
    path = intent_path(output_file)
    if not file_system.exists(path):
        if started_shards and not _made_with(output_file, flags):
            raise ValueError(
                f"{output_file} is unfinished "
                f"({', '.join(map(file_system.basename, started_shards))} present, no manifest) "
                f"and has no {file_system.basename(path)}, so what it was made "
                "with is unknown; remove its shards or give another --output_file")
        write_atomically(path, json.dumps(intent, indent=1, sort_keys=True) + "\n")
        return True
    try:
        with file_system.open_file(path, encoding="utf-8") as file:
            recorded = json.load(file)
        recorded_flags, recorded_inputs = recorded["flags"], recorded["input_files"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not a data set intent ({error}); remove it and the shards "
                         f"of {output_file} to start over") from None
    given = json.loads(json.dumps(intent))  # as JSON gives it back (tuples are lists)
    differences = [f"--{name}: recorded {_shown(recorded_flags.get(name))}, given "
                   f"{_shown(given['flags'].get(name))}"
                   for name in sorted(set(recorded_flags) | set(given["flags"]))
                   if recorded_flags.get(name) != given["flags"].get(name)]
    if recorded_inputs != given["input_files"]:
        differences.append(f"input files: recorded {_shown(recorded_inputs)}, given "
                           f"{_shown(given['input_files'])}")
    if differences:
        raise ValueError(
            f"{output_file} is unfinished and was started with other values ({path}): "
            f"{'; '.join(differences)}; rerun with the recorded values, give another "
            "--output_file, or remove its shards and the intent to start over")
    return False


def _made_with(output_file, flags):
    """Whether a manifest beside `output_file` (the data set's or a task's) lists these flags."""
    pattern = f"{glob.escape(output_file)}.task-*-of-*.manifest.json"
    for path in [manifest_path(output_file), *file_system.glob(pattern)]:
        if file_system.exists(path) and read_manifest(path)["flags"] == json.loads(json.dumps(flags)):
            return True
    return False


def finish_intent(output_file):
    """Remove the intent of a data set whose manifest says it is complete."""
    with contextlib.suppress(FileNotFoundError):
        file_system.remove(intent_path(output_file))


def _absolute(value):
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [_absolute(item) for item in value]
    return file_system.absolute(value)


def _shown(value):
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)
