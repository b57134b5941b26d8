"""The zoo's presets copy the public checkpoints' architectures, to the parameter.

Every preset is checked against the public `config.json` of the checkpoint it
names, transcribed by hand below (so a wrong preset cannot pass by agreeing
with itself), and against a `transformers` model built from that config on
PyTorch's meta device (no memory spent).

Our encoders are built with deferred variables (`_shape_only_build`): Keras
creates every variable with its shape but never allocates or initializes it,
so a 350M-parameter preset builds in well under a second instead of ~5-20 s of
truncated-normal sampling. `test_shape_only_build_counts_like_a_real_build`
checks, on a real build of one preset per family, that the two agree.
"""

import contextlib
import gc

import keras
import numpy as np
import pytest

from kerasbert import EncoderConfig, zoo
from kerasbert.models import Encoder
from tests.helpers import random_inputs

# === The public checkpoints, as their config.json files on the Hugging Face Hub give them ===
# Keys are `transformers` config names. Values a config.json leaves out are the
# `transformers` defaults a model loaded from it uses (e.g. pad_token_id=0 for BERT).

_BERT_JSON = dict(max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
                  layer_norm_eps=1e-12, pad_token_id=0, hidden_dropout_prob=0.1,
                  attention_probs_dropout_prob=0.1, initializer_range=0.02)
_ROBERTA_JSON = dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                     hidden_act="gelu", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
                     eos_token_id=2, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                     initializer_range=0.02)
_ALBERT_V2_JSON = dict(vocab_size=30000, embedding_size=128, max_position_embeddings=512,
                       type_vocab_size=2, hidden_act="gelu_new", layer_norm_eps=1e-12,
                       pad_token_id=0, bos_token_id=2, eos_token_id=3, hidden_dropout_prob=0,
                       attention_probs_dropout_prob=0, num_hidden_groups=1, inner_group_num=1,
                       initializer_range=0.02)
_ELECTRA_JSON = dict(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2,
                     hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0,
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                     initializer_range=0.02)
_DISTILBERT_JSON = dict(max_position_embeddings=512, sinusoidal_pos_embds=False, n_layers=6,
                        n_heads=12, dim=768, hidden_dim=3072, dropout=0.1, attention_dropout=0.1,
                        activation="gelu", initializer_range=0.02, pad_token_id=0)
# answerdotai/ModernBERT-base's and -large's config.json (the older rope keys they were released
# with; transformers reads both).
_MODERNBERT_JSON = dict(vocab_size=50368, max_position_embeddings=8192, hidden_activation="gelu",
                        norm_eps=1e-5, norm_bias=False, attention_bias=False, mlp_bias=False,
                        pad_token_id=50283, bos_token_id=50281, eos_token_id=50282,
                        cls_token_id=50281, sep_token_id=50282, local_attention=128,
                        global_attn_every_n_layers=3, global_rope_theta=160000.0,
                        local_rope_theta=10000.0, embedding_dropout=0.0,
                        attention_dropout=0.0, mlp_dropout=0.0, initializer_range=0.02,
                        classifier_pooling="mean", classifier_activation="gelu")

# preset name -> (public checkpoint, its config.json values)
PUBLIC = {
    "bert_tiny_uncased": ("google/bert_uncased_L-2_H-128_A-2", dict(
        _BERT_JSON, vocab_size=30522, num_hidden_layers=2, hidden_size=128,
        num_attention_heads=2, intermediate_size=512)),
    "bert_mini_uncased": ("google/bert_uncased_L-4_H-256_A-4", dict(
        _BERT_JSON, vocab_size=30522, num_hidden_layers=4, hidden_size=256,
        num_attention_heads=4, intermediate_size=1024)),
    "bert_small_uncased": ("google/bert_uncased_L-4_H-512_A-8", dict(
        _BERT_JSON, vocab_size=30522, num_hidden_layers=4, hidden_size=512,
        num_attention_heads=8, intermediate_size=2048)),
    "bert_medium_uncased": ("google/bert_uncased_L-8_H-512_A-8", dict(
        _BERT_JSON, vocab_size=30522, num_hidden_layers=8, hidden_size=512,
        num_attention_heads=8, intermediate_size=2048)),
    "bert_base_uncased": ("google-bert/bert-base-uncased", dict(
        _BERT_JSON, vocab_size=30522, num_hidden_layers=12, hidden_size=768,
        num_attention_heads=12, intermediate_size=3072)),
    "bert_base_cased": ("google-bert/bert-base-cased", dict(
        _BERT_JSON, vocab_size=28996, num_hidden_layers=12, hidden_size=768,
        num_attention_heads=12, intermediate_size=3072)),
    "bert_large_uncased": ("google-bert/bert-large-uncased", dict(
        _BERT_JSON, vocab_size=30522, num_hidden_layers=24, hidden_size=1024,
        num_attention_heads=16, intermediate_size=4096)),
    "bert_large_cased": ("google-bert/bert-large-cased", dict(
        _BERT_JSON, vocab_size=28996, num_hidden_layers=24, hidden_size=1024,
        num_attention_heads=16, intermediate_size=4096)),
    "bert_base_multilingual_cased": ("google-bert/bert-base-multilingual-cased", dict(
        _BERT_JSON, vocab_size=119547, num_hidden_layers=12, hidden_size=768,
        num_attention_heads=12, intermediate_size=3072)),
    "roberta_base": ("FacebookAI/roberta-base", dict(
        _ROBERTA_JSON, num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
        intermediate_size=3072)),
    "roberta_large": ("FacebookAI/roberta-large", dict(
        _ROBERTA_JSON, num_hidden_layers=24, hidden_size=1024, num_attention_heads=16,
        intermediate_size=4096)),
    "albert_base_v2": ("albert/albert-base-v2", dict(
        _ALBERT_V2_JSON, num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
        intermediate_size=3072)),
    "albert_large_v2": ("albert/albert-large-v2", dict(
        _ALBERT_V2_JSON, num_hidden_layers=24, hidden_size=1024, num_attention_heads=16,
        intermediate_size=4096)),
    "albert_xlarge_v2": ("albert/albert-xlarge-v2", dict(
        _ALBERT_V2_JSON, num_hidden_layers=24, hidden_size=2048, num_attention_heads=16,
        intermediate_size=8192)),
    "albert_xxlarge_v2": ("albert/albert-xxlarge-v2", dict(
        _ALBERT_V2_JSON, num_hidden_layers=12, hidden_size=4096, num_attention_heads=64,
        intermediate_size=16384)),
    "electra_small_discriminator": ("google/electra-small-discriminator", dict(
        _ELECTRA_JSON, embedding_size=128, num_hidden_layers=12, hidden_size=256,
        num_attention_heads=4, intermediate_size=1024)),
    "electra_small_generator": ("google/electra-small-generator", dict(
        _ELECTRA_JSON, embedding_size=128, num_hidden_layers=12, hidden_size=256,
        num_attention_heads=4, intermediate_size=1024)),
    "electra_base_discriminator": ("google/electra-base-discriminator", dict(
        _ELECTRA_JSON, embedding_size=768, num_hidden_layers=12, hidden_size=768,
        num_attention_heads=12, intermediate_size=3072)),
    "electra_base_generator": ("google/electra-base-generator", dict(
        _ELECTRA_JSON, embedding_size=768, num_hidden_layers=12, hidden_size=256,
        num_attention_heads=4, intermediate_size=1024)),
    "electra_large_discriminator": ("google/electra-large-discriminator", dict(
        _ELECTRA_JSON, embedding_size=1024, num_hidden_layers=24, hidden_size=1024,
        num_attention_heads=16, intermediate_size=4096)),
    "electra_large_generator": ("google/electra-large-generator", dict(
        _ELECTRA_JSON, embedding_size=1024, num_hidden_layers=24, hidden_size=256,
        num_attention_heads=4, intermediate_size=1024)),
    "distilbert_base_uncased": ("distilbert/distilbert-base-uncased", dict(
        _DISTILBERT_JSON, vocab_size=30522)),
    "distilbert_base_cased": ("distilbert/distilbert-base-cased", dict(
        _DISTILBERT_JSON, vocab_size=28996)),
    "distilbert_base_multilingual_cased": ("distilbert/distilbert-base-multilingual-cased", dict(
        _DISTILBERT_JSON, vocab_size=119547)),
    "modernbert_base": ("answerdotai/ModernBERT-base", dict(
        _MODERNBERT_JSON, hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
        num_attention_heads=12)),
    "modernbert_large": ("answerdotai/ModernBERT-large", dict(
        _MODERNBERT_JSON, hidden_size=1024, intermediate_size=2624, num_hidden_layers=28,
        num_attention_heads=16)),
}

EXPECTED_NAMES = (
    [f"bert_{size}_uncased" for size in ("tiny", "mini", "small", "medium")]
    + [f"bert_{size}_{case}" for size in ("base", "large") for case in ("uncased", "cased")]
    + ["bert_base_multilingual_cased", "roberta_base", "roberta_large"]
    + [f"albert_{size}_v2" for size in ("base", "large", "xlarge", "xxlarge")]
    + [f"electra_{size}_{role}" for size in ("small", "base", "large")
       for role in ("discriminator", "generator")]
    + ["distilbert_base_uncased", "distilbert_base_cased", "distilbert_base_multilingual_cased"]
    + ["modernbert_base", "modernbert_large"]
)

# EncoderConfig field -> config.json key
FIELD_TO_JSON = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "max_positions": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "hidden_activation": "hidden_act",
    "layer_norm_epsilon": "layer_norm_eps",
    "pad_token_id": "pad_token_id",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "initializer_range": "initializer_range",
}
# DistilBERT's config.json names its fields its own way, has no token types and fixes its
# LayerNorm epsilon at 1e-12.
DISTILBERT_FIELD_TO_JSON = {
    "vocab_size": "vocab_size",
    "hidden_size": "dim",
    "num_layers": "n_layers",
    "num_heads": "n_heads",
    "intermediate_size": "hidden_dim",
    "max_positions": "max_position_embeddings",
    "hidden_activation": "activation",
    "pad_token_id": "pad_token_id",
    "dropout": "dropout",
    "attention_dropout": "attention_dropout",
    "initializer_range": "initializer_range",
    "sinusoidal_positions": "sinusoidal_pos_embds",
}
# ModernBERT's config.json keys.
MODERNBERT_FIELD_TO_JSON = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "max_positions": "max_position_embeddings",
    "hidden_activation": "hidden_activation",
    "layer_norm_epsilon": "norm_eps",
    "pad_token_id": "pad_token_id",
    "dropout": "embedding_dropout",
    "attention_dropout": "attention_dropout",
    "initializer_range": "initializer_range",
    "local_attention_window": "local_attention",
}

_TRANSFORMERS_CLASSES = {
    "bert": ("BertConfig", "BertModel"),
    "roberta": ("RobertaConfig", "RobertaModel"),
    "albert": ("AlbertConfig", "AlbertModel"),
    "electra": ("ElectraConfig", "ElectraModel"),
    "distilbert": ("DistilBertConfig", "DistilBertModel"),
    "modernbert": ("ModernBertConfig", "ModernBertModel"),
}


def _family(name):
    return name.split("_")[0]


# === Building both sides ===

@pytest.fixture
def reset_keras():
    """After a test that built only shape-only models: reset Keras' global state.

    That drops the deferred variables `_shape_only_build` registered; no garbage
    collection (it costs ~0.2 s a call), as no weights were allocated.
    """
    yield
    keras.backend.clear_session(free_memory=False)


@pytest.fixture
def free_models():
    """After a test that allocated real weights: free them and reset Keras' global state."""
    yield
    gc.collect()
    keras.backend.clear_session(free_memory=False)


@contextlib.contextmanager
def _shape_only_build():
    """Create Keras variables with their shapes but without allocating or initializing them.

    Scoped to the `with` block; the deferred variables it leaves registered in
    Keras' global state are dropped by the `reset_keras` fixture (`clear_session`).
    """
    with keras.StatelessScope(initialize_variables=False):
        yield


def _build_shapes_only(name, **overrides):
    with _shape_only_build():
        return zoo.build(name, **overrides)


def _hf_model(family, json_values):
    """The `transformers` base model for `json_values`, on the meta device."""
    import torch
    import transformers

    config_name, model_name = _TRANSFORMERS_CLASSES[family]
    config = getattr(transformers, config_name)(**json_values)
    with torch.device("meta"):
        return getattr(transformers, model_name)(config)


def _torch_count(*modules):
    return sum(p.numel() for module in modules if module is not None for p in module.parameters())


def _hf_counts(family, model):
    """Parameter counts of a `transformers` model, split the way kerasbert splits an encoder."""
    if family == "albert":
        projection = model.encoder.embedding_hidden_mapping_in
        layers = [layer for group in model.encoder.albert_layer_groups
                  for layer in group.albert_layers]
    elif family == "distilbert":
        projection, layers = None, list(model.transformer.layer)
    elif family == "modernbert":
        projection, layers = None, list(model.layers)
    else:
        projection = getattr(model, "embeddings_project", None)  # ELECTRA with E != H only
        layers = list(model.encoder.layer)
    pooler = getattr(model, "pooler", None)
    final_norm = getattr(model, "final_norm", None)  # ModernBERT's, after the stack
    counts = {
        "embeddings": _torch_count(model.embeddings, projection),
        "layers": [_torch_count(layer) for layer in layers],
        "final_norm": _torch_count(final_norm) if final_norm is not None else None,
        "pooler": _torch_count(pooler) if pooler is not None else None,
        "total": _torch_count(model),
    }
    assert counts["total"] == (counts["embeddings"] + sum(counts["layers"])
                               + (counts["final_norm"] or 0) + (counts["pooler"] or 0)), (
        "split misses some transformers weights")
    return counts


def _our_counts(encoder):
    counts = {
        "embeddings": encoder.embeddings.count_params(),
        "layers": [layer.count_params() for layer in encoder.transformer_layers],
        "final_norm": (encoder.final_layer_norm.count_params()
                       if encoder.final_layer_norm is not None else None),
        "pooler": encoder.pooler.count_params() if encoder.pooler is not None else None,
        "total": encoder.count_params(),
    }
    assert counts["total"] == (counts["embeddings"] + sum(counts["layers"])
                               + (counts["final_norm"] or 0) + (counts["pooler"] or 0)), (
        "encoder has weights outside its parts")
    return counts


def _weight_shapes(encoder):
    return sorted((weight.path, tuple(weight.shape)) for weight in encoder.weights)


# === 1. Names ===

def test_exactly_the_expected_presets():
    assert len(EXPECTED_NAMES) == len(set(EXPECTED_NAMES)) == 26
    assert zoo.list_presets() == sorted(EXPECTED_NAMES)
    assert sorted(PUBLIC) == sorted(EXPECTED_NAMES)  # this file's table covers them all


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_source_checkpoint(name):
    assert zoo.source_checkpoint(name) == PUBLIC[name][0]


# === 2. Architectures ===

@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_config_matches_public_config_json(name):
    json_values = PUBLIC[name][1]
    config = zoo.get_config(name)
    assert isinstance(config, EncoderConfig)
    family = _family(name)
    if family == "modernbert":
        expected = {field: json_values[key] for field, key in MODERNBERT_FIELD_TO_JSON.items()}
        expected.update(family=family, embedding_size=json_values["hidden_size"],
                        type_vocab_size=0, use_pooler=False, gated_mlp=True, pre_norm=True,
                        use_bias=False, rotary_theta=json_values["global_rope_theta"],
                        local_rotary_theta=json_values["local_rope_theta"],
                        global_attention_every=json_values["global_attn_every_n_layers"])
        assert {field: getattr(config, field) for field in expected} == expected
        return
    if family == "distilbert":
        expected = {field: json_values[key] for field, key in DISTILBERT_FIELD_TO_JSON.items()}
        expected.update(family=family, embedding_size=json_values["dim"], type_vocab_size=0,
                        layer_norm_epsilon=1e-12, position_offset=0, use_pooler=False)
        assert {field: getattr(config, field) for field in expected} == expected
        return
    expected = {field: json_values[key] for field, key in FIELD_TO_JSON.items()}
    expected["family"] = family
    # BERT and RoBERTa have no embedding_size: their embeddings are hidden_size wide.
    expected["embedding_size"] = json_values.get("embedding_size", json_values["hidden_size"])
    # RoBERTa numbers positions from pad_token_id + 1; the others from 0.
    expected["position_offset"] = json_values["pad_token_id"] + 1 if family == "roberta" else 0
    expected["num_hidden_groups"] = json_values.get("num_hidden_groups", 1)
    expected["inner_group_num"] = json_values.get("inner_group_num", 1)
    expected["use_pooler"] = family != "electra"  # ElectraModel has no pooler
    actual = {field: getattr(config, field) for field in expected}
    assert actual == expected


@pytest.mark.usefixtures("reset_keras")
@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_parameter_counts_match_transformers(name):
    family = _family(name)
    expected = _hf_counts(family, _hf_model(family, PUBLIC[name][1]))
    encoder = _build_shapes_only(name)
    assert isinstance(encoder, Encoder)
    actual = _our_counts(encoder)
    assert actual["embeddings"] == expected["embeddings"]
    assert actual["layers"] == expected["layers"]  # ALBERT: one shared layer on both sides
    assert actual["pooler"] == expected["pooler"]  # None for ELECTRA on both sides
    assert actual["final_norm"] == expected["final_norm"]  # ModernBERT's only
    assert actual["total"] == expected["total"]
    if family in ("electra", "distilbert", "modernbert"):
        assert encoder.pooler is None
        assert "pooled_output" not in encoder.output
    else:
        assert encoder.pooler is not None


@pytest.mark.usefixtures("reset_keras")
def test_published_distilbert_base_counts():
    """66M against BERT-base's 110M (Sanh et al., 2019): no token types, no pooler, 6 layers."""
    model = _hf_model("distilbert", PUBLIC["distilbert_base_uncased"][1])
    assert _torch_count(model) == 66_362_880
    encoder = _build_shapes_only("distilbert_base_uncased")
    assert encoder.embeddings.count_params() == 30522 * 768 + 512 * 768 + 2 * 768
    assert encoder.count_params() == 66_362_880


@pytest.mark.usefixtures("reset_keras")
def test_published_bert_base_counts():
    model = _hf_model("bert", PUBLIC["bert_base_uncased"][1])
    assert _torch_count(model.embeddings) == 23_837_184
    assert _torch_count(model.encoder) == 85_054_464
    assert _torch_count(model) == 109_482_240

    encoder = _build_shapes_only("bert_base_uncased")
    assert encoder.embeddings.count_params() == 23_837_184
    assert len(encoder.transformer_layers) == 12
    assert sum(layer.count_params() for layer in encoder.transformer_layers) == 85_054_464
    assert encoder.pooler.count_params() == 768 * 768 + 768
    assert encoder.count_params() == 109_482_240


@pytest.mark.usefixtures("reset_keras")
def test_published_albert_base_v2_counts():
    """The projection belongs to `embeddings` in kerasbert but to `encoder` in `transformers`."""
    model = _hf_model("albert", PUBLIC["albert_base_v2"][1])
    projection = model.encoder.embedding_hidden_mapping_in
    assert _torch_count(model.embeddings, projection) == 4_005_120
    assert _torch_count(model.encoder) == 7_186_944  # projection + the one shared layer

    encoder = _build_shapes_only("albert_base_v2")
    assert encoder.embeddings.count_params() == 4_005_120
    assert len(encoder.transformer_layers) == 1
    assert encoder.embeddings.projection.count_params() == 128 * 768 + 768
    assert (encoder.embeddings.projection.count_params()
            + encoder.transformer_layers[0].count_params()) == 7_186_944
    assert encoder.count_params() == 11_683_584


# One small preset per family (and ELECTRA's projection): shape-only and real builds agree.
@pytest.mark.slow
@pytest.mark.usefixtures("free_models")
@pytest.mark.parametrize("name", ["bert_tiny_uncased", "roberta_base", "albert_base_v2",
                                  "electra_small_discriminator"])
def test_shape_only_build_counts_like_a_real_build(name):
    deferred = _build_shapes_only(name)
    deferred_counts, deferred_shapes = _our_counts(deferred), _weight_shapes(deferred)
    del deferred
    keras.backend.clear_session(free_memory=False)

    real = zoo.build(name)
    assert _our_counts(real) == deferred_counts
    assert _weight_shapes(real) == deferred_shapes
    config = real.config
    token_table = real.token_embedding.embeddings
    assert tuple(token_table.shape) == (config.vocab_size, config.embedding_size)
    assert float(keras.ops.max(keras.ops.abs(token_table))) > 0  # really initialized


# === 3. Overrides and unknown names ===

@pytest.mark.slow
@pytest.mark.usefixtures("free_models")
@pytest.mark.parametrize("name", ["bert_base_uncased", "roberta_base", "albert_base_v2",
                                  "electra_base_discriminator", "electra_small_generator"])
def test_build_overrides_give_a_smaller_valid_encoder(name):
    family = _family(name)
    preset = zoo.get_config(name)
    hidden_size = 8 * preset.num_heads  # keeps each preset's head count
    overrides = dict(num_layers=2, hidden_size=hidden_size)
    encoder = zoo.build(name, **overrides, output_hidden_states=True)

    config = encoder.config
    if family in ("bert", "roberta"):  # their embeddings follow the hidden size
        overrides["embedding_size"] = hidden_size
    assert config == preset.replace(**overrides)
    assert zoo.get_config(name) == preset  # the preset itself is untouched
    assert len(encoder.transformer_layers) == (1 if family == "albert" else 2)
    # ELECTRA keeps its public embedding size, so now needs a projection to the hidden size.
    assert (encoder.embeddings.projection is not None) == (family in ("albert", "electra"))

    # The same change on the public config gives a transformers model of the same size.
    json_values = dict(PUBLIC[name][1], num_hidden_layers=2, hidden_size=hidden_size)
    assert _our_counts(encoder) == _hf_counts(family, _hf_model(family, json_values))

    inputs = random_inputs(config, batch=2, seq=6)
    outputs = encoder(inputs)
    assert tuple(outputs["sequence_output"].shape) == (2, 6, hidden_size)
    assert len(outputs["hidden_states"]) == 3
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(outputs["sequence_output"])))
    if family == "electra":
        assert "pooled_output" not in outputs
    else:
        assert tuple(outputs["pooled_output"].shape) == (2, hidden_size)


@pytest.mark.usefixtures("reset_keras")
@pytest.mark.parametrize("name", ["bert_base_uncased", "roberta_base"])
def test_hidden_size_override_keeps_bert_and_roberta_unprojected(name):
    family = _family(name)
    encoder = _build_shapes_only(name, num_layers=2, hidden_size=96)
    json_values = dict(PUBLIC[name][1], num_hidden_layers=2, hidden_size=96)
    assert encoder.config.embedding_size == 96
    assert encoder.embeddings.projection is None
    assert _our_counts(encoder) == _hf_counts(family, _hf_model(family, json_values))


@pytest.mark.usefixtures("reset_keras")
def test_build_passes_name_on_to_the_encoder():
    with _shape_only_build():
        encoder = zoo.build("bert_tiny_uncased", name="my_encoder")
    assert encoder.name == "my_encoder"


def test_build_rejects_bad_overrides():
    with pytest.raises(ValueError, match="num_layers"):
        zoo.build("bert_tiny_uncased", num_layers=0)
    with pytest.raises(ValueError, match="hiden_size"):
        zoo.build("bert_tiny_uncased", hiden_size=64)
    with pytest.raises(ValueError, match="divisible"):
        zoo.build("bert_tiny_uncased", hidden_size=129)


@pytest.mark.parametrize("function", [zoo.build, zoo.get_config, zoo.source_checkpoint],
                         ids=lambda function: function.__name__)
@pytest.mark.parametrize("typo,close_match", [
    ("bert_bse_uncased", "bert_base_uncased"),
    ("roberta-large", "roberta_large"),
    ("albert_base_v1", "albert_base_v2"),
    ("electra_small_discriminater", "electra_small_discriminator"),
])
def test_unknown_preset_names_suggest_close_matches(function, typo, close_match):
    with pytest.raises(zoo.UnknownPresetError) as raised:
        function(typo)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, KeyError)
    message = str(raised.value)
    assert repr(typo) in message
    assert close_match in message.split("Available presets:")[0]  # suggested, not just listed


def test_unknown_preset_error_is_catchable_as_key_and_value_error():
    with pytest.raises(KeyError):
        zoo.get_config("gpt2")
    with pytest.raises(ValueError, match="Unknown preset 'gpt2'"):
        zoo.build("gpt2")
