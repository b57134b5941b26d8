"""Read the JSON files kerasbert and Hugging Face leave on disk (`kerasbert_model.json`,
`eval_history.json`, data set manifests, `export_report.json`, `config.json`, ...) so that a
damaged one is an error that names it: not valid JSON (or not UTF-8), another kind of value at
the top (`[]` or `3` where an object belongs), or a field that is not there, named with its place
(`encoder_config.vocab_size`) when the code reads it with `[]`.
"""

import json

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically


class JsonFileError(ValueError):
    """A JSON file that cannot be used: the message names the file (and the field)."""


class MissingFieldError(JsonFileError, KeyError):
    """A field read with `[]` that the file does not have (also a `KeyError`)."""

    def __str__(self):
        return str(self.args[0])


class JsonObject(dict):
    """A JSON object read from a file: a `dict` whose missing fields, read with `[]`, raise
    `MissingFieldError` naming the file and the field.

    >>> settings = JsonObject({"model": {"labels": []}}, "run/report.json")
    >>> settings["model"]["labels"]
    []
    >>> settings["model"]["name"]
    Traceback (most recent call last):
    ...
    kerasbert.json_files.MissingFieldError: run/report.json: no field 'model.name'
    """

    def __init__(self, fields, path, place=""):
        super().__init__((key, _with_json_objects(value, path, _join(place, key)))
                         for key, value in fields.items())
        self.path, self.place = path, place

    def __missing__(self, key):
        raise MissingFieldError(f"{self.path}: no field {_join(self.place, key)!r}")


def _join(place, key):
    if isinstance(key, int):
        return f"{place}[{key}]"
    return f"{place}.{key}" if place else str(key)


def _with_json_objects(value, path, place):
    """`value` with every dict in it (at any depth) a `JsonObject` naming its place."""
    if isinstance(value, dict):
        return JsonObject(value, path, place)
    if isinstance(value, list):
        return [_with_json_objects(item, path, _join(place, index))
                for index, item in enumerate(value)]
    return value


_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "true or false",
          int: "a number", float: "a number", type(None): "null"}


def read_json_file(path, what="a JSON file", expected=dict):
    """The content of the JSON file at `path`, which must be of type `expected` (`dict`: a JSON
    object, `list`: an array, None: anything); objects in it are `JsonObject`s. A
    `JsonFileError` names the file and says it is not `what` otherwise (an `OSError` if it cannot
    be opened).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "config.json")
    >>> _ = open(path, "w").write("[]")
    >>> read_json_file(path, "a Hugging Face config")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.json_files.JsonFileError: .../config.json is not a Hugging Face config: it holds an ...
    """
    try:
        with file_system.open_file(path, encoding="utf-8") as file:
            value = json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise JsonFileError(f"{path} is not {what}: not valid JSON ({error})") from None
    if expected is not None and not isinstance(value, expected):
        raise JsonFileError(f"{path} is not {what}: it holds {_KINDS.get(type(value), 'a value')}, "
                            f"not {_KINDS[expected]}")
    return _with_json_objects(value, path, "")


def write_json_file(path, value):
    """Write `value` to `path` as indented JSON with sorted keys, atomically (all or nothing)."""
    return write_atomically(path, json.dumps(value, indent=2, sort_keys=True) + "\n")
