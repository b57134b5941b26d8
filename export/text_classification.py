"""Classify raw texts with an export's text signatures, in the runtimes that serve them: the
raw-text TFLite file (`model_text.tflite`, as a phone runs it) and the SavedModel's
`serve_text` (as TF Serving runs it). What `kerasbert-classify` calls.

The export folder may be local or a TensorFlow file-system URL (`gs://...`): an artifact is then
run from a local copy. Artifacts run in this process, so use exports you trust; the paths its
`export_report.json` gives must lead to files inside the export folder.
"""

import os
import posixpath

import numpy as np

from kerasbert import file_system
from kerasbert.export.artifact_runner import saved_model_runner, tflite_runner
from kerasbert.export.errors import ExportError
from kerasbert.export.exporter import REPORT_FILE, TEXT_TFLITE_FILE
from kerasbert.export.text_tflite import SIGNATURE_KEY, TEXT_INPUT
from kerasbert.json_files import read_json_file

from kerasbert.choices import CLASSIFY_RUNTIMES as RUNTIMES


def read_report(export_dir):
    """`export_dir`'s `export_report.json` as a dict.

    >>> import tempfile
    >>> read_report(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    kerasbert.export.errors.ExportError: ...export_report.json: no such file; ...
    """
    path = file_system.join(export_dir, REPORT_FILE)
    if not file_system.isfile(path):
        raise ExportError(f"{path}: no such file; {export_dir} is not a kerasbert-export folder")
    return read_json_file(path, "a kerasbert-export report")


def label_names(export_dir):
    """The label names (by logit column) that `export_dir`'s report records for its classifier."""
    labels = read_report(export_dir)["model"].get("labels")
    if not labels:
        raise ExportError(f"{file_system.join(export_dir, REPORT_FILE)}: the exported model is not a "
                          "sequence classifier (no labels)")
    return labels


def text_logits(export_dir, runtime, texts):
    """`[len(texts), labels]` logits of `texts` through `runtime` ("tflite": the raw-text TFLite
    file; "saved_model": the SavedModel's `serve_text`)."""
    if runtime == "tflite":
        with file_system.local_copy(_artifact_path(export_dir, TEXT_TFLITE_FILE)) as path:
            run, _ = tflite_runner({}, {"path": path, "custom_ops": "tensorflow_text"})
            # The raw-text TFLite signature takes one text at a time.
            return np.concatenate([run(SIGNATURE_KEY, {TEXT_INPUT: _strings([text])})["logits"]
                                   for text in texts])
    if runtime == "saved_model":
        with file_system.local_copy(_artifact_path(export_dir, "saved_model")) as path:
            run, _ = saved_model_runner({"needs_tensorflow_text": True}, {"path": path})
            return run("serve_text", {TEXT_INPUT: _strings(texts)})["logits"]
    raise ExportError(f"unknown runtime {runtime!r}; choose from {list(RUNTIMES)}")


def classify(export_dir, texts, runtimes=RUNTIMES):
    """`{runtime: [label, ...]}`: the predicted label of each text in each runtime.

    Raises `ExportError` naming the first text on which two runtimes disagree.
    """
    labels = label_names(export_dir)
    predictions = {runtime: [labels[index] for index in
                             np.argmax(text_logits(export_dir, runtime, texts), axis=-1)]
                   for runtime in runtimes}
    first, *others = runtimes
    for other in others:
        for text, a, b in zip(texts, predictions[first], predictions[other]):
            if a != b:
                raise ExportError(f"{first} says {a!r} but {other} says {b!r} for the text "
                                  f"{text!r}")
    return predictions


def _artifact_path(export_dir, name):
    """Where the report says artifact `name` is (a SavedModel may sit in a version folder):
    a relative path inside `export_dir`, or an `ExportError` naming the report, the field and
    the path."""
    artifacts = read_report(export_dir)["artifacts"]
    if name not in artifacts:
        raise ExportError(f"{export_dir}: has no {name} (export it with --text_signatures"
                          f"{'' if name == 'saved_model' else ' and a WordPiece model'})")
    relative = artifacts[name]["path"]
    report = file_system.join(export_dir, REPORT_FILE)
    field = f"artifacts.{name}.path"
    if not isinstance(relative, str) or not relative:
        raise ExportError(f"{report}: field {field} is {relative!r}, not a path")
    path = file_system.join(export_dir, relative)
    if (os.path.isabs(relative) or posixpath.isabs(relative)
            or not file_system.is_local(relative)):
        raise ExportError(f"{report}: field {field} is {relative!r}, an absolute path; an "
                          "artifact's path must be relative to the export folder")
    if not file_system.is_within(path, export_dir) or (
            file_system.absolute(path) == file_system.absolute(export_dir)):
        raise ExportError(f"{report}: field {field} is {relative!r}, which is not inside the "
                          f"export folder {export_dir}; an artifact's path must stay inside it")
    return path


def _strings(texts):
    return np.array([text.encode("utf-8") for text in texts], dtype=object)


def classify_file(export_dir, input_file, runtimes=RUNTIMES, output_file=None):
    """Classify the texts of `input_file` (one a line, UTF-8) with `classify`, print them with
    each runtime's label in a table, and write them to `output_file` as JSON if given; the
    predictions. An `ExportError` if the file has no text line."""
    import json

    from kerasbert.atomic_files import write_atomically

    texts = [line.strip() for line in file_system.read_text(input_file).splitlines()
             if line.strip()]
    if not texts:
        raise ExportError(f"{input_file}: no text lines")
    predictions = classify(export_dir, texts, runtimes)
    width = min(60, max(len(text) for text in texts))
    print("  ".join(["text".ljust(width), *runtimes]))
    for index, text in enumerate(texts):
        shown = text if len(text) <= width else text[:width - 3] + "..."
        print("  ".join([shown.ljust(width), *(predictions[runtime][index]
                                               for runtime in runtimes)]))
    if output_file:
        write_atomically(output_file, json.dumps(
            [{"text": text, **{runtime: predictions[runtime][index] for runtime in runtimes}}
             for index, text in enumerate(texts)], indent=1) + "\n")
    return predictions
