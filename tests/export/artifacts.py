"""Run exported artifacts with their own runtimes, in this process: a SavedModel through
`tf.saved_model.load`, TFLite files through ai-edge-litert's interpreter, ONNX files through ONNX
Runtime, on a test's own inputs (to compare them with `transformers`, say).

That every artifact loads and runs in a fresh process that imports only its runtime, never
kerasbert, is the exporter's own check: `kerasbert.export.export` runs each one that way before
it writes anything, and its report says so (`verified`; an export whose runner imported
kerasbert fails). These helpers do not start such a process again.
"""

import os

import numpy as np


def run_artifacts(directory, inputs, tflite_files=("model.tflite",),
                  saved_model_dir="saved_model"):
    """`{artifact: {"outputs": {...}, "inputs": {name: shape}}}` for the SavedModel, the TFLite
    files (also `"ops"`: their operator names) and the ONNX file under `directory`, all run on
    `inputs` (int32 arrays by name); outputs as float32 arrays."""
    import onnxruntime
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    directory = str(directory)
    result = {}
    serve = tf.saved_model.load(os.path.join(directory, saved_model_dir)).signatures[
        "serving_default"]
    result["saved_model"] = {
        "outputs": {name: value.numpy() for name, value in serve(
            **{name: tf.constant(value) for name, value in inputs.items()}).items()},
        "inputs": {name: spec.shape.as_list()
                   for name, spec in serve.structured_input_signature[1].items()}}
    for name in tflite_files:
        interpreter = Interpreter(model_path=os.path.join(directory, name))
        runner = interpreter.get_signature_runner("serving_default")
        result[name] = {
            "outputs": dict(runner(**inputs)),
            "inputs": {key: details["shape_signature"].tolist()
                       for key, details in runner.get_input_details().items()},
            "ops": sorted({op["op_name"] for op in interpreter._get_ops_details()})}
    session = onnxruntime.InferenceSession(os.path.join(directory, "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    result["model.onnx"] = {
        "outputs": dict(zip(names, session.run(names, inputs))),
        "inputs": {value.name: list(value.shape) for value in session.get_inputs()}}
    for artifact in result.values():
        artifact["outputs"] = {name: np.asarray(value, np.float32)
                               for name, value in artifact["outputs"].items()}
    return result


def run_text_signatures(directory, texts, pairs, examples, text_tflite_texts=None):
    """Outputs of the SavedModel's `serve_text(texts)`, `serve_text_pair(*pairs)` and
    `serve_examples(examples)` and, with `text_tflite_texts`, of `model_text.tflite`'s
    `serve_text`. Under `"serve_text alone"` (and `"model_text.tflite alone"`), one output dict
    per text, each text run in a batch of its own. Numbers as float32 arrays, strings (a
    classifier's labels) as arrays of `str`."""
    import tensorflow as tf
    import tensorflow_text

    loaded = tf.saved_model.load(os.path.join(str(directory), "saved_model"))
    calls = {"serve_text": {"text": tf.constant(texts)},
             "serve_text_pair": {"text_a": tf.constant(pairs[0]),
                                 "text_b": tf.constant(pairs[1])},
             "serve_examples": {"examples": tf.constant(list(examples))}}
    result = {signature: _arrays(loaded.signatures[signature](**feeds))
              for signature, feeds in calls.items()}
    result["serve_text alone"] = [
        _arrays(loaded.signatures["serve_text"](text=tf.constant([text]))) for text in texts]
    if text_tflite_texts is not None:
        from ai_edge_litert.interpreter import InterpreterWithCustomOps
        interpreter = InterpreterWithCustomOps(
            model_path=os.path.join(str(directory), "model_text.tflite"),
            custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
        runner = interpreter.get_signature_runner("serve_text")
        encoded = [text.encode("utf-8") for text in text_tflite_texts]
        result["model_text.tflite"] = _arrays(runner(text=np.array(encoded, dtype=object)))
        result["model_text.tflite alone"] = [
            _arrays(runner(text=np.array([text], object))) for text in encoded]
    return result


def run_signature(directory, signature, inputs):
    """The outputs of the SavedModel's `signature` on `inputs` (`{name: nested lists of str}`):
    numpy arrays by name, strings as `str`."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    loaded = tf.saved_model.load(os.path.join(str(directory), "saved_model"))
    outputs = loaded.signatures[signature](
        **{name: tf.constant(value) for name, value in inputs.items()})
    return {name: _array(value, numbers=None) for name, value in outputs.items()}


def _arrays(outputs):
    return {name: _array(value) for name, value in outputs.items()}


def _array(value, numbers=np.float32):
    """An output as a numpy array: tf.string outputs decoded from UTF-8 into `str` objects,
    numbers as `numbers` (None: their own dtype)."""
    value = np.asarray(value)
    if value.dtype.kind in "OS":
        return np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(value)
    return value.astype(numbers) if numbers is not None else value
