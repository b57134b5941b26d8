"""Where a sentence-transformers folder keeps its Transformer module (and so its tokenizer)."""

import dataclasses

from kerasbert import file_system
from kerasbert.json_files import read_json_file

MODULES_FILE = "modules.json"


class SentenceTransformersFolderError(ValueError):
    """A sentence-transformers folder kerasbert cannot read; the message names the file."""


@dataclasses.dataclass(frozen=True)
class ModuleEntry:
    """One `modules.json` entry: its class name (`Transformer`, `Pooling`, ...), full type
    and folder.

    >>> ModuleEntry("Pooling", "sentence_transformers.models.Pooling", "/m/1_Pooling").kind
    'Pooling'
    """

    kind: str
    type: str
    folder: str


def is_sentence_transformers_folder(directory):
    """Whether `directory` is a sentence-transformers model folder (it has `modules.json`)."""
    return file_system.exists(file_system.join(directory, MODULES_FILE))


def module_entries(directory):
    """The `ModuleEntry` list of the folder's `modules.json`, in order; a module path that
    leaves the folder, or an entry without a type and path, is an error naming the file.

    >>> import json, os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = open(os.path.join(folder, "modules.json"), "w").write(json.dumps([
    ...     {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    ...     {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    >>> [(entry.kind, os.path.relpath(entry.folder, folder)) for entry in module_entries(folder)]
    [('Transformer', '.'), ('Pooling', '1_Pooling')]
    """
    path = file_system.join(directory, MODULES_FILE)
    entries = []
    for index, module in enumerate(read_json_file(path, "a sentence-transformers modules list",
                                                  expected=list)):
        if not isinstance(module, dict) or not isinstance(module.get("type"), str) or \
                not isinstance(module.get("path"), str):
            raise SentenceTransformersFolderError(
                f"{path}: entry {index} needs a 'type' and a 'path' string, got {module!r}")
        folder = module["path"]
        if folder.startswith("/") or ".." in folder.split("/"):
            raise SentenceTransformersFolderError(
                f"{path}: module {index}'s path {folder!r} leaves the folder")
        entries.append(ModuleEntry(kind=module["type"].rsplit(".", 1)[-1], type=module["type"],
                                   folder=file_system.join(directory, folder) if folder
                                   else directory))
    return entries


def transformer_settings(directory):
    """`(folder, settings)` of the folder's Transformer module: where its Hugging Face
    checkpoint and tokenizer are, and its `sentence_bert_config.json` (`{}` if absent)."""
    transformers = [entry for entry in module_entries(directory) if entry.kind == "Transformer"]
    if len(transformers) != 1:
        raise SentenceTransformersFolderError(
            f"{file_system.join(directory, MODULES_FILE)}: expected one Transformer module, "
            f"found {len(transformers)}")
    folder = transformers[0].folder
    settings_path = file_system.join(folder, "sentence_bert_config.json")
    settings = (read_json_file(settings_path, "a sentence-transformers settings file")
                if file_system.exists(settings_path) else {})
    return folder, settings
