"""ONNX export through tf2onnx: the model's input and output names, dynamic axes named
`batch`, `choices` (multiple choice) and `sequence` (`predictions` for the masked positions of
`mlm_logits`), and a graph `onnx.checker` accepts."""

import collections

import onnx
import tf2onnx

from kerasbert.export.errors import ExportError
from kerasbert.export.signatures import input_specs, serving_function

OPSET = 17
# Ops that must not appear: tf2onnx cannot convert Erfc, and exact GELU is written with Erf.
FORBIDDEN_OPS = ("Erfc",)


def axis_names(rank):
    """The names of an input's dynamic axes.

    >>> axis_names(2), axis_names(3)
    (['batch', 'sequence'], ['batch', 'choices', 'sequence'])
    """
    return ["batch", "sequence"] if rank == 2 else ["batch", "choices", "sequence"]


def convert_to_onnx(model, opset=OPSET):
    """`model` as a checked `onnx.ModelProto` (see the module docstring).

    >>> import kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> proto = convert_to_onnx(encoder)
    >>> [value.name for value in proto.graph.input], sorted(o.name for o in proto.graph.output)
    (['padding_mask', 'segment_ids', 'token_ids'], ['pooled_output', 'sequence_output'])
    """
    specs = input_specs(model)
    proto, _ = tf2onnx.convert.from_function(serving_function(model), input_signature=[specs],
                                             opset=opset)
    for value in proto.graph.input:
        dims = value.type.tensor_type.shape.dim
        for dim, name in zip(dims, axis_names(len(dims))):
            dim.ClearField("dim_value")
            dim.dim_param = name
    choices = len(specs["token_ids"].shape) == 3
    for value in proto.graph.output:
        dims = value.type.tensor_type.shape.dim
        names = ["batch", "choices" if choices else
                 "predictions" if value.name == "mlm_logits" else "sequence"]
        for dim, name in zip(dims, names):
            if not dim.HasField("dim_value"):
                dim.dim_param = name
    expected = sorted(model.output)
    found = sorted(value.name for value in proto.graph.output)
    if found != expected:
        raise ExportError(f"model.onnx: outputs {found}, expected the model's {expected}")
    forbidden = [op for op in op_inventory(proto) if op in FORBIDDEN_OPS]
    if forbidden:
        raise ExportError(f"model.onnx: contains {forbidden}, which ONNX runtimes lack")
    try:
        onnx.checker.check_model(proto, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        raise ExportError(f"model.onnx: onnx.checker rejects it: {error}") from None
    return proto


def op_inventory(proto):
    """`{op type: count}` over the ONNX graph (subgraphs included).

    >>> op_inventory(onnx.helper.make_model(onnx.helper.make_graph(
    ...     [onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [], [])))
    {'Relu': 1}
    """
    counts = collections.Counter()

    def visit(graph):
        for node in graph.node:
            counts[node.op_type] += 1
            for attribute in node.attribute:
                for subgraph in list(attribute.graphs) + ([attribute.g] if attribute.HasField("g")
                                                          else []):
                    visit(subgraph)
    visit(proto.graph)
    return dict(sorted(counts.items()))
