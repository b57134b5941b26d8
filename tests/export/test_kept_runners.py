"""Kept artifact runners (`kerasbert.export.runtimes.KEEP_RUNNERS`, which tests/conftest.py sets
for the suite): one runner process per runtime serves request after request, never imports
kerasbert, answers as a fresh process does, and one that dies or hangs on a request is named,
stopped and replaced. (The main job, tests/test_demo.py, runs with fresh processes, as a user's
export does.)"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.export import runtimes
from kerasbert.export.errors import ExportError


@pytest.fixture
def own_runners(monkeypatch):
    """Kept runners of this test's own, stopped at its end."""
    monkeypatch.setattr(runtimes, "_kept", {})
    yield runtimes._kept
    while runtimes._kept:
        runtimes._kept.popitem()[1].stop()


def _tflite_file(path):
    """A TFLite file (no kerasbert): `y = 2 * x + 1` on float32 [None, 3]."""
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def affine(x):
        return {"y": 2.0 * x + 1.0}
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [affine.get_concrete_function()], tf.Module())
    path.write_bytes(converter.convert())
    return str(path)


def _run(path, work_dir, value):
    artifact = {"name": "affine", "path": path,
                "calls": [{"signature": "serving_default", "case": "c", "inputs": ["x"]}]}
    return runtimes.run_in_fresh_process("tflite", [artifact], {"c::x": value}, str(work_dir))


def test_one_kept_process_answers_every_request_as_a_fresh_one(tmp_path, monkeypatch,
                                                                own_runners):
    path = _tflite_file(tmp_path / "affine.tflite")
    values = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 3), np.float32)]
    monkeypatch.delenv(runtimes.KEEP_RUNNERS, raising=False)
    fresh = [_run(path, tmp_path, value) for value in values]
    assert not own_runners
    monkeypatch.setenv(runtimes.KEEP_RUNNERS, "1")
    kept, processes = [], []
    for value in values:
        kept.append(_run(path, tmp_path, value))
        processes.append(own_runners[(os.getpid(), "tflite", False, None)].process)
    assert processes[0] is processes[1] and processes[0].poll() is None
    for (fresh_outputs, fresh_info), (kept_outputs, kept_info), value in zip(fresh, kept, values):
        np.testing.assert_array_equal(kept_outputs["affine::serving_default::c::y"], 2 * value + 1)
        assert kept_outputs.keys() == fresh_outputs.keys()
        assert kept_info == fresh_info and kept_info["_imported_kerasbert"] is False
    assert sorted(os.listdir(tmp_path)) == ["affine.tflite"]  # request files removed


def _runner_script(tmp_path, body):
    script = tmp_path / "runner.py"
    script.write_text(f"import sys, time\nsys.stdin.readline()\n{body}\n")
    return str(script)


def test_a_kept_runner_that_dies_is_named_and_the_next_request_gets_a_new_one(
        tmp_path, monkeypatch, own_runners):
    monkeypatch.setenv(runtimes.KEEP_RUNNERS, "1")
    real_runner = runtimes.RUNNER
    monkeypatch.setattr(runtimes, "RUNNER", _runner_script(
        tmp_path, "print('the runner broke here', file=sys.stderr)\nsys.exit(3)"))
    with pytest.raises(ExportError, match=r"^affine: failed to load or run in a fresh tflite "
                                          r"process: the runner broke here$"):
        _run("unused.tflite", tmp_path, np.zeros((1, 3), np.float32))
    assert not own_runners  # not kept: the next request starts another
    monkeypatch.setattr(runtimes, "RUNNER", real_runner)
    outputs, _ = _run(_tflite_file(tmp_path / "affine.tflite"), tmp_path,
                      np.zeros((1, 3), np.float32))
    np.testing.assert_array_equal(outputs["affine::serving_default::c::y"], [[1, 1, 1]])


def test_a_kept_runner_past_its_timeout_is_stopped(tmp_path, monkeypatch, own_runners):
    monkeypatch.setenv(runtimes.KEEP_RUNNERS, "1")
    monkeypatch.setattr(runtimes, "RUNNER", _runner_script(tmp_path, "time.sleep(600)"))
    artifact = {"name": "affine", "path": "unused.tflite", "calls": []}
    with pytest.raises(subprocess.TimeoutExpired):
        runtimes.run_in_fresh_process("tflite", [artifact], {"c::x": np.zeros(1)},
                                      str(tmp_path), timeout=1)
    assert not own_runners


def test_the_runner_serves_without_kerasbert_on_its_path(tmp_path):
    """`--serve` started as the exporter starts it (-I: not even the package's folder on
    sys.path): the reply line, and the request's files written."""
    path = _tflite_file(tmp_path / "affine.tflite")
    request = tmp_path / "request.json"
    np.savez(tmp_path / "inputs.npz", **{"c::x": np.ones((1, 3), np.float32)})
    request.write_text(
        '{"runtime": "tflite", "inputs_file": "inputs.npz", "output_file": "outputs.npz", '
        '"info_file": "info.json", "threads": null, "artifacts": [{"name": "affine", "path": '
        f'"{path}", "calls": [{{"signature": "serving_default", "case": "c", "inputs": ["x"]}}]}}]}}')
    served = subprocess.run([sys.executable, "-I", runtimes.RUNNER, runtimes.SERVE],
                            input=f"{request}\n", capture_output=True, text=True, timeout=120)
    assert served.returncode == 0, served.stderr
    assert served.stdout == runtimes.DONE + "\n"
    with np.load(tmp_path / "outputs.npz") as outputs:
        np.testing.assert_array_equal(outputs["affine::serving_default::c::y"], [[3, 3, 3]])
