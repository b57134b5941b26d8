"""The fused ONNX graph (`kerasbert.export.onnx_fusions`, then ONNX Runtime's transformer
optimizer) computes what tf2onnx's unfused graph computes, for each family's attention and
head layout, and fuses exactly the blocks it should."""

import numpy as np
import onnx
import onnxruntime
import pytest

import kerasbert
from kerasbert import EncoderConfig
from kerasbert.export.onnx_fusions import fuse_encoder_graph
from kerasbert.export.onnx_model import convert_to_onnx, op_inventory
from kerasbert.export.onnx_runtime_variants import fused_candidate

SHAPE = {"vocab_size": 120, "hidden_size": 32, "num_layers": 2, "num_heads": 4,
         "intermediate_size": 64}
# (family, task, config overrides, what fuse_encoder_graph fuses)
CASES = {
    # the classifier's last layer attends from the first token only (MultiHeadAttention)
    "bert_classifier": ("bert", "sequence_classification", {},
                        {"Attention": 1, "Gelu": 2, "LayerNormalization": 5, "MatMul": 12,
                         "MultiHeadAttention": 1}),
    # one shared layer applied twice, an embedding projection, tanh GELU (left unfused)
    "albert_span_qa": ("albert", "question_answering",
                       {"embedding_size": 16, "hidden_activation": "gelu_new"},
                       {"Attention": 2, "LayerNormalization": 5, "MatMul": 14}),
    # [batch, choices, sequence] inputs folded into the encoder's batch
    "distilbert_choice": ("distilbert", "multiple_choice", {},
                          {"Attention": 1, "Gelu": 2, "LayerNormalization": 5, "MatMul": 12,
                           "MultiHeadAttention": 1}),
    # rotary attention stays unfused; its bias-free LayerNorms and gated GELUs are fused
    "modernbert_tagger": ("modernbert", "token_classification", {"max_positions": 64},
                          {"Gelu": 3, "LayerNormalization": 6, "MatMul": 10}),
}


def _model(family, task, overrides):
    config = EncoderConfig(family=family, **SHAPE, **overrides)
    encoder = kerasbert.models.Encoder(config)
    kwargs = {"num_labels": 3} if task in ("sequence_classification",
                                           "token_classification") else {}
    model = kerasbert.models.build_task_model(encoder, task, **kwargs)
    rng = np.random.default_rng(7)
    for weight in model.weights:  # biases and LayerNorm parameters away from 0 and 1
        offset = 1.0 if "gamma" in weight.path else 0.0
        weight.assign(rng.normal(offset, 0.2, weight.shape).astype(weight.dtype))
    return model, config


def _inputs(config, choices):
    """Rows padded at the end, one with a hole in its mask, one of a single token."""
    rng = np.random.default_rng(3)
    mask = np.ones((3, 13), np.int32)
    mask[1, 9:] = 0
    mask[2, 1:] = 0
    mask[0, 4:6] = 0
    ids = np.where(mask == 1, rng.integers(4, config.vocab_size, mask.shape), 0)
    segments = np.where(np.arange(13) >= 7, 1, 0) * (config.type_vocab_size > 1) * mask
    inputs = {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}
    if choices:
        inputs = {name: np.stack([value, value[::-1]], 1) for name, value in inputs.items()}
    return {name: value.astype(np.int32) for name, value in inputs.items()}


def _run(path, inputs):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [value.name for value in session.get_inputs()]
    return dict(zip([value.name for value in session.get_outputs()],
                    session.run(None, {name: inputs[name] for name in names})))


@pytest.fixture(scope="module", params=sorted(CASES))
def converted(request, tmp_path_factory):
    family, task, overrides, expected = CASES[request.param]
    model, config = _model(family, task, overrides)
    folder = tmp_path_factory.mktemp(request.param)
    unfused = folder / "model.onnx"
    onnx.save(convert_to_onnx(model), unfused)
    return request.param, config, unfused, expected, _inputs(config, task == "multiple_choice")


def _assert_same_outputs(reference, outputs, mask):
    assert sorted(reference) == sorted(outputs)
    for name, expected in reference.items():
        found = outputs[name]
        if found.ndim >= 2 and found.shape[:mask.ndim] == mask.shape:  # token outputs
            keep = mask.reshape(mask.shape + (1,) * (found.ndim - mask.ndim)) == 1
            expected, found = np.where(keep, expected, 0), np.where(keep, found, 0)
        scale = np.abs(expected).max()
        assert scale > 0.1, name  # outputs that mean something
        np.testing.assert_allclose(found, expected, rtol=0, atol=1e-5 * scale, err_msg=name)


def test_the_rewritten_graph_fuses_each_block_and_computes_the_same(converted, tmp_path):
    name, config, unfused, expected, inputs = converted
    proto = onnx.load(unfused)
    counts = fuse_encoder_graph(proto, config.num_heads)
    assert counts == {op: count for op, count in expected.items() if count}, name
    onnx.checker.check_model(proto)
    ops = op_inventory(proto)
    if expected.get("Attention"):  # no unfused attention left
        assert "Softmax" not in ops and "GlobalAveragePool" not in ops and "Erf" not in ops
    path = tmp_path / "rewritten.onnx"
    onnx.save(proto, path)
    _assert_same_outputs(_run(unfused, inputs), _run(path, inputs), inputs["padding_mask"])


def test_onnx_runtime_fuses_the_skip_connections_and_biases_on_top(converted, tmp_path):
    name, config, unfused, expected, inputs = converted
    candidate = tmp_path / "fused.onnx"
    result = fused_candidate(str(unfused), config, str(candidate))
    fusions = result["fusions"]
    if name == "modernbert_tagger":  # pre-norm: no residual sum feeds a LayerNorm directly
        assert "Attention" not in fusions and "MultiHeadAttention" not in fusions
    else:
        assert fusions["SkipLayerNormalization"] == 2 * config.num_layers, fusions
        assert fusions.get("BiasGelu", 0) == expected.get("Gelu", 0), fusions
    reference = _run(unfused, inputs)
    _assert_same_outputs(reference, _run(candidate, inputs), inputs["padding_mask"])
    assert [value.name for value in onnx.load(candidate).graph.input] == [
        value.name for value in onnx.load(unfused).graph.input]
