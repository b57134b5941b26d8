"""Hugging Face checkpoints imported with `from_hf` give the outputs `transformers` gives."""

import numpy as np
import pytest

import kerasbert
from tests.helpers import hf_config, hf_outputs, random_inputs, save_hf_model

TOLERANCE = 1e-5

# (family, transformers class, config overrides): a plain config and at least one odd one each.
CASES = [
    ("bert", "BertModel", {}),
    ("bert", "BertModel", dict(hidden_size=36, num_attention_heads=3, num_hidden_layers=3)),
    ("bert", "BertModel", dict(hidden_act="relu", type_vocab_size=3, layer_norm_eps=1e-7)),
    ("roberta", "RobertaModel", {}),
    ("roberta", "RobertaModel", dict(hidden_size=30, num_attention_heads=5)),
    ("albert", "AlbertModel", {}),
    ("albert", "AlbertModel", dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)),
    ("albert", "AlbertModel", dict(hidden_size=36, num_attention_heads=6, num_hidden_layers=3,
                                   embedding_size=36)),
    ("electra", "ElectraModel", {}),
    ("electra", "ElectraModel", dict(embedding_size=16, hidden_size=48, num_attention_heads=3)),
    ("electra", "ElectraModel", dict(embedding_size=32)),
    ("distilbert", "DistilBertModel", {}),
    ("distilbert", "DistilBertModel", dict(sinusoidal_pos_embds=True)),
    ("distilbert", "DistilBertModel", dict(hidden_size=36, num_attention_heads=3,
                                           num_hidden_layers=3, hidden_act="relu",
                                           intermediate_size=50)),
    ("modernbert", "ModernBertModel", {}),
    ("modernbert", "ModernBertModel", dict(hidden_size=48, num_attention_heads=4,
                                           num_hidden_layers=5, global_attn_every_n_layers=2,
                                           local_rope_theta=500.0, global_rope_theta=2e4)),
]


def _case_id(case):
    family, _, overrides = case
    return family + ("-" + "-".join(f"{k}={v}" for k, v in overrides.items()) if overrides else "")


@pytest.mark.parametrize("case", CASES, ids=[_case_id(case) for case in CASES])
def test_encoder_matches_transformers(case, tmp_path):
    family, model_class, overrides = case
    reference = save_hf_model(model_class, hf_config(family, **overrides), tmp_path)
    encoder = kerasbert.convert.from_hf(tmp_path)
    assert encoder.config.family == family

    for seed, (batch, seq) in enumerate([(3, 12), (2, 7), (1, 1)]):
        inputs = random_inputs(encoder.config, batch=batch, seq=seq, seed=seed)
        expected = hf_outputs(reference, inputs)
        outputs = encoder(inputs)
        np.testing.assert_allclose(outputs["sequence_output"], expected.last_hidden_state.numpy(),
                                   rtol=0, atol=TOLERANCE)
        if "pooler_output" in expected:
            np.testing.assert_allclose(outputs["pooled_output"], expected.pooler_output.numpy(),
                                       rtol=0, atol=TOLERANCE)
        else:  # ELECTRA, DistilBERT
            assert "pooled_output" not in outputs


@pytest.mark.parametrize("activation,swapped", [("gelu", "gelu_new"), ("gelu_new", "gelu")])
def test_parity_tolerance_detects_an_activation_mix_up(activation, swapped, tmp_path):
    """The test weights are large enough that exact vs tanh GELU differ far beyond the tolerance."""
    reference = save_hf_model("BertModel", hf_config("bert", hidden_act=activation), tmp_path)
    imported = kerasbert.convert.from_hf(tmp_path)
    wrong = kerasbert.models.build_encoder(imported.config.replace(hidden_activation=swapped))
    wrong.set_weights(imported.get_weights())
    inputs = random_inputs(imported.config)
    expected = hf_outputs(reference, inputs).last_hidden_state.numpy()
    assert np.abs(imported(inputs)["sequence_output"] - expected).max() <= TOLERANCE
    assert np.abs(wrong(inputs)["sequence_output"] - expected).max() > 30 * TOLERANCE


@pytest.mark.parametrize("family,model_class,overrides", [
    ("bert", "BertModel", {}),
    ("albert", "AlbertModel", dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)),
    ("electra", "ElectraModel", dict(embedding_size=16)),
    ("distilbert", "DistilBertModel", dict(num_hidden_layers=3)),
    ("modernbert", "ModernBertModel", {}),
])
def test_hidden_states_match_transformers(family, model_class, overrides, tmp_path):
    reference = save_hf_model(model_class, hf_config(family, **overrides), tmp_path)
    imported = kerasbert.convert.from_hf(tmp_path)
    encoder = kerasbert.models.build_encoder(imported.config, output_hidden_states=True)
    encoder.set_weights(imported.get_weights())
    inputs = random_inputs(encoder.config, batch=2, seq=9)
    expected = hf_outputs(reference, inputs).hidden_states
    hidden_states = encoder(inputs)["hidden_states"]
    assert len(hidden_states) == len(expected)
    for ours, theirs in zip(hidden_states, expected):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("seq", [17, 60, 200])
def test_modernbert_matches_transformers_past_its_local_window(seq, implementation, tmp_path):
    """Local layers see 16 tokens here (`hf_config`): at 17 tokens and more the window cuts,
    and at 200 kerasbert's blocked local attention runs over 25 blocks, with padding."""
    import transformers

    save_hf_model("ModernBertModel", hf_config("modernbert"), tmp_path)
    reference = transformers.ModernBertModel.from_pretrained(
        tmp_path, attn_implementation=implementation).eval()
    encoder = kerasbert.convert.from_hf(tmp_path)
    assert encoder.transformer_layers[1].local_window == 16
    inputs = random_inputs(encoder.config, batch=3, seq=seq, seed=seq)
    real = inputs["padding_mask"] == 1
    np.testing.assert_allclose(
        np.asarray(encoder(inputs)["sequence_output"])[real],
        hf_outputs(reference, inputs).last_hidden_state.numpy()[real], rtol=0, atol=TOLERANCE)


def test_roberta_positions_ignore_padding_tokens(tmp_path):
    """RoBERTa numbers positions by non-pad tokens: left padding must not shift them."""
    reference = save_hf_model("RobertaModel", hf_config("roberta"), tmp_path)
    encoder = kerasbert.convert.from_hf(tmp_path)
    inputs = random_inputs(encoder.config, batch=2, seq=8)
    left_padded = {name: np.flip(value, axis=1).copy() for name, value in inputs.items()}
    expected = hf_outputs(reference, left_padded).last_hidden_state.numpy()
    np.testing.assert_allclose(encoder(left_padded)["sequence_output"], expected,
                               rtol=0, atol=TOLERANCE)


def test_pytorch_bin_checkpoint(tmp_path):
    import torch

    reference = save_hf_model("BertModel", hf_config("bert"), tmp_path)
    (tmp_path / "model.safetensors").unlink()
    torch.save(reference.state_dict(), tmp_path / "pytorch_model.bin")
    encoder = kerasbert.convert.from_hf(tmp_path)
    inputs = random_inputs(encoder.config)
    np.testing.assert_allclose(encoder(inputs)["sequence_output"],
                               hf_outputs(reference, inputs).last_hidden_state.numpy(),
                               rtol=0, atol=TOLERANCE)


def test_sharded_safetensors_checkpoint(tmp_path):
    reference = save_hf_model("ElectraModel", hf_config("electra", embedding_size=16), tmp_path,
                              max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    encoder = kerasbert.convert.from_hf(tmp_path)
    inputs = random_inputs(encoder.config)
    np.testing.assert_allclose(encoder(inputs)["sequence_output"],
                               hf_outputs(reference, inputs).last_hidden_state.numpy(),
                               rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("family,model_class", [
    ("bert", "BertForMaskedLM"), ("roberta", "RobertaForMaskedLM"),
    ("albert", "AlbertForPreTraining"), ("electra", "ElectraForPreTraining"),
    ("distilbert", "DistilBertForMaskedLM"), ("modernbert", "ModernBertForMaskedLM"),
])
def test_encoder_only_import_of_head_checkpoints(family, model_class, tmp_path):
    reference = save_hf_model(model_class, hf_config(family), tmp_path)
    assert isinstance(kerasbert.convert.from_hf(tmp_path), kerasbert.models.PretrainingModel)
    encoder = kerasbert.convert.from_hf(tmp_path, encoder_only=True)
    assert isinstance(encoder, kerasbert.models.Encoder)
    base = getattr(reference, reference.base_model_prefix)
    inputs = random_inputs(encoder.config)
    np.testing.assert_allclose(encoder(inputs)["sequence_output"],
                               hf_outputs(base, inputs).last_hidden_state.numpy(),
                               rtol=0, atol=TOLERANCE)


def test_unsupported_heads_point_to_encoder_only(tmp_path):
    save_hf_model("BertForNextSentencePrediction", hf_config("bert"), tmp_path)
    with pytest.raises(kerasbert.convert.UnsupportedArchitectureError, match="encoder_only=True"):
        kerasbert.convert.from_hf(tmp_path)
    assert isinstance(kerasbert.convert.from_hf(tmp_path, encoder_only=True),
                      kerasbert.models.Encoder)
