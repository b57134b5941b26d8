"""Run exported artifacts in a new Python process that imports only their runtimes.

`run_artifacts(directory, inputs)` starts this file by path with `python -I` (no repository
folder on `sys.path`) and returns, per artifact, its outputs on `inputs` and what its runtime
reports of its inputs; the process fails if anything imported `kerasbert`.
"""

import json
import os
import subprocess
import sys

import numpy as np


def run_artifacts(directory, inputs, tflite_files=("model.tflite",), work_dir=None,
                  saved_model_dir="saved_model"):
    """`{artifact: {"outputs": {...}, "inputs": {name: shape}}}` for the SavedModel, the TFLite
    files and the ONNX file under `directory`, all run on `inputs` (int32 arrays by name)."""
    work_dir = work_dir or directory
    inputs_file = os.path.join(work_dir, "fresh_inputs.npz")
    result_file = os.path.join(work_dir, "fresh_result.json")
    np.savez(inputs_file, **inputs)
    completed = subprocess.run(
        [sys.executable, "-I", os.path.abspath(__file__), directory, inputs_file, result_file,
         saved_model_dir, *tflite_files],
        capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    with open(result_file, encoding="utf-8") as file:
        result = json.load(file)
    for artifact in result.values():
        artifact["outputs"] = {name: np.asarray(value, np.float32)
                               for name, value in artifact["outputs"].items()}
    return result


def run_text_signatures(directory, texts, pairs, examples, work_dir, text_tflite_texts=None):
    """Outputs of the SavedModel's `serve_text(texts)`, `serve_text_pair(*pairs)` and
    `serve_examples(examples)` and, with `text_tflite_texts`, of `model_text.tflite`'s
    `serve_text`, from a process that imports only tensorflow and tensorflow_text. Under
    `"serve_text alone"` (and `"model_text.tflite alone"`), one output dict per text, each
    text run in a batch of its own."""
    request = os.path.join(work_dir, "fresh_text_request.json")
    result_file = os.path.join(work_dir, "fresh_text_result.json")
    with open(request, "w", encoding="utf-8") as file:
        json.dump({"texts": texts, "pairs": pairs, "examples": [e.hex() for e in examples],
                   "text_tflite_texts": text_tflite_texts}, file)
    completed = subprocess.run(
        [sys.executable, "-I", os.path.abspath(__file__), "--text", directory, request,
         result_file], capture_output=True, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    with open(result_file, encoding="utf-8") as file:
        result = json.load(file)
    def arrays(outputs):  # strings (a classifier's labels) stay strings
        return {name: np.asarray(value, object if _is_text(value) else np.float32)
                for name, value in outputs.items()}

    return {signature: [arrays(row) for row in outputs] if isinstance(outputs, list)
            else arrays(outputs) for signature, outputs in result.items()}


def run_signature(directory, signature, inputs, work_dir):
    """The outputs of the SavedModel's `signature` on `inputs` (`{name: nested lists of str}`),
    from a process that imports only tensorflow and tensorflow_text: numpy arrays by name,
    strings as `str`."""
    request = os.path.join(work_dir, "fresh_signature_request.json")
    result_file = os.path.join(work_dir, "fresh_signature_result.json")
    with open(request, "w", encoding="utf-8") as file:
        json.dump({"signature": signature, "inputs": inputs}, file)
    completed = subprocess.run(
        [sys.executable, "-I", os.path.abspath(__file__), "--signature", directory, request,
         result_file], capture_output=True, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    with open(result_file, encoding="utf-8") as file:
        result = json.load(file)
    return {name: np.asarray(value, object if _is_text(value) else None)
            for name, value in result.items()}


def _main_signature(directory, request_file, result_file):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    with open(request_file, encoding="utf-8") as file:
        request = json.load(file)
    loaded = tf.saved_model.load(os.path.join(directory, "saved_model"))
    outputs = loaded.signatures[request["signature"]](
        **{name: tf.constant(value) for name, value in request["inputs"].items()})
    if any(module.split(".")[0] == "kerasbert" for module in sys.modules):
        raise SystemExit("kerasbert was imported")
    with open(result_file, "w", encoding="utf-8") as file:
        json.dump({name: _listed(value) for name, value in outputs.items()}, file)


def _is_text(value):
    while isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, str)


def _listed(value):
    """An output as JSON-ready lists, strings (tf.string outputs) decoded from UTF-8."""
    value = np.asarray(value)
    if value.dtype.kind in "OS":
        return np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(value).tolist()
    return value.tolist()


def _main_text(directory, request_file, result_file):
    import tensorflow as tf
    import tensorflow_text

    with open(request_file, encoding="utf-8") as file:
        request = json.load(file)
    loaded = tf.saved_model.load(os.path.join(directory, "saved_model"))
    calls = {"serve_text": {"text": tf.constant(request["texts"])},
             "serve_text_pair": {"text_a": tf.constant(request["pairs"][0]),
                                 "text_b": tf.constant(request["pairs"][1])},
             "serve_examples": {"examples": tf.constant(
                 [bytes.fromhex(example) for example in request["examples"]])}}
    result = {signature: {k: _listed(v) for k, v in
                          loaded.signatures[signature](**feeds).items()}
              for signature, feeds in calls.items()}
    result["serve_text alone"] = [
        {k: _listed(v) for k, v in loaded.signatures["serve_text"](
            text=tf.constant([text])).items()} for text in request["texts"]]
    if request["text_tflite_texts"] is not None:
        from ai_edge_litert.interpreter import InterpreterWithCustomOps
        interpreter = InterpreterWithCustomOps(
            model_path=os.path.join(directory, "model_text.tflite"),
            custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
        runner = interpreter.get_signature_runner("serve_text")
        texts = [t.encode("utf-8") for t in request["text_tflite_texts"]]
        outputs = runner(text=np.array(texts, dtype=object))
        result["model_text.tflite"] = {k: _listed(v) for k, v in outputs.items()}
        result["model_text.tflite alone"] = [
            {k: _listed(v) for k, v in runner(text=np.array([text], object)).items()}
            for text in texts]
    if any(module.split(".")[0] == "kerasbert" for module in sys.modules):
        raise SystemExit("kerasbert was imported")
    with open(result_file, "w", encoding="utf-8") as file:
        json.dump(result, file)


def _main(directory, inputs_file, result_file, saved_model_dir, *tflite_files):
    feeds = dict(np.load(inputs_file))
    result = {}

    import tensorflow as tf
    loaded = tf.saved_model.load(os.path.join(directory, saved_model_dir))
    serve = loaded.signatures["serving_default"]
    result["saved_model"] = {
        "outputs": {k: v.numpy().tolist() for k, v in serve(
            **{name: tf.constant(value) for name, value in feeds.items()}).items()},
        "inputs": {k: spec.shape.as_list() for k, spec in
                   serve.structured_input_signature[1].items()}}

    from ai_edge_litert.interpreter import Interpreter
    for name in tflite_files:
        interpreter = Interpreter(model_path=os.path.join(directory, name))
        runner = interpreter.get_signature_runner("serving_default")
        result[name] = {
            "outputs": {k: np.asarray(v).tolist() for k, v in runner(**feeds).items()},
            "inputs": {k: d["shape_signature"].tolist()
                       for k, d in runner.get_input_details().items()},
            "ops": sorted({op["op_name"] for op in interpreter._get_ops_details()})}

    import onnxruntime
    session = onnxruntime.InferenceSession(os.path.join(directory, "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    result["model.onnx"] = {
        "outputs": {k: v.tolist() for k, v in zip(names, session.run(names, feeds))},
        "inputs": {value.name: list(value.shape) for value in session.get_inputs()}}

    if any(module.split(".")[0] == "kerasbert" for module in sys.modules):
        raise SystemExit("kerasbert was imported")
    with open(result_file, "w", encoding="utf-8") as file:
        json.dump(result, file)


if __name__ == "__main__":
    if sys.argv[1] == "--text":
        _main_text(*sys.argv[2:])
    elif sys.argv[1] == "--signature":
        _main_signature(*sys.argv[2:])
    else:
        _main(*sys.argv[1:])
