"""Runs artifacts through `artifact_runner.py` in a fresh Python process per runtime, or in one
kept process per runtime when `KEEP_RUNNERS` is set to 1 in the environment."""

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile

import numpy as np

from kerasbert.export.artifact_runner import DONE, SERVE
from kerasbert.export.errors import ExportError

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "artifact_runner.py")
# Set to 1, every export in this process hands its artifacts to one kept runner process per
# runtime (and setting), started at the first export that needs it: a runner that imports
# TensorFlow pays that import (~7 CPU s) once instead of once per export. It never imports
# kerasbert either, and every request checks that again. For a process that exports many
# models (the test suite sets it); a single export gains nothing.
KEEP_RUNNERS = "KERASBERT_KEEP_ARTIFACT_RUNNERS"

_kept = {}


def run_in_fresh_process(runtime, artifacts, inputs, work_dir, needs_tensorflow_text=False,
                         threads=None, timeout=1800):
    """Run `artifacts` (dicts: `name`, `path`, `calls`, optional `latency`, `custom_ops`) under
    `runtime` on `inputs` (`{"case::input": array}`) in a new process that never imports
    kerasbert (or a kept one, see `KEEP_RUNNERS`); return `(outputs, info)` where outputs are
    keyed `"artifact::signature::case::output"`.

    >>> import tempfile
    >>> run_in_fresh_process("onnx", [], {"c::x": np.zeros(1)}, tempfile.mkdtemp())
    ({}, {'_imported_kerasbert': False})
    """
    stem = os.path.join(os.path.abspath(work_dir), f"runner_{runtime}")
    request = {"runtime": runtime, "artifacts": artifacts, "inputs_file": stem + "_inputs.npz",
               "output_file": stem + "_outputs.npz", "info_file": stem + "_info.json",
               "needs_tensorflow_text": needs_tensorflow_text, "threads": threads}
    np.savez(request["inputs_file"], **inputs)
    with open(stem + "_request.json", "w", encoding="utf-8") as file:
        json.dump(request, file)
    names = ", ".join(artifact["name"] for artifact in artifacts)
    if os.environ.get(KEEP_RUNNERS) == "1":
        # A runner that has loaded TensorFlow Text (or TensorFlow, for TFLite's custom ops) is
        # kept apart from one that has not, as their fresh processes are.
        custom_ops = any(artifact.get("custom_ops") for artifact in artifacts)
        # (A forked child starts its own: the parent's pipes are not its to share.)
        key = (os.getpid(), runtime, needs_tensorflow_text or custom_ops, threads)
        failure = _run_in_kept_process(key, stem + "_request.json", timeout)
    else:
        failure = _run_in_new_process(stem + "_request.json", work_dir, timeout)
    if failure is not None:
        raise ExportError(f"{names}: failed to load or run in a fresh {runtime} process: "
                          f"{failure}")
    with np.load(request["output_file"]) as stored:
        outputs = {key: stored[key] for key in stored.files}
    with open(request["info_file"], encoding="utf-8") as file:
        info = json.load(file)
    for path in (request["inputs_file"], request["output_file"], request["info_file"],
                 stem + "_request.json"):
        os.remove(path)
    return outputs, info


def _environment():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def _last_line(text):
    return (text.strip().splitlines() or ["no output"])[-1]


def _run_in_new_process(request_path, work_dir, timeout):
    """None, or the last line the runner wrote to stderr when it failed."""
    # -I: no PYTHONPATH, no user site, and not the runner's folder (this package) on sys.path.
    completed = subprocess.run([sys.executable, "-I", RUNNER, request_path],
                               capture_output=True, text=True, env=_environment(),
                               cwd=work_dir, timeout=timeout)
    return None if completed.returncode == 0 else _last_line(completed.stderr)


def _run_in_kept_process(key, request_path, timeout):
    """None, or the last line a kept runner wrote to stderr when it died on this request (it
    is not kept then, and the next request starts another)."""
    runner = _kept.get(key)
    if runner is None or runner.process.poll() is not None:
        runner = _kept[key] = _KeptRunner()
    try:
        reply = runner.ask(request_path, timeout)
    except BaseException:  # a timeout or an interrupt: it may be busy, it is not asked to end
        _kept.pop(key).kill()
        raise
    if reply == DONE:
        return None
    _kept.pop(key).stop()
    return runner.last_error_line()


class _KeptRunner:
    """`artifact_runner.py --serve` in a process of its own, its stderr in a temporary file."""

    def __init__(self):
        self.stderr = tempfile.TemporaryFile()
        # -I as for a new process; the cwd is the request's folder, set by the runner.
        self.process = subprocess.Popen(
            [sys.executable, "-I", RUNNER, SERVE], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=_environment(),
            cwd=tempfile.gettempdir())

    def ask(self, request_path, timeout):
        """The runner's reply line to `request_path` ("" if it died first); TimeoutExpired."""
        try:
            self.process.stdin.write(request_path + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return ""
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired(self.process.args, timeout)
        return self.process.stdout.readline().strip()

    def last_error_line(self):
        """The last line of its stderr (once it has ended)."""
        self.stderr.seek(0)
        return _last_line(self.stderr.read().decode("utf-8", "replace"))

    def stop(self):
        """Close its stdin, which ends it; killed if it has not ended within 10 s."""
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        self.process.kill()
        self.process.wait()


@atexit.register
def _stop_kept_runners():
    for key in [key for key in _kept if key[0] == os.getpid()]:
        _kept.pop(key).stop()
