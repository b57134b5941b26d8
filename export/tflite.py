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
- `int8`: full-integer post-training quantization calibrated on representative
  inputs: int8 weights and activations in between int32 ids in and float32
  outputs out. The attention-score path (query-key matmul, padding-mask bias,
  softmax) stays float32; see `_float_attention_nodes`.

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

QUANTIZATIONS = ("none", "float16", "dynamic_int8", "int8")
TFLITE_FILE_NAMES = {"none": "model.tflite", "float16": "model_float16.tflite",
                     "dynamic_int8": "model_dynamic_int8.tflite", "int8": "model_int8.tflite"}
SIGNATURE_KEY = "serving_default"

_BUILTIN_NAMES = {code: name for name, code in vars(_schema.BuiltinOperator).items()
                  if not name.startswith("_")}
# Calibrated ranges wider than this come from the -1e9 padding-mask bias, never from a
# real activation; an int8 scale spanning them flattens every real value to one step.
_MASK_RANGE = 1e3
# Ops between the padding mask and the attention softmax (the bias arithmetic, the add).
_SCORE_PATH_OPS = frozenset({"ADD", "SUB", "MUL", "NEG", "CAST", "EXPAND_DIMS", "RESHAPE",
                             "BROADCAST_TO", "SELECT_V2"})


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
    """Calibrate, then quantize everything but the attention-score path to int8.

    These are the two steps `converter.convert()` runs for full-integer
    quantization, split (as `tf.lite.experimental.QuantizationDebugger` does)
    so that the quantizer can be told which nodes to keep float.
    """
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
        calibrated = converter.convert()
    return _tflite_convert.mlir_quantize(
        calibrated, denylisted_nodes=sorted(_float_attention_nodes(calibrated)))


def _float_attention_nodes(calibrated):
    """Names (output tensors) of the nodes that full-integer quantization must keep float32.

    BERT's attention adds a -1e9 bias at padding keys before the softmax. A
    single int8 scale over [-1e9, max score] maps every real score to the same
    value: attention turns uniform and the outputs are destroyed (mean token
    cosine 0.78-0.92 and argmax agreement down to 0.66 on the tiny test
    models, 0.55 on a 4-layer BERT of hidden size 256). The calibrated range
    of the query-key matmul spans the bias too. Kept float: every softmax, the
    ops from its input back through the bias arithmetic to the padding mask,
    the query-key `BATCH_MATMUL`, and, as a safeguard, any op that reads or
    writes a tensor with a calibrated range wider than `_MASK_RANGE`. That is
    ~3% of BERT-base's multiply-adds; the probabilities are requantized for
    the probability-value matmul. (Clipping the bias to -120 in the model
    instead, as MobileBERT-EdgeTPU does, keeps everything int8 but loses
    more: agreement 0.95 vs 0.98 and mean cosine 0.9961 vs 0.9980 on ALBERT.)
    """
    model = _schema.Model.GetRootAsModel(calibrated, 0)
    names = set()
    for index in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(index)
        operators = [subgraph.Operators(i) for i in range(subgraph.OperatorsLength())]
        kinds = [_operator_name(model, operator)[0] for operator in operators]
        kept = (_attention_score_ops(subgraph, operators, kinds)
                | _wide_range_ops(subgraph, operators))
        names.update(subgraph.Tensors(tensor).Name().decode()
                     for op in kept for tensor in _tensors(operators[op], "Outputs"))
    return names


def _attention_score_ops(subgraph, operators, kinds):
    """Indices of the softmax ops and of the score / bias ops feeding them (see above)."""
    producer = {tensor: index for index, operator in enumerate(operators)
                for tensor in _tensors(operator, "Outputs")}
    kept = {index for index, kind in enumerate(kinds) if kind == "SOFTMAX"}
    stack = list(kept)
    while stack:
        index = stack.pop()
        if kinds[index] == "BATCH_MATMUL":  # the query-key product: kept, not walked through
            continue
        for tensor in _tensors(operators[index], "Inputs"):
            source = producer.get(tensor)
            if (source is not None and source not in kept
                    and kinds[source] in _SCORE_PATH_OPS | {"BATCH_MATMUL"}
                    and subgraph.Tensors(tensor).Type() == _schema.TensorType.FLOAT32):
                kept.add(source)
                stack.append(source)
    return kept


def _wide_range_ops(subgraph, operators):
    """Indices of the ops that read or write a tensor calibrated wider than `_MASK_RANGE`."""
    def wide(tensor):
        quantization = subgraph.Tensors(tensor).Quantization()
        if quantization is None or quantization.MinLength() == 0:
            return False
        return max(np.abs(quantization.MinAsNumpy()).max(),
                   np.abs(quantization.MaxAsNumpy()).max()) > _MASK_RANGE

    return {index for index, operator in enumerate(operators)
            if any(wide(tensor) for tensor in
                   (*_tensors(operator, "Inputs"), *_tensors(operator, "Outputs")))}


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
    """Run one signature of a TFLite flatbuffer (bytes or a path) on numpy inputs.

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

    if isinstance(tflite_bytes_or_path, (str, os.PathLike)):
        interpreter = Interpreter(model_path=os.fspath(tflite_bytes_or_path))
    else:
        interpreter = Interpreter(model_content=bytes(tflite_bytes_or_path))
    runner = interpreter.get_signature_runner(signature)
    outputs = runner(**{name: np.asarray(value) for name, value in inputs.items()})
    return {name: np.asarray(value) for name, value in outputs.items()}
