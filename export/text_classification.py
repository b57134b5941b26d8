"""Classify raw texts with an export's text signatures, in the runtimes that serve them: the
raw-text TFLite file (`model_text.tflite`, as a phone runs it) and the SavedModel's
`serve_text` (as TF Serving runs it). What `kerasbert-classify` calls."""

import os

import numpy as np

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
    path = os.path.join(export_dir, REPORT_FILE)
    if not os.path.isfile(path):
        raise ExportError(f"{path}: no such file; {export_dir} is not a kerasbert-export folder")
    return read_json_file(path, "a kerasbert-export report")


def label_names(export_dir):
    """The label names (by logit column) that `export_dir`'s report records for its classifier."""
    labels = read_report(export_dir)["model"].get("labels")
    if not labels:
        raise ExportError(f"{os.path.join(export_dir, REPORT_FILE)}: the exported model is not a "
                          "sequence classifier (no labels)")
    return labels


def text_logits(export_dir, runtime, texts):
    """`[len(texts), labels]` logits of `texts` through `runtime` ("tflite": the raw-text TFLite
    file; "saved_model": the SavedModel's `serve_text`)."""
    if runtime == "tflite":
        path = _artifact_path(export_dir, TEXT_TFLITE_FILE)
        run, _ = tflite_runner({}, {"path": path, "custom_ops": "tensorflow_text"})
        # The raw-text TFLite signature takes one text at a time.
        return np.concatenate([run(SIGNATURE_KEY, {TEXT_INPUT: _strings([text])})["logits"]
                               for text in texts])
    if runtime == "saved_model":
        path = _artifact_path(export_dir, "saved_model")
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
    """Where the report says artifact `name` is (a SavedModel may sit in a version folder)."""
    artifacts = read_report(export_dir)["artifacts"]
    if name not in artifacts:
        raise ExportError(f"{export_dir}: has no {name} (export it with --text_signatures"
                          f"{'' if name == 'saved_model' else ' and a WordPiece model'})")
    return os.path.join(export_dir, artifacts[name]["path"])


def _strings(texts):
    return np.array([text.encode("utf-8") for text in texts], dtype=object)
