"""`from_hf` + the kerasbert forward pass equal keras-hub's independent implementation.

The same random Hugging Face checkpoint goes into both: kerasbert through
`kerasbert.convert.from_hf`, keras-hub through its own Hugging Face converter
(`keras_hub.models.Backbone.from_preset(directory)`) or, for ELECTRA, which
keras-hub cannot import from Hugging Face, through a weight mapping written
here. Their outputs must agree to 1e-5.

Where the architectures of the two libraries are fixed differently, the
checkpoint is made to fit keras-hub:

- keras-hub's BERT and ELECTRA backbones always use the tanh approximation of
  GELU (`gelu_approximate`), whatever `hidden_act` says, so those checkpoints
  use `hidden_act="gelu_new"` (HF's name for it). keras-hub's RoBERTa and
  DistilBERT use the exact (erf) GELU, HF's default `"gelu"`; ALBERT is
  `"gelu_new"` everywhere.
- keras-hub's RoBERTa has no token type embedding, so the RoBERTa checkpoint's
  single token type row is zeroed, as in the real RoBERTa checkpoints.

Weights are drawn with `initializer_range=0.2`: with the usual 0.02 the
pre-activations are so small that erf and tanh GELU agree to ~1e-6 and a
wrong activation would go unnoticed (see
`test_tolerance_detects_an_activation_mismatch`).
"""

import os

import keras_hub
import numpy as np
import pytest
import torch

import kerasbert
from tests.helpers import hf_config, random_inputs, save_hf_model

TOLERANCE = 1e-5
INITIALIZER_RANGE = 0.2

# family -> (transformers class saved, from_hf's encoder_only, hf_config overrides, keras-hub class).
# keras-hub's RoBERTa, ALBERT and DistilBERT converters read the prefixed names of head
# checkpoints (`roberta.`, `albert.`, `distilbert.`). Its ALBERT converter also reads the pooler,
# which `AlbertForMaskedLM` lacks, so ALBERT is saved as `AlbertForPreTraining` (prefixed, with
# pooler).
FAMILIES = {
    "bert": ("BertModel", False, dict(hidden_act="gelu_new"), "BertBackbone"),
    "roberta": ("RobertaForMaskedLM", True, {}, "RobertaBackbone"),
    "albert": ("AlbertForPreTraining", True,
               dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2), "AlbertBackbone"),
    "electra": ("ElectraModel", False, dict(hidden_act="gelu_new", embedding_size=16),
                "ElectraBackbone"),
    "distilbert": ("DistilBertForMaskedLM", True, {}, "DistilBertBackbone"),
}

# Only at non-padding positions for RoBERTa: keras-hub numbers every position 0..seq-1 (+ the
# offset of 2 folded into its table) without looking at padding, while Hugging Face and kerasbert
# give padding tokens position `pad_token_id` (1). Padding is right-aligned, so the positions of
# real tokens agree, and padding keys are masked out of attention, so real tokens' outputs do not
# depend on the padding rows; only the padding rows' own outputs differ (by O(1)).
# The other families number positions 0..seq-1 on all three sides and agree everywhere.
NON_PADDING_ONLY = {"roberta"}


def _save_checkpoint(family, directory, **overrides):
    model_class, _, family_overrides, _ = FAMILIES[family]
    config = hf_config(family, initializer_range=INITIALIZER_RANGE,
                       **dict(family_overrides, **overrides))
    model = save_hf_model(model_class, config, directory)
    if family == "roberta":
        with torch.no_grad():
            model.roberta.embeddings.token_type_embeddings.weight.zero_()
        model.save_pretrained(directory)
    return model


def _transpose_reshape(weight, shape):
    return np.reshape(np.transpose(weight), shape)


def _electra_backbone(directory):
    """A keras-hub `ElectraBackbone` with the weights of the `ElectraModel` in `directory`."""
    from safetensors.numpy import load_file

    import transformers

    hf = transformers.ElectraConfig.from_json_file(os.path.join(directory, "config.json"))
    backbone = keras_hub.models.ElectraBackbone(
        vocab_size=hf.vocab_size,
        num_layers=hf.num_hidden_layers,
        num_heads=hf.num_attention_heads,
        hidden_dim=hf.hidden_size,
        embedding_dim=hf.embedding_size,
        intermediate_dim=hf.intermediate_size,
        dropout=0.0,
        max_sequence_length=hf.max_position_embeddings,
        num_segments=hf.type_vocab_size,
    )
    # keras-hub hard-codes these; the checkpoint must agree for the comparison to mean anything.
    assert hf.layer_norm_eps == 1e-12 and hf.hidden_act == "gelu_new"
    assert hf.embedding_size != hf.hidden_size  # keras-hub then adds `embeddings_projection`

    def reshape(weight, shape):
        return np.reshape(weight, shape)

    # (keras variable, HF tensor name, transform(hf_array, keras_shape) or None)
    pairs = [
        (backbone.token_embedding.embeddings, "embeddings.word_embeddings.weight", None),
        (backbone.position_embedding.position_embeddings, "embeddings.position_embeddings.weight",
         None),
        (backbone.segment_embedding.embeddings, "embeddings.token_type_embeddings.weight", None),
        (backbone.embeddings_layer_norm.gamma, "embeddings.LayerNorm.weight", None),
        (backbone.embeddings_layer_norm.beta, "embeddings.LayerNorm.bias", None),
        (backbone.embeddings_projection.kernel, "embeddings_project.weight", _transpose_reshape),
        (backbone.embeddings_projection.bias, "embeddings_project.bias", None),
    ]
    for index, layer in enumerate(backbone.transformer_layers):
        prefix = f"encoder.layer.{index}."
        attention = layer._self_attention_layer
        # keras-hub's attention kernels are [in, heads, head_size] / [heads, head_size, out].
        for dense, name in ((attention.query_dense, "attention.self.query"),
                            (attention.key_dense, "attention.self.key"),
                            (attention.value_dense, "attention.self.value"),
                            (attention.output_dense, "attention.output.dense")):
            pairs += [(dense.kernel, prefix + name + ".weight", _transpose_reshape),
                      (dense.bias, prefix + name + ".bias", reshape)]
        for norm, name in ((layer._self_attention_layer_norm, "attention.output.LayerNorm"),
                           (layer._feedforward_layer_norm, "output.LayerNorm")):
            pairs += [(norm.gamma, prefix + name + ".weight", None),
                      (norm.beta, prefix + name + ".bias", None)]
        for dense, name in ((layer._feedforward_intermediate_dense, "intermediate.dense"),
                            (layer._feedforward_output_dense, "output.dense")):
            pairs += [(dense.kernel, prefix + name + ".weight", _transpose_reshape),
                      (dense.bias, prefix + name + ".bias", None)]

    state = load_file(os.path.join(directory, "model.safetensors"))
    buffers = {name for name in state if name.endswith(("position_ids", "token_type_ids"))}
    # Every checkpoint weight is used once, and every keras-hub weight but the pooler
    # (which HF's ELECTRA does not have) is filled.
    assert sorted(name for _, name, _ in pairs) == sorted(set(state) - buffers)
    expected = {id(v) for v in backbone.weights} - {id(v) for v in backbone.pooled_dense.weights}
    assert {id(variable) for variable, _, _ in pairs} == expected
    for variable, name, transform in pairs:
        value = state[name]
        if transform is not None:
            value = transform(value, tuple(variable.shape))
        assert value.shape == tuple(variable.shape), name
        variable.assign(value.astype("float32"))
    return backbone


def _keras_hub_backbone(family, directory):
    if family == "electra":
        backbone = _electra_backbone(directory)
    else:
        backbone = keras_hub.models.Backbone.from_preset(os.fspath(directory))
    assert type(backbone).__name__ == FAMILIES[family][3]
    return backbone


def _keras_hub_outputs(backbone, inputs):
    """keras-hub's outputs as a dict; its RoBERTa returns the bare sequence output."""
    # keras-hub's backbones take int32 inputs (its masks are cast to int32 internally);
    # RoBERTa has no segment_ids input, so pass only the inputs each backbone declares.
    declared = backbone.input if isinstance(backbone.input, dict) else {}
    outputs = backbone({name: inputs[name] for name in declared})
    if not isinstance(outputs, dict):
        outputs = {"sequence_output": outputs}
    return {name: np.asarray(value) for name, value in outputs.items()}


def _max_sequence_diff(family, ours, theirs, padding_mask):
    diff = np.abs(ours - theirs)
    if family in NON_PADDING_ONLY:
        diff = diff[padding_mask.astype(bool)]
    return float(diff.max())


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_encoder_matches_keras_hub(family, tmp_path):
    _, encoder_only, _, _ = FAMILIES[family]
    _save_checkpoint(family, tmp_path)
    encoder = kerasbert.convert.from_hf(tmp_path, encoder_only=encoder_only)
    backbone = _keras_hub_backbone(family, tmp_path)

    inputs = random_inputs(encoder.config, batch=3, seq=10)
    assert (inputs["padding_mask"] == 0).any()  # the inputs do exercise padding ...
    if encoder.config.type_vocab_size > 1:
        assert (inputs["segment_ids"] == 1).any()  # ... and sentence pairs
    ours = {name: np.asarray(value) for name, value in encoder(inputs).items()}
    theirs = _keras_hub_outputs(backbone, inputs)

    assert ours["sequence_output"].dtype == theirs["sequence_output"].dtype == np.float32
    assert ours["sequence_output"].shape == theirs["sequence_output"].shape
    sequence_diff = _max_sequence_diff(family, ours["sequence_output"], theirs["sequence_output"],
                                       inputs["padding_mask"])
    assert sequence_diff <= TOLERANCE, f"{family}: sequence_output differs by {sequence_diff:.3g}"

    # Pooled outputs where both sides have one: kerasbert has none for ELECTRA and DistilBERT
    # (nor for a checkpoint without pooler weights, like RobertaForMaskedLM), keras-hub has none
    # for RoBERTa and DistilBERT, and keras-hub's ELECTRA pooler has no Hugging Face counterpart.
    expect_pooled = family in ("bert", "albert")
    assert ("pooled_output" in ours and "pooled_output" in theirs) == expect_pooled
    if expect_pooled:
        pooled_diff = float(np.abs(ours["pooled_output"] - theirs["pooled_output"]).max())
        assert pooled_diff <= TOLERANCE, f"{family}: pooled_output differs by {pooled_diff:.3g}"


def test_tolerance_detects_an_activation_mismatch(tmp_path):
    """With these weights the test above can tell erf GELU from tanh GELU.

    A BERT checkpoint with HF's default `hidden_act="gelu"` (erf), which kerasbert
    follows, while keras-hub's BERT always applies the tanh approximation: the
    outputs must then differ well beyond the tolerance.
    """
    _save_checkpoint("bert", tmp_path, hidden_act="gelu")
    encoder = kerasbert.convert.from_hf(tmp_path)
    backbone = _keras_hub_backbone("bert", tmp_path)
    inputs = random_inputs(encoder.config)
    ours = np.asarray(encoder(inputs)["sequence_output"])
    theirs = _keras_hub_outputs(backbone, inputs)["sequence_output"]
    assert float(np.abs(ours - theirs).max()) > 10 * TOLERANCE
