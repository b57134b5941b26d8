"""Runs artifacts through `artifact_runner.py` in a fresh Python process per runtime."""

import json
import os
import subprocess
import sys

import numpy as np

from kerasbert.export.errors import ExportError

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "artifact_runner.py")


def run_in_fresh_process(runtime, artifacts, inputs, work_dir, needs_tensorflow_text=False,
                         threads=None, timeout=1800):
    """Run `artifacts` (dicts: `name`, `path`, `calls`, optional `latency`, `custom_ops`) under
    `runtime` on `inputs` (`{"case::input": array}`) in a new process that never imports
    kerasbert; return `(outputs, info)` where outputs are keyed
    `"artifact::signature::case::output"`.

    >>> import tempfile
    >>> run_in_fresh_process("onnx", [], {"c::x": np.zeros(1)}, tempfile.mkdtemp())
    ({}, {'_imported_kerasbert': False})
    """
    stem = os.path.join(work_dir, f"runner_{runtime}")
    request = {"runtime": runtime, "artifacts": artifacts, "inputs_file": stem + "_inputs.npz",
               "output_file": stem + "_outputs.npz", "info_file": stem + "_info.json",
               "needs_tensorflow_text": needs_tensorflow_text, "threads": threads}
    np.savez(request["inputs_file"], **inputs)
    with open(stem + "_request.json", "w", encoding="utf-8") as file:
        json.dump(request, file)
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    # -I: no PYTHONPATH, no user site, and not the runner's folder (this package) on sys.path.
    completed = subprocess.run([sys.executable, "-I", RUNNER, stem + "_request.json"],
                               capture_output=True, text=True, env=environment,
                               cwd=work_dir, timeout=timeout)
    names = ", ".join(artifact["name"] for artifact in artifacts)
    if completed.returncode != 0:
        last_line = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        raise ExportError(f"{names}: failed to load or run in a fresh {runtime} process: "
                          f"{last_line}")
    with np.load(request["output_file"]) as stored:
        outputs = {key: stored[key] for key in stored.files}
    with open(request["info_file"], encoding="utf-8") as file:
        info = json.load(file)
    for path in (request["inputs_file"], request["output_file"], request["info_file"],
                 stem + "_request.json"):
        os.remove(path)
    return outputs, info
