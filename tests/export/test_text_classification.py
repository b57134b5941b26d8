"""`kerasbert.export.text_classification` (what `kerasbert-classify` runs): label names from the
report, missing artifacts and runtimes that disagree are named errors. (The raw-text TFLite file
and SavedModel giving the same labels for real is shown by the main job, tests/test_demo.py.)"""

import json

import numpy as np
import pytest

from kerasbert.export import ExportError
from kerasbert.export import text_classification


def _export_dir(tmp_path, labels, artifacts=("saved_model",), paths=None):
    paths = paths or {}
    report = {"model": {"labels": labels},
              "artifacts": {name: {"path": paths.get(name, name)} for name in artifacts}}
    (tmp_path / "export_report.json").write_text(json.dumps(report))
    return str(tmp_path)


def test_label_names_come_from_the_report(tmp_path):
    assert text_classification.label_names(_export_dir(tmp_path, ["neg", "pos"])) == ["neg", "pos"]
    with pytest.raises(ExportError, match="not a sequence classifier"):
        text_classification.label_names(_export_dir(tmp_path, None))


def test_a_missing_text_artifact_is_named(tmp_path):
    export_dir = _export_dir(tmp_path, ["neg", "pos"])
    with pytest.raises(ExportError, match="has no model_text.tflite"):
        text_classification.text_logits(export_dir, "tflite", ["a text"])
    with pytest.raises(ExportError, match="unknown runtime 'onnx'"):
        text_classification.text_logits(export_dir, "onnx", ["a text"])


def test_runtimes_that_disagree_name_the_text(tmp_path, monkeypatch):
    logits = {"tflite": np.array([[0.0, 1.0], [1.0, 0.0]]),
              "saved_model": np.array([[0.0, 1.0], [0.0, 1.0]])}
    monkeypatch.setattr(text_classification, "text_logits",
                        lambda export_dir, runtime, texts: logits[runtime])
    export_dir = _export_dir(tmp_path, ["neg", "pos"])
    with pytest.raises(ExportError, match="tflite says 'neg' but saved_model says 'pos' for the "
                                          "text 'second'"):
        text_classification.classify(export_dir, ["first", "second"])
    logits["saved_model"] = logits["tflite"]
    assert text_classification.classify(export_dir, ["first", "second"]) == {
        "tflite": ["pos", "neg"], "saved_model": ["pos", "neg"]}


@pytest.mark.parametrize("runtime, name", [("tflite", "model_text.tflite"),
                                           ("saved_model", "saved_model")])
@pytest.mark.parametrize("path, problem", [
    ("/etc/passwd", "an absolute path"),
    ("gs://elsewhere/model", "an absolute path"),
    ("../outside/model", "not inside the export folder"),
    ("saved_model/../../outside", "not inside the export folder"),
    (".", "not inside the export folder"),
])
def test_report_paths_outside_the_export_folder_are_refused(tmp_path, runtime, name, path,
                                                            problem):
    """An export's report is data: an artifact path in it that is absolute or leaves the
    folder is refused before anything is loaded, in one line naming report, field and path."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "export").mkdir()
    export_dir = _export_dir(tmp_path / "export", ["neg", "pos"], [name], {name: path})
    with pytest.raises(ExportError) as raised:
        text_classification.text_logits(export_dir, runtime, ["a text"])
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{export_dir}/export_report.json: field artifacts.{name}.path is "
                              f"{path!r}")
    assert problem in message


def test_report_paths_inside_the_export_folder_are_used(tmp_path):
    """A version folder of the SavedModel (`saved_model/1`) is inside: the path is used, and
    it is the artifact's absence there that is reported."""
    export_dir = _export_dir(tmp_path, ["neg", "pos"], ["saved_model"],
                             {"saved_model": "saved_model/1"})
    with pytest.raises(OSError, match="saved_model/1"):
        text_classification.text_logits(export_dir, "saved_model", ["a text"])
