"""The main job (`kerasbert-demo --quick`): every stage through its console script, on the shipped
data, interrupted once during pretraining and continued; what it writes and shows; the continued
pretraining ends bit for bit as an uninterrupted one; a continued run keeps its recorded
settings; a folder that is not a run is refused."""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.cli.one_line_errors import one_line
from kerasbert.demo_pipeline import QUICK
from kerasbert.demo_pipeline.runner import (LOGS_DIR, RUN_FILE, StageError, format_table, read_run,
                                            run_main_job, run_stage, start_run,
                                            training_precision)
from kerasbert.demo_pipeline.stages import EXPORT_EVAL_EXAMPLES, Stage, plan
from kerasbert.export.runtimes import KEEP_RUNNERS

pytestmark = pytest.mark.slow

STAGES = ["vocabulary", "pretraining_data", "pretrain", "finetune_pretrained",
          "finetune_from_scratch", "test_pretrained", "test_from_scratch", "export", "classify"]
SPAM = ("cudart_stub", "absl::InitializeLog", "cuInit", "cpu_feature_guard", "Traceback")
DEMO = os.path.join(os.path.dirname(sys.executable), "kerasbert-demo")
# As a user runs it: the export stage verifies in fresh runner processes, not the suite's kept ones.
AS_A_USER = {name: value for name, value in os.environ.items() if name != KEEP_RUNNERS}


def _interruptible():
    """Give the main job Ctrl-C's default handling, as a terminal does: a shell that starts a
    job in the background (`command &`, as CI runners may) leaves SIGINT ignored, and an
    ignored signal stays ignored in every program the job starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _listing(directory):
    return os.listdir(directory) if os.path.isdir(directory) else []


def _wait_for(condition, process, timeout=900):
    deadline = time.time() + timeout
    while not condition():
        assert process.poll() is None, "the main job ended before the point to interrupt it"
        assert time.time() < deadline, "timed out waiting for the main job"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def interrupted_then_finished(tmp_path_factory):
    """A quick run interrupted (Ctrl-C) once pretraining has written a checkpoint, then the same
    command again: `(runs_dir, first_output, second_output)`."""
    runs = tmp_path_factory.mktemp("runs")
    first = subprocess.Popen([DEMO, "--quick", f"--runs_dir={runs}"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True,
                             preexec_fn=_interruptible, env=AS_A_USER)

    def pretraining_checkpointed():
        return any(name.endswith(".index") for run in os.listdir(runs)
                   for name in _listing(os.path.join(runs, run, "pretrain")))
    _wait_for(pretraining_checkpointed, first)
    os.killpg(first.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    first_output, _ = first.communicate(timeout=120)
    assert first.returncode != 0
    second = subprocess.run([DEMO, "--quick", f"--runs_dir={runs}"], capture_output=True,
                            text=True, timeout=1800, env=AS_A_USER)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    return runs, first_output, second.stdout + second.stderr


@pytest.fixture(scope="module")
def run_dir(interrupted_then_finished):
    runs, _, _ = interrupted_then_finished
    (name,) = os.listdir(runs)  # continued, not started again
    return os.path.join(runs, name)


def test_interrupted_run_continues_where_it_stopped(interrupted_then_finished, run_dir):
    _, first, second = interrupted_then_finished
    assert "interrupted" in first and "Traceback" not in first
    assert "Continuing a quick run in" in second
    assert "vocabulary: " in second and "done before" in second
    with open(os.path.join(run_dir, "logs", "pretrain.log"), encoding="utf-8") as file:
        log = file.read()
    assert log.count("$ ") == 2  # started twice, the second time from the checkpoint
    # The second start restored the last checkpoint: the one of the checkpoint interval, or the
    # one the interrupted process saved on Ctrl-C, wherever that was.
    restored = re.findall(r"Restored (\S+)/ckpt-(\d+) at step (\d+)", log)
    assert len(restored) == 1, log[-3000:]
    (directory, number, step), = restored
    assert directory == os.path.join(run_dir, "pretrain") and number == step
    assert 0 < int(step) < QUICK.pretrain_steps
    assert f"Restored {directory}/ckpt-{step} at step {step}" in second
    with open(os.path.join(run_dir, "stages", "pretrain.json"), encoding="utf-8") as file:
        assert json.load(file)["size_bytes"] > 0


def _checkpoint(prefix):
    """The checkpoint's training state: every numeric tensor but `save_counter`, which counts
    the saves (the interrupted run saved one more, on Ctrl-C)."""
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name, dtype in
            reader.get_variable_to_dtype_map().items()
            if (dtype.is_floating or dtype.is_integer) and not name.startswith("save_counter")}


def test_the_continued_pretraining_ends_as_an_uninterrupted_one(run_dir, tmp_path):
    """The pretraining stage's binary, run uninterrupted with the run's flagfile into another
    folder, ends with every tensor of its final checkpoint equal to the continued run's."""
    other = tmp_path / "pretrain"
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.cli.pretrain",
         f"--flagfile={os.path.join(run_dir, 'flags', 'pretrain.flags')}", f"--model_dir={other}"],
        capture_output=True, text=True, timeout=1800,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Restored" not in result.stdout
    final = f"ckpt-{QUICK.pretrain_steps}"
    continued, uninterrupted = (_checkpoint(os.path.join(folder, final))
                                for folder in (os.path.join(run_dir, "pretrain"), other))
    assert continued.keys() == uninterrupted.keys() and len(continued) > 50
    for name in continued:
        np.testing.assert_array_equal(continued[name], uninterrupted[name], err_msg=name)


def test_a_continued_run_keeps_its_recorded_settings(tmp_path):
    start_run(str(tmp_path), quick=True)
    path = tmp_path / RUN_FILE
    recorded = json.loads(path.read_text())
    recorded["settings"]["pretrain_steps"] = 7
    path.write_text(json.dumps(recorded))
    quick, settings = read_run(str(tmp_path))
    assert quick and settings == dataclasses.replace(QUICK, pretrain_steps=7)
    pretrain = [stage for stage in plan(str(tmp_path), settings) if stage.name == "pretrain"][0]
    assert "--train_steps=7" in pretrain.flagfile_lines()
    path.write_text(json.dumps({"quick": True, "settings": {"pretrain_steps": 7}}))
    with pytest.raises(StageError, match=f"{path} is not a main-job run record"):
        read_run(str(tmp_path))


def test_a_folder_that_is_not_a_run_is_refused_and_kept(tmp_path):
    """`run_main_job` (what `kerasbert-demo --run_dir` runs) refuses the folder with an
    `OSError`, which the binary prints as its one line (tests/test_binary_errors.py runs
    `kerasbert-demo` on a --run_dir it cannot use), and touches nothing in it."""
    folder = tmp_path / "mine"
    for name in ("data/keep.txt", "export/model.txt", "notes.txt"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(name)
    with pytest.raises(OSError) as raised:
        run_main_job(str(tmp_path / "runs"), quick=True, run_dir=str(folder))
    assert one_line(raised.value).startswith(f"{folder} is not empty and is not a main-job run")
    assert sorted(str(path.relative_to(folder)) for path in folder.rglob("*.txt")) == [
        "data/keep.txt", "export/model.txt", "notes.txt"]
    assert not (folder / RUN_FILE).exists()
    assert not (tmp_path / "runs").exists()


def test_terminal_shows_stages_not_tensorflow_noise(interrupted_then_finished):
    _, first, second = interrupted_then_finished
    for output in (first, second):
        assert not [word for word in SPAM if word in output], output[-2000:]
    assert "[9/9] label raw sentences" in second
    assert "Held-out test accuracy: pretrained" in second
    for name in STAGES:
        assert f"\n{name} " in second  # a row of the final table


def test_summary_json(run_dir):
    with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as file:
        summary = json.load(file)
    assert [stage["name"] for stage in summary["stages"]] == STAGES
    for stage in summary["stages"]:
        assert set(stage) == {"name", "seconds", "metric", "artifact", "size_bytes"}
        assert stage["seconds"] > 0 and stage["size_bytes"] > 0 and stage["metric"]
        assert os.path.exists(os.path.join(run_dir, stage["artifact"]))
    for arm in ("pretrained", "from_scratch"):
        with open(os.path.join(run_dir, f"test_{arm}", "eval_results.json")) as file:
            scored = json.load(file)
        assert summary["finetune"][arm]["test_accuracy"] == scored["accuracy"]
        assert 0.0 < scored["accuracy"] < 1.0


def test_the_test_split_is_what_was_scored(run_dir):
    with open(os.path.join(run_dir, "flags", "test_pretrained.flags"), encoding="utf-8") as file:
        flags = file.read()
    assert "wordnet_gloss-test.tsv.gz" in flags and "--mode=eval" in flags
    with open(os.path.join(run_dir, "flags", "finetune_pretrained.flags")) as file:
        assert "wordnet_gloss-test" not in file.read()


def test_every_stage_has_a_flagfile_its_binary_accepts(run_dir):
    precision, _ = training_precision()  # what the run chose on this CPU
    for name, stage in zip(STAGES, plan(run_dir, QUICK, precision)):
        path = os.path.join(run_dir, "flags", f"{name}.flags")
        with open(path, encoding="utf-8") as file:
            assert file.read().splitlines() == stage.flagfile_lines()


def test_exports_and_labels(run_dir):
    export = os.path.join(run_dir, "export")
    for name in ("saved_model", "model.tflite", "model_dynamic_int8.tflite", "model_text.tflite",
                 "model.onnx", "export_report.json"):
        assert os.path.exists(os.path.join(export, name)), name
    with open(os.path.join(run_dir, "classify", "predictions.jsonl"), encoding="utf-8") as file:
        predictions = [json.loads(line) for line in file]
    with open(os.path.join(run_dir, "sentences.txt"), encoding="utf-8") as file:
        assert [entry["text"] for entry in predictions] == file.read().splitlines()
    report = json.load(open(os.path.join(export, "export_report.json")))
    labels = report["model"]["labels"]
    for entry in predictions:  # the label from the graphs, which agreed on it
        assert entry["runtimes"] == ["tflite", "saved_model"] and entry["label"] in labels
        assert sorted(entry["probabilities"]) == sorted(labels)
        assert entry["label"] == max(entry["probabilities"], key=entry["probabilities"].get)
    # The quantized classifier is judged on the dev split by its task score.
    metric = report["artifacts"]["model_dynamic_int8.tflite"]["task_metric"]
    assert metric["task"] == "wordnet_gloss" and metric["examples"] == EXPORT_EVAL_EXAMPLES
    assert metric["file"].endswith("wordnet_gloss-dev.tsv.gz") and metric["gap_points"] <= 1.0


def test_curves_png(run_dir):
    with open(os.path.join(run_dir, "curves.png"), "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_failing_stage_is_one_named_line(tmp_path):
    """A stage's binary that fails (here on a flag out of bounds, before TensorFlow starts) is a
    `StageError` of one line: the stage, its binary, the binary's own error line, the log."""
    stage = Stage("export", "export", "kerasbert-export",
                  {"model": str(tmp_path / "missing.keras"), "output_dir": str(tmp_path / "out"),
                   "max_seq_length": 2},
                  "out", False, None)
    with pytest.raises(StageError) as raised:
        run_stage(stage, str(tmp_path))
    assert str(raised.value) == (
        "stage export (kerasbert-export) failed: kerasbert-export: error: flag "
        "--max_seq_length=2: 2 is not integer >= 4 "
        f"(full log: {tmp_path / LOGS_DIR / 'export.log'}; rerun to continue)")
    assert not (tmp_path / "stages" / "export.json").exists()


def test_table():
    table = format_table([{"name": "pretrain", "seconds": 61.2, "metric": "MLM accuracy 0.1",
                           "artifact": "pretrain", "size_bytes": 2_500_000}])
    assert "pretrain  61" in table and "2.5 MB" in table and table.splitlines()[-1].startswith(
        "total")
