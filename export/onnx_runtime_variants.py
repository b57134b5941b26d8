"""ONNX Runtime's own versions of `model.onnx`: the graph its transformer optimizer fuses
(`fused_candidate`) and the dynamic-range int8 file (`quantize_dynamic_int8`).

`fused_candidate` rewrites tf2onnx's graph into fused operators (`kerasbert.export.onnx_fusions`)
and runs `onnxruntime.transformers.optimizer.optimize_model(model_type="bert")` on the result
with the model's `num_heads` and `hidden_size`; the exporter keeps the fused graph as
`model.onnx` only when a fresh ONNX Runtime process verifies it against the Keras model at
the float32 tolerance, and otherwise keeps the unfused file and says why in the report.
`quantize_dynamic_int8` writes `model_dynamic_int8.onnx` with
`onnxruntime.quantization.quantize_dynamic`: int8 weights per output channel for the
transformer layers' dense layers and the embedding tables, activations quantized on the fly;
the products of two activations (attention scores, attention-weighted values) stay float32, as
in `model_dynamic_int8.tflite`, and so do the layers after the encoder stack (pooler and
heads, but not a tied MLM decoder: it is the embedding table), as the full-integer TFLite file
keeps them: rounding a 45-label classifier's head cost
the main job's ONNX file 2.8% of its dev predictions (docs/export.md). The exporter judges it
by the strict quantized rule of `kerasbert.export.compare`.
"""

import collections
import contextlib
import logging
import os

import onnx

from kerasbert.export.onnx_fusions import fuse_encoder_graph

ONNX_FILE_NAMES = {"none": "model.onnx", "dynamic_int8": "model_dynamic_int8.onnx"}
ONNX_QUANTIZATIONS = tuple(ONNX_FILE_NAMES)
FUSED_CANDIDATE_FILE = "model_fused_candidate.onnx"
OPTIMIZER_MODEL_TYPE = "bert"
# the operators a fused `model.onnx` counts in its report
FUSED_OPS = ("Attention", "MultiHeadAttention", "LayerNormalization", "SkipLayerNormalization",
             "Gelu", "BiasGelu", "FastGelu", "EmbedLayerNormalization")


def fused_candidate(path, config, candidate_path):
    """Fuse the ONNX graph at `path` (a model of `config`, an `EncoderConfig`) and write it at
    `candidate_path`: `kerasbert.export.onnx_fusions` rewrites tf2onnx's attention, LayerNorm,
    GELU and Dense patterns into fused operators, then ONNX Runtime's transformer optimizer
    fuses what it recognises on top (skip connections into `SkipLayerNormalization`, biases
    into `BiasGelu`). Return `{"fusions": {fused op: count}}`, or `{"fusions": {}, "reason":
    ...}` (nothing written) when there is no attention, LayerNorm or GELU to fuse.

    >>> import os, tempfile, onnx, kerasbert
    >>> from kerasbert.export.onnx_model import convert_to_onnx
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> folder = tempfile.mkdtemp()
    >>> onnx.save(convert_to_onnx(encoder), os.path.join(folder, "model.onnx"))
    >>> fused_candidate(os.path.join(folder, "model.onnx"), encoder.config,
    ...                 os.path.join(folder, "fused.onnx"))["fusions"]
    {'Attention': 1, 'Gelu': 1, 'LayerNormalization': 1, 'SkipLayerNormalization': 2}
    """
    from onnxruntime.transformers.optimizer import optimize_model

    proto = onnx.load(path)
    inputs = list(proto.graph.input)
    rewritten = fuse_encoder_graph(proto, config.num_heads)
    if not any(rewritten.get(name) for name in FUSED_OPS):
        return {"fusions": {}, "reason": (
            "no attention, LayerNorm or GELU in the tf2onnx graph has the pattern "
            "kerasbert.export.onnx_fusions fuses (rotary, windowed or chunked attention and "
            "other activations stay unfused)")}
    onnx.save(proto, candidate_path)  # the optimizer reads large models from a file
    with _quiet("onnxruntime"):
        optimized = optimize_model(candidate_path, model_type=OPTIMIZER_MODEL_TYPE,
                                   num_heads=config.num_heads, hidden_size=config.hidden_size)
    fused = optimized.model
    # the optimizer drops inputs nothing reads (segment_ids of a family without segments);
    # the file keeps the model's signature
    del fused.graph.input[:]
    fused.graph.input.extend(inputs)
    fusions = {name: count for name, count in collections.Counter(
        node.op_type for node in fused.graph.node).items() if name in FUSED_OPS}
    optimized.save_model_to_file(candidate_path)
    return {"fusions": dict(sorted(fusions.items()))}


def quantize_dynamic_int8(path, output_path):
    """Write the dynamic-range int8 version of the ONNX model at `path` to `output_path`.

    >>> import os, tempfile, onnx, kerasbert
    >>> from kerasbert.export.onnx_model import convert_to_onnx, op_inventory
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> folder = tempfile.mkdtemp()
    >>> onnx.save(convert_to_onnx(encoder), os.path.join(folder, "model.onnx"))
    >>> quantize_dynamic_int8(os.path.join(folder, "model.onnx"), os.path.join(folder, "q.onnx"))
    >>> "DynamicQuantizeLinear" in op_inventory(onnx.load(os.path.join(folder, "q.onnx")))
    True
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet("root"):
        quantize_dynamic(path, output_path, per_channel=True, weight_type=QuantType.QInt8,
                         nodes_to_exclude=head_nodes(onnx.load(path)),
                         # float for tensors of com.microsoft operators (a fused graph),
                         # which ONNX's shape inference cannot type
                         extra_options={"MatMulConstBOnly": True,
                                        "DefaultTensorType": onnx.TensorProto.FLOAT})
    if not os.path.isfile(output_path):
        raise RuntimeError(f"quantize_dynamic wrote nothing at {output_path}")


def head_nodes(proto):
    """The names of the matrix products of ONNX model `proto` outside the transformer layers and
    the embeddings: the pooler's and the heads', which `quantize_dynamic_int8` keeps float. A
    tied MLM decoder is not one of them: its weight is the token embedding table (a transposed
    copy, one column per vocabulary entry), quantized per channel like the table itself.

    >>> import kerasbert
    >>> from kerasbert.export.onnx_model import convert_to_onnx
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> model = kerasbert.models.build_task_model(encoder, "sequence_classification")
    >>> [name.split("/")[1] for name in head_nodes(convert_to_onnx(model))]
    ['pooler_1', 'classifier_1']
    >>> pretraining = kerasbert.models.PretrainingModel(encoder, ["mlm", "nsp"])
    >>> ["/".join(name.split("/")[1:3]) for name in head_nodes(convert_to_onnx(pretraining))]
    ['mlm_head_1/dense_1', 'pooler_1/dense_1', 'nsp_head_1/MatMul']
    >>> embedder = kerasbert.models.build_task_model(
    ...     encoder, "text_embedding", dense_layers=[{"units": 8}])
    >>> [name.split("/")[1] for name in head_nodes(convert_to_onnx(embedder))]
    ['dense_0_1']
    """
    shapes = {tensor.name: tuple(tensor.dims) for tensor in proto.graph.initializer}
    vocabulary = {shapes.get(node.input[0], (None,))[0] for node in proto.graph.node
                  if node.op_type == "Gather" and "token_embedding" in node.name}
    def inside_model(name):  # the node's path below the model's own name
        return name.split("/", 1)[-1]

    return [node.name for node in proto.graph.node if node.op_type in ("MatMul", "Gemm")
            and "transformer_layer_" not in node.name
            and "embedding" not in inside_model(node.name)
            and shapes.get(node.input[1], (None,))[-1] not in vocabulary - {None}]


@contextlib.contextmanager
def _quiet(name):
    """The optimizer and quantizer log warnings meant for their own users (a graph that is
    not PyTorch's, a pre-processing hint); export's report says what matters."""
    logger = logging.getLogger(None if name == "root" else name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
