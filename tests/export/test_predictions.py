"""`kerasbert.export.predictions` (what `kerasbert-predict` runs): the task from the report;
missing artifacts, records without the task's fields and runtimes that disagree are named
errors. (Real answers from real exports: tests/export/test_predict_binary.py and the main job,
tests/test_demo.py.)"""

import json
import os

import numpy as np
import pytest

from kerasbert.export import ExportError
from kerasbert.export import predictions


def _export_dir(tmp_path, labels, artifacts=("saved_model",), paths=None, task=None):
    paths = paths or {}
    report = {"model": {"labels": labels, "task": task},
              "artifacts": {name: {"path": paths.get(name, name)} for name in artifacts}}
    (tmp_path / "export_report.json").write_text(json.dumps(report))
    return str(tmp_path)


def test_the_task_comes_from_the_report(tmp_path):
    assert predictions.exported_task(_export_dir(tmp_path, ["neg", "pos"])) == (
        "sequence_classification")  # a report written before the task was recorded
    assert predictions.exported_task(_export_dir(tmp_path, None, task="question_answering")) == (
        "question_answering")
    with pytest.raises(ExportError, match="is not a task model"):
        predictions.exported_task(_export_dir(tmp_path, None))


def test_a_missing_text_artifact_is_named(tmp_path):
    export_dir = _export_dir(tmp_path, ["neg", "pos"])
    with pytest.raises(ExportError, match="has no model_text.tflite"):
        predictions.predict(export_dir, [{"text": "a text"}], ["tflite"])
    with pytest.raises(ExportError, match="unknown runtime 'onnx'"):
        predictions.predict(export_dir, [{"text": "a text"}], ["onnx"])


def test_a_record_without_the_task_fields_is_named(tmp_path):
    export_dir = _export_dir(tmp_path, None, task="question_answering")
    with pytest.raises(ExportError, match="record 2 .* has no 'context' field"):
        predictions.predict(export_dir, [{"question": "q", "context": "c"}, {"question": "q"}])


def test_runtimes_that_disagree_name_the_record(tmp_path, monkeypatch):
    rows = {"tflite": [{"label": b"pos", "probabilities": np.array([0.4, 0.6])},
                       {"label": b"neg", "probabilities": np.array([0.7, 0.3])}],
            "saved_model": [{"label": b"pos", "probabilities": np.array([0.4, 0.6])},
                            {"label": b"pos", "probabilities": np.array([0.49, 0.51])}]}
    monkeypatch.setattr(predictions, "_outputs",
                        lambda export_dir, runtime, task, records: rows[runtime])
    export_dir = _export_dir(tmp_path, ["neg", "pos"])
    records = [{"text": "first"}, {"text": "second"}]
    with pytest.raises(ExportError, match="tflite says {'label': 'neg'} but saved_model says "
                                          "{'label': 'pos'} for {\"text\": \"second\"}"):
        predictions.predict(export_dir, records, ["tflite", "saved_model"])
    rows["saved_model"][1] = rows["tflite"][1]
    assert predictions.predict(export_dir, records, ["tflite", "saved_model"]) == [
        {"text": "first", "label": "pos", "probabilities": {"neg": 0.4, "pos": 0.6},
         "runtimes": ["tflite", "saved_model"]},
        {"text": "second", "label": "neg", "probabilities": {"neg": 0.7, "pos": 0.3},
         "runtimes": ["tflite", "saved_model"]}]


def test_records_are_read_from_text_or_json_lines(tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("a text\n\n {not json}\n", encoding="utf-8")
    assert predictions.read_records(str(texts)) == [{"text": "a text"}, {"text": "{not json}"}]
    lines = tmp_path / "records.jsonl"
    lines.write_text('{"question": "q", "context": "c"}\n["a list"]\n', encoding="utf-8")
    with pytest.raises(ExportError, match="records.jsonl line 2: a JSON list, not an object"):
        predictions.read_records(str(lines))
    lines.write_text('{"question": "q"\n', encoding="utf-8")
    with pytest.raises(ExportError, match="records.jsonl line 1: not JSON"):
        predictions.read_records(str(lines))


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
        predictions.predict(export_dir, [{"text": "a text"}], [runtime])
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{export_dir}/export_report.json: field artifacts.{name}.path is "
                              f"{path!r}")
    assert problem in message


@pytest.mark.parametrize("runtime, name", [("tflite", "model_text.tflite"),
                                           ("saved_model", "saved_model")])
def test_a_link_inside_the_export_folder_that_points_outside_is_refused(tmp_path, runtime, name):
    """The report names a path inside the folder, but it is a symbolic link to a file or folder
    outside: confinement compares resolved paths, so it is refused like `../outside`."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "model").mkdir()
    (tmp_path / "export").mkdir()
    export_dir = _export_dir(tmp_path / "export", ["neg", "pos"], [name], {name: "linked"})
    os.symlink(tmp_path / "outside" / "model", tmp_path / "export" / "linked")
    with pytest.raises(ExportError, match=f"field artifacts.{name}.path is 'linked', which is not "
                                          "inside the export folder"):
        predictions.predict(export_dir, [{"text": "a text"}], [runtime])


def test_report_paths_inside_the_export_folder_are_used(tmp_path):
    """A version folder of the SavedModel (`saved_model/1`) is inside: the path is used, and
    it is the artifact's absence there that is reported."""
    export_dir = _export_dir(tmp_path, ["neg", "pos"], ["saved_model"],
                             {"saved_model": "saved_model/1"})
    with pytest.raises(OSError, match="saved_model/1"):
        predictions.predict(export_dir, [{"text": "a text"}], ["saved_model"])
