"""Runs exported artifacts in a fresh process that imports only their own runtime.

The exporter starts this file by path (`python artifact_runner.py REQUEST.json`), never as
`kerasbert.export.artifact_runner`, so `kerasbert` is not imported: an artifact that only
works next to the library fails here. The request names the runtime (`saved_model`,
`tflite`, `text_tflite`, `onnx`), the artifacts, the calls (signature, case and input
names) and the `.npz` of inputs; the outputs go to an `.npz` and what the runtime sees of
each artifact (signatures, names, dtypes, shapes, latency) to a JSON file; an artifact that
fails to load or run gets its error there instead, and the others still run.
`artifact_runner.py --serve` runs one request after another, a path per line of stdin, in a
process that is kept (`kerasbert.export.runtimes.KEEP_RUNNERS`) and still never imports
kerasbert.
"""

import json
import os
import statistics
import sys
import time

import numpy as np

LATENCY_RUNS = 5
SERVE, DONE = "--serve", "artifact_runner: done"


def read_request(path):
    """The request JSON at `path` as a dict."""
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def _as_feed(value):
    if value.dtype.kind == "U":
        return np.char.encode(value, "utf-8").astype(object)
    if value.dtype.kind == "S":
        return value.astype(object)
    return value


def saved_model_runner(request, artifact):
    import tensorflow as tf
    if request.get("needs_tensorflow_text"):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
    loaded = tf.saved_model.load(artifact["path"])
    info = {}
    for name, function in loaded.signatures.items():
        inputs = function.structured_input_signature[1]
        info[name] = {
            "inputs": {key: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
                       for key, spec in inputs.items()},
            "outputs": {key: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
                        for key, spec in function.structured_outputs.items()}}

    def run(signature, feeds):
        function = loaded.signatures[signature]
        outputs = function(**{key: tf.constant(value) for key, value in feeds.items()})
        return {key: value.numpy() for key, value in outputs.items()}
    return run, info


def tflite_runner(request, artifact):
    if artifact.get("custom_ops") == "tensorflow_text":
        import tensorflow_text
        from tensorflow.lite.python.interpreter import InterpreterWithCustomOps
        interpreter = InterpreterWithCustomOps(
            model_path=artifact["path"],
            custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
    else:
        from ai_edge_litert.interpreter import Interpreter
        interpreter = Interpreter(model_path=artifact["path"], num_threads=request.get("threads"))
    info = {}
    for name in interpreter.get_signature_list():
        runner = interpreter.get_signature_runner(name)
        info[name] = {
            "inputs": {key: {"dtype": np.dtype(detail["dtype"]).name,
                             "shape": detail["shape_signature"].tolist()}
                       for key, detail in runner.get_input_details().items()},
            "outputs": {key: {"dtype": np.dtype(detail["dtype"]).name,
                              "shape": detail["shape_signature"].tolist()}
                        for key, detail in runner.get_output_details().items()}}

    def run(signature, feeds):
        runner = interpreter.get_signature_runner(signature)
        return {key: np.array(value) for key, value in runner(**feeds).items()}
    return run, info


def onnx_runner(request, artifact):
    import onnxruntime
    options = onnxruntime.SessionOptions()
    if request.get("threads"):
        options.intra_op_num_threads = request["threads"]
    session = onnxruntime.InferenceSession(artifact["path"], options,
                                           providers=["CPUExecutionProvider"])
    def describe(values):
        return {value.name: {"dtype": value.type, "shape": list(value.shape)} for value in values}
    info = {"serving_default": {"inputs": describe(session.get_inputs()),
                                "outputs": describe(session.get_outputs())}}
    names = [value.name for value in session.get_outputs()]

    def run(signature, feeds):
        return dict(zip(names, session.run(names, feeds)))
    return run, info


_RUNNERS = {"saved_model": saved_model_runner, "tflite": tflite_runner, "onnx": onnx_runner}


def _run_artifact(request, artifact, inputs, outputs):
    """Run every call of one artifact into `outputs`; return what the runtime says of it."""
    run, info = _RUNNERS[request["runtime"]](request, artifact)
    entry = {"signatures": info}
    for call in artifact["calls"]:
        feeds = {name: _as_feed(inputs[f"{call['case']}::{name}"]) for name in call["inputs"]}
        for key, value in run(call["signature"], feeds).items():
            if value.dtype == object:  # strings (a classifier's labels): bytes, no pickle
                value = value.astype("S")
            outputs[f"{artifact['name']}::{call['signature']}::{call['case']}::{key}"] = value
    latency = artifact.get("latency")
    if latency:
        feeds = {name: _as_feed(inputs[f"{latency['case']}::{name}"])
                 for name in latency["inputs"]}
        run(latency["signature"], feeds)
        times = []
        for _ in range(LATENCY_RUNS):
            start = time.perf_counter()
            run(latency["signature"], feeds)
            times.append(time.perf_counter() - start)
        entry["latency_ms"] = 1000 * statistics.median(times)
    return entry


def main(request_path):
    request = read_request(request_path)
    outputs, report = {}, {}
    with np.load(request["inputs_file"]) as inputs:
        for artifact in request["artifacts"]:
            try:
                report[artifact["name"]] = _run_artifact(request, artifact, inputs, outputs)
            except Exception as error:  # the artifact's own failure: named, the others run
                message = (str(error).strip().splitlines() or [""])[0]
                report[artifact["name"]] = {"error": f"{type(error).__name__}: {message}"}
    report["_imported_kerasbert"] = any(name.split(".")[0] == "kerasbert" for name in sys.modules)
    np.savez(request["output_file"], **outputs)
    with open(request["info_file"], "w", encoding="utf-8") as file:
        json.dump(report, file)


def serve():
    """Run request after request: each line of stdin is a request's path, run from the
    request's folder as a fresh process is; `DONE` goes to the original stdout once its files
    are written (anything else printed goes to stderr). Ends with stdin (its parent's exit)."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        path = os.path.abspath(line.strip())
        os.chdir(os.path.dirname(path))
        main(path)
        print(DONE, file=replies, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == SERVE:
        serve()
    else:
        main(sys.argv[1])
