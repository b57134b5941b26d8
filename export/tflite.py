"""TensorFlow Lite flatbuffers of a serving function: conversion, op inventory, running them.

`convert_to_tflite(serve, model, quantization)` turns the serving function of
`kerasbert.export.signatures` into a flatbuffer of TFLite builtin ops only (no
Flex / SELECT_TF_OPS, no custom ops) with one signature, `serving_default`,
whose inputs and outputs keep the model's names and whose batch and sequence
axes stay resizable. The quantizations (`QUANTIZATIONS`):

- `none`: float32.
- `float16`: float16 weights, dequantized to float32 at load time.
- `dynamic_int8`: dynamic-range quantization: int8 weights (per output channel)
  for the dense layers and embeddings, float32 activations; the kernels
  quantize activations on the fly.
- `int8`: full-integer post-training quantization of the transformer blocks'
  dense layers, calibrated on representative inputs: int8 weights (per output
  channel) and int8 activations (per tensor) in those layers and their GELU;
  the rest (embeddings, LayerNorms, residual sums, attention scores and
  probabilities, the heads) stays float32; see `_float_nodes`.

Two things the converter gets wrong silently, and which this module therefore
handles or checks:

1. Keras 3 variables are not TensorFlow trackables the converter can freeze:
   handing it the Keras model as `trackable_obj` gives a flatbuffer of
   `VAR_HANDLE` / `READ_VARIABLE` ops without the weights (its outputs are all
   zeros, and there is nothing to quantize). The converter is therefore given a
   `tf.Module` that tracks the underlying `tf.Variable`s, which it freezes into
   constants (dense layers then become `FULLY_CONNECTED`).
2. If saving the function as a SavedModel fails, the converter falls back to a
   path that drops the signature; `convert_to_tflite` checks the signature and
   its names and raises instead of returning such a flatbuffer.
"""

import collections
import os
import warnings

import numpy as np
import tensorflow as tf
from tensorflow.lite.python import convert as _tflite_convert
from tensorflow.lite.python import schema_py_generated as _schema

from kerasbert import file_system
from kerasbert.choices import QUANTIZATIONS

TFLITE_FILE_NAMES = {"none": "model.tflite", "float16": "model_float16.tflite",
                     "dynamic_int8": "model_dynamic_int8.tflite", "int8": "model_int8.tflite"}
SIGNATURE_KEY = "serving_default"

_BUILTIN_NAMES = {code: name for name, code in vars(_schema.BuiltinOperator).items()
                  if not name.startswith("_")}
# What full-integer quantization makes int8 (see `_float_nodes`): these ops, when they belong to
# a transformer block (their tensors are named after the block's layer).
_INT8_OPS = frozenset({"FULLY_CONNECTED", "GELU", "RESHAPE", "TRANSPOSE"})
_BLOCK_SCOPE = "transformer_layer_"


def convert_to_tflite(serve, model, quantization="none", representative_inputs=None):
    """The TFLite flatbuffer (bytes) of the serving function `serve` of `model`.

    `serve` is `kerasbert.export.signatures.serving_function(model)`; `model`
    is needed for its variables. `quantization` is one of `QUANTIZATIONS`;
    `int8` needs `representative_inputs`, a list of input dicts (int32 numpy
    arrays, real packed text) to calibrate the activation ranges on.

    >>> import numpy as np, kerasbert
    >>> from kerasbert.export.signatures import serving_function
    >>> config = kerasbert.EncoderConfig(family="bert", vocab_size=50, hidden_size=16,
    ...                                  num_layers=1, num_heads=2, intermediate_size=32,
    ...                                  max_positions=16)
    >>> model = kerasbert.models.build_task_model(
    ...     kerasbert.models.build_encoder(config), "sequence_classification", num_labels=3)
    >>> flatbuffer = convert_to_tflite(serving_function(model), model, "dynamic_int8")
    >>> ids = np.array([[2, 7, 9, 3, 0]], "int32")
    >>> inputs = {"token_ids": ids, "segment_ids": 0 * ids,
    ...           "padding_mask": (ids > 0).astype("int32")}
    >>> logits = run_tflite(flatbuffer, inputs)["logits"]
    >>> logits.shape, bool(np.allclose(logits, model(inputs)["logits"], atol=1e-2))
    ((1, 3), True)
    >>> convert_to_tflite(serving_function(model), model, "int8")
    Traceback (most recent call last):
    ...
    ValueError: int8 quantization calibrates activation ranges: pass representative_inputs ...
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; "
                         f"got {quantization!r}")
    if quantization == "int8" and not representative_inputs:
        raise ValueError("int8 quantization calibrates activation ranges: pass "
                         "representative_inputs (a non-empty list of input dicts)")
    converter = _converter(serve, model)
    if quantization == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif quantization == "dynamic_int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "int8":
        flatbuffer = _full_integer(converter, representative_inputs)
    else:
        flatbuffer = converter.convert()
    _check_signature(flatbuffer, serve)
    return flatbuffer


def _converter(serve, model):
    """A builtin-ops-only converter of `serve`, whose captured variables it can freeze."""
    variables = tf.Module()
    # The tf.Variables behind the Keras variables: see the module docstring (1).
    variables.model_variables = [variable.value for variable in model.variables]
    variables.serve = serve
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [serve.get_concrete_function()], variables)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter


def _full_integer(converter, representative_inputs):
    """Calibrate, then quantize the transformer blocks' dense layers to int8.

    These are the two steps `converter.convert()` runs for full-integer
    quantization, split (as `tf.lite.experimental.QuantizationDebugger` does)
    so that the quantizer can be told which nodes to keep float.
    """
    calibrated = _calibrated(converter, representative_inputs)
    return _tflite_convert.mlir_quantize(calibrated,
                                         denylisted_nodes=sorted(_float_nodes(calibrated)))


def _calibrated(converter, representative_inputs):
    """The first step of full-integer quantization: the float model with the value ranges
    `representative_inputs` (dicts of int32 arrays) give every tensor, not yet quantized."""
    samples = [{name: np.asarray(value, np.int32) for name, value in sample.items()}
               for sample in representative_inputs]
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: iter(samples)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
                                           tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.experimental_mlir_quantizer = True
    converter._experimental_calibrate_only = True  # pylint: disable=protected-access
    with warnings.catch_warnings():  # calibration runs tf.lite.Interpreter, which warns
        warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
        return converter.convert()


def _float_nodes(calibrated):
    """Names (output tensors) of the nodes that full-integer quantization keeps float32.

    int8 goes where the multiply-adds are: the dense (FULLY_CONNECTED) layers
    of the transformer blocks, their GELU and the reshapes between them,
    weights per output channel and activations per tensor. Everything else
    stays float32:

    - the attention scores: BERT adds a -1e9 bias at padding keys before the
      softmax, and one int8 scale over [-1e9, max score] maps every real
      score to the same value (attention turns uniform); the softmax and the
      probability-value matmul stay float with them (a small share of the
      work; quantizing that matmul measured no better or worse);
    - LayerNorm statistics and the residual sums: every block adds its output
      to the residual stream, so their rounding accumulates through the model;
    - the embeddings, tables included (full int8 would quantize a table per
      tensor), and the heads (pooler, classifiers, MLM and NSP heads): their
      outputs are what is compared.

    Quantizing the residual sums and LayerNorms, the embeddings or the heads
    each lost masked-token and next-sentence predictions of the tests'
    pretrained tiny BERT that keeping them float keeps (docs/export.md, "Full
    int8: what stays float", has the measurement and its command). The cost
    is file size: the embedding tables stay float32.
    """
    model = _schema.Model.GetRootAsModel(calibrated, 0)
    names = set()
    for index in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(index)
        for position in range(subgraph.OperatorsLength()):
            operator = subgraph.Operators(position)
            outputs = [subgraph.Tensors(tensor).Name().decode()
                       for tensor in _tensors(operator, "Outputs")]
            in_block = all(_BLOCK_SCOPE in name for name in outputs)
            if not (in_block and _operator_name(model, operator)[0] in _INT8_OPS):
                names.update(outputs)
    return names


def _tensors(operator, which):
    """An operator's input or output (`which`) tensor indices, without absent (-1) ones."""
    length = getattr(operator, which + "Length")()
    return [index for index in (getattr(operator, which)(i) for i in range(length))
            if index >= 0]


def _check_signature(flatbuffer, serve):
    """Raise unless the flatbuffer has `serving_default` with `serve`'s input and output names."""
    model = _schema.Model.GetRootAsModel(flatbuffer, 0)
    signatures = {}
    for index in range(model.SignatureDefsLength()):
        signature = model.SignatureDefs(index)
        signatures[signature.SignatureKey().decode()] = (
            sorted(signature.Inputs(i).Name().decode() for i in range(signature.InputsLength())),
            sorted(signature.Outputs(i).Name().decode() for i in range(signature.OutputsLength())))
    concrete = serve.get_concrete_function()
    expected = (sorted(spec.name for spec in tf.nest.flatten(concrete.structured_input_signature)),
                sorted(concrete.structured_outputs))
    if signatures.get(SIGNATURE_KEY) != expected:
        raise RuntimeError(f"the TFLite converter produced signatures {signatures}, expected "
                           f"{SIGNATURE_KEY!r} with inputs {expected[0]} and outputs {expected[1]}")


def _operator_name(model, operator):
    """(name, is_builtin) of one operator: the builtin's name, or a custom op's code."""
    code = model.OperatorCodes(operator.OpcodeIndex())
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == _schema.BuiltinOperator.CUSTOM:
        return code.CustomCode().decode(), False
    return _BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}"), True


def _operators(tflite_bytes):
    """(name, is_builtin) of every operator in every subgraph of a flatbuffer."""
    model = _schema.Model.GetRootAsModel(bytes(tflite_bytes), 0)
    for subgraph_index in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(subgraph_index)
        for index in range(subgraph.OperatorsLength()):
            yield _operator_name(model, subgraph.Operators(index))


def op_inventory(tflite_bytes):
    """`{op name: count}` over all subgraphs of a TFLite flatbuffer.

    Builtin ops go by their schema names (`FULLY_CONNECTED`), custom ops by
    their custom code, which for Flex ops is `Flex` + the TensorFlow op
    (`FlexStridedSlice`).

    >>> import tensorflow as tf
    >>> double = tf.function(lambda x: {"y": 2.0 * x + 1.0},
    ...                      input_signature=[tf.TensorSpec([None], tf.float32)])
    >>> flatbuffer = tf.lite.TFLiteConverter.from_concrete_functions(
    ...     [double.get_concrete_function()], double).convert()
    >>> op_inventory(flatbuffer)
    {'MUL': 1, 'ADD': 1}
    """
    return dict(collections.Counter(name for name, _ in _operators(tflite_bytes)))


def non_builtin_ops(tflite_bytes):
    """Sorted names of the custom and Flex (SELECT_TF_OPS) ops a TFLite flatbuffer uses.

    >>> import tensorflow as tf
    >>> double = tf.function(lambda x: {"y": 2.0 * x},
    ...                      input_signature=[tf.TensorSpec([None], tf.float32)])
    >>> non_builtin_ops(tf.lite.TFLiteConverter.from_concrete_functions(
    ...     [double.get_concrete_function()], double).convert())
    []
    """
    return sorted({name for name, builtin in _operators(tflite_bytes) if not builtin})


def require_builtin_ops(tflite_bytes, artifact_name):
    """Raise `ValueError` if the flatbuffer `artifact_name` needs any non-builtin op.

    A flatbuffer with Flex or custom ops only runs with an interpreter linked
    against the TensorFlow (Flex) delegate or the custom kernels, so an export
    that should run on the stock LiteRT runtime must not contain any.

    >>> import tensorflow as tf
    >>> double = tf.function(lambda x: {"y": 2.0 * x},
    ...                      input_signature=[tf.TensorSpec([None], tf.float32)])
    >>> require_builtin_ops(tf.lite.TFLiteConverter.from_concrete_functions(
    ...     [double.get_concrete_function()], double).convert(), "model.tflite")
    """
    ops = non_builtin_ops(tflite_bytes)
    if ops:
        raise ValueError(f"{artifact_name}: needs non-builtin ops {ops}; only TFLite builtin "
                         "ops run on the stock LiteRT runtime (no Flex delegate, no custom "
                         "kernels)")


def run_tflite(tflite_bytes_or_path, inputs, signature=SIGNATURE_KEY):
    """Run one signature of a TFLite flatbuffer (bytes, or a path or URL) on numpy inputs.

    Uses `ai_edge_litert`'s interpreter; its signature runner resizes the
    inputs to the shapes given. Returns `{output name: numpy array}`.

    >>> import numpy as np, tensorflow as tf
    >>> module = tf.Module()
    >>> module.double = tf.function(
    ...     lambda inputs: {"y": 2.0 * inputs["x"]},
    ...     input_signature=[{"x": tf.TensorSpec([None, None], tf.float32, name="x")}])
    >>> flatbuffer = tf.lite.TFLiteConverter.from_concrete_functions(
    ...     [module.double.get_concrete_function()], module).convert()
    >>> run_tflite(flatbuffer, {"x": np.ones((2, 3), "float32")})["y"].tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """
    from ai_edge_litert.interpreter import Interpreter

    if isinstance(tflite_bytes_or_path, (str, os.PathLike)) and file_system.is_local(
            tflite_bytes_or_path):
        interpreter = Interpreter(model_path=file_system.local_path(tflite_bytes_or_path))
    elif isinstance(tflite_bytes_or_path, (str, os.PathLike)):  # a URL: its bytes
        interpreter = Interpreter(model_content=file_system.read_bytes(tflite_bytes_or_path))
    else:
        interpreter = Interpreter(model_content=bytes(tflite_bytes_or_path))
    runner = interpreter.get_signature_runner(signature)
    outputs = runner(**{name: np.asarray(value) for name, value in inputs.items()})
    return {name: np.asarray(value) for name, value in outputs.items()}
