"""`from_keras_hub`: keras-hub presets on disk -> kerasbert encoders computing what keras-hub does.

Each family's preset is a tiny keras-hub backbone with random weights, saved
with `save_to_preset` together with the family's keras-hub tokenizer on the
shipped demo vocabulary. The imported encoder's outputs are compared with the
keras-hub backbone's (<= 1e-5), the imported tokenizer's ids with the keras-hub
tokenizer's and preprocessor's.

The weights are redrawn with standard deviation 0.2 (keras-hub initializes
with 0.02, and zero biases, unit LayerNorm scales): pre-activations are then
large enough for the exact and the tanh GELU to differ far beyond the
tolerance (`test_the_activation_choice_matters`), and a bias or LayerNorm
parameter mapped to the wrong place shows.
"""

import dataclasses
import json
import os

import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert.convert import KerasHubPresetError, from_keras_hub
from kerasbert.convert import keras_hub_names
from kerasbert.data import demo
from kerasbert.models import build_encoder
from tests.helpers import random_inputs

TOLERANCE = 1e-5
SIZES = dict(num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=37, max_sequence_length=64)


def _tokenizer(family):
    """The family's keras-hub tokenizer on the shipped demo vocabulary of its kind."""
    if family in ("bert", "distilbert", "electra"):
        vocabulary = os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt")
        tokenizer_class = {"bert": keras_hub.models.BertTokenizer,
                           "distilbert": keras_hub.models.DistilBertTokenizer,
                           "electra": keras_hub.models.ElectraTokenizer}[family]
        # BERT and DistilBERT lower-case (keeping accents, keras-hub's default), ELECTRA keeps
        # the case.
        return tokenizer_class(vocabulary=vocabulary, lowercase=family != "electra")
    if family == "roberta":
        directory = demo.vocabulary_dir("byte_pair")
        return keras_hub.models.RobertaTokenizer(
            vocabulary=os.path.join(directory, "vocab.json"),
            merges=os.path.join(directory, "merges.txt"))
    return keras_hub.models.AlbertTokenizer(
        proto=os.path.join(demo.vocabulary_dir("sentence_piece"), "spiece.model"))


def _backbone(family, vocabulary_size):
    if family == "bert":
        return keras_hub.models.BertBackbone(vocabulary_size=vocabulary_size, dropout=0.0, **SIZES)
    if family == "roberta":
        return keras_hub.models.RobertaBackbone(vocabulary_size=vocabulary_size, dropout=0.0,
                                                **SIZES)
    if family == "albert":
        # Four layer applications over two groups of two distinct layers, E (16) != H (32).
        return keras_hub.models.AlbertBackbone(
            vocabulary_size=vocabulary_size, embedding_dim=16, num_groups=2,
            num_inner_repetitions=2, **dict(SIZES, num_layers=4))
    if family == "distilbert":
        return keras_hub.models.DistilBertBackbone(vocabulary_size=vocabulary_size, dropout=0.0,
                                                   **SIZES)
    return keras_hub.models.ElectraBackbone(vocab_size=vocabulary_size, embedding_dim=16,
                                            dropout=0.0, **SIZES)


FAMILIES = ("albert", "bert", "distilbert", "electra", "roberta")
# The activation keras-hub's layers apply, and the other GELU.
KERAS_HUB_ACTIVATION = {"bert": "gelu_new", "electra": "gelu_new", "albert": "gelu_new",
                        "roberta": "gelu", "distilbert": "gelu"}
OTHER_GELU = {"gelu": "gelu_new", "gelu_new": "gelu"}


def _randomize(backbone, seed):
    """Weights of standard deviation 0.2, LayerNorm scales around 1, every bias non-zero."""
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        value = rng.normal(0.0, 0.2, size=tuple(variable.shape))
        if variable.path.endswith("gamma"):
            value = 1.0 + value / 2
        variable.assign(value.astype("float32"))


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """family -> (keras-hub backbone, keras-hub tokenizer, preset directory with both saved)."""
    built = {}
    for seed, family in enumerate(FAMILIES):
        tokenizer = _tokenizer(family)
        backbone = _backbone(family, tokenizer.vocabulary_size())
        _randomize(backbone, seed)
        directory = tmp_path_factory.mktemp(f"keras_hub_{family}")
        backbone.save_to_preset(os.fspath(directory))
        tokenizer.save_to_preset(os.fspath(directory))
        built[family] = (backbone, tokenizer, directory)
    return built


@pytest.fixture(scope="module")
def encoders(presets):
    """family -> the kerasbert encoder imported from the family's preset."""
    return {family: from_keras_hub(directory) for family, (_, _, directory) in presets.items()}


def _keras_hub_outputs(backbone, inputs):
    """keras-hub's outputs as a dict (its RoBERTa returns the bare sequence and has no segments)."""
    outputs = backbone({name: inputs[name] for name in backbone.input})
    if not isinstance(outputs, dict):
        outputs = {"sequence_output": outputs}
    return {name: np.asarray(value) for name, value in outputs.items()}


def _max_diff(family, ours, theirs, padding_mask):
    """The largest output difference; for RoBERTa's sequence output at non-padding positions only.

    keras-hub's RoBERTa numbers positions 0..seq-1 whatever the padding, kerasbert
    gives padding tokens RoBERTa's padding position (see `from_keras_hub`). Padding
    is on the right, so real tokens get the same positions on both sides, and padding
    keys are masked out of attention, so real tokens do not see the padding rows;
    only the padding rows' own outputs differ.
    """
    diff = np.abs(ours["sequence_output"] - theirs["sequence_output"])
    if family == "roberta":
        diff = diff[padding_mask.astype(bool)]
    diffs = [float(diff.max())]
    if "pooled_output" in theirs:
        diffs.append(float(np.abs(ours["pooled_output"] - theirs["pooled_output"]).max()))
    return max(diffs)


def _compare(family, encoder, backbone, seed=0):
    inputs = random_inputs(encoder.config, batch=3, seq=12, seed=seed)
    assert (inputs["padding_mask"] == 0).any()  # right padding is exercised
    ours = {name: np.asarray(value) for name, value in encoder(inputs).items()}
    theirs = _keras_hub_outputs(backbone, inputs)
    assert sorted(ours) == sorted(theirs)
    return _max_diff(family, ours, theirs, inputs["padding_mask"])


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_encoder_matches_keras_hub(family, presets, encoders):
    backbone, _, _ = presets[family]
    encoder = encoders[family]
    assert isinstance(encoder, kerasbert.models.Encoder)
    assert encoder.config.family == family
    assert encoder.config.hidden_activation == KERAS_HUB_ACTIVATION[family]
    assert encoder.count_params() == backbone.count_params() + {
        # RoBERTa: one zero token type row and the offset rows below keras-hub's positions.
        "roberta": (1 + encoder.config.position_offset) * SIZES["hidden_dim"]}.get(family, 0)
    diff = _compare(family, encoder, backbone)
    assert diff <= TOLERANCE, f"{family}: outputs differ by {diff:.3g}"


@pytest.mark.parametrize("family", FAMILIES)
def test_the_activation_choice_matters(family, presets, encoders):
    """The same weights with the other GELU would miss keras-hub's outputs by far more than 1e-5."""
    backbone, _, _ = presets[family]
    imported = encoders[family]
    wrong = build_encoder(imported.config.replace(
        hidden_activation=OTHER_GELU[imported.config.hidden_activation]))
    wrong.set_weights(imported.get_weights())
    assert _compare(family, wrong, backbone) > 10 * TOLERANCE


def test_roberta_positions_start_past_the_zero_padding_row(presets, encoders):
    """RoBERTa's positions start at `pad_token_id + 1` (<pad> is 1); the rows below are zero."""
    config = encoders["roberta"].config
    assert (config.pad_token_id, config.position_offset, config.type_vocab_size) == (1, 2, 1)
    assert config.max_sequence_length == SIZES["max_sequence_length"]
    table = np.asarray(encoders["roberta"].embeddings.position_embedding.embeddings)
    theirs = {variable.path: np.asarray(variable) for variable in presets["roberta"][0].weights}
    theirs = theirs["embeddings/position_embedding/embeddings"]
    np.testing.assert_array_equal(table[2:], theirs)
    np.testing.assert_array_equal(table[:2], 0.0)


def test_distilbert_has_no_segments_nor_pooler_and_ignores_segment_ids(presets, encoders):
    """keras-hub's DistilBERT takes no segment ids; ours accepts them and ignores them."""
    encoder = encoders["distilbert"]
    config = encoder.config
    assert (config.type_vocab_size, config.use_pooler, config.sinusoidal_positions,
            config.position_offset, config.pad_token_id) == (0, False, False, 0, 0)
    inputs = random_inputs(config, batch=2, seq=12, seed=1)
    inputs["segment_ids"] = np.ones_like(inputs["token_ids"])
    ours = np.asarray(encoder(inputs)["sequence_output"])
    theirs = _keras_hub_outputs(presets["distilbert"][0], inputs)["sequence_output"]
    assert float(np.abs(ours - theirs).max()) <= TOLERANCE


TEXTS = ["The quick brown fox jumps over the lazy dog.",
         "Déjà vu: naïve café owners' résumés!",
         "Isn't it   3,000 dollars (or more)?"]
SECOND_TEXTS = ["A list is sorted.", "Strings are immutable.", "x"]
PREPROCESSORS = {"bert": keras_hub.models.BertTextClassifierPreprocessor,
                 "roberta": keras_hub.models.RobertaTextClassifierPreprocessor,
                 "albert": keras_hub.models.AlbertTextClassifierPreprocessor,
                 "distilbert": keras_hub.models.DistilBertTextClassifierPreprocessor}


@pytest.mark.parametrize("family", FAMILIES)
def test_tokenizer_matches_keras_hub(family, presets):
    _, keras_hub_tokenizer, directory = presets[family]
    encoder, tokenizer = from_keras_hub(directory, with_tokenizer=True)
    assert encoder.config.pad_token_id == tokenizer.pad_token_id
    assert tokenizer.vocabulary == [keras_hub_tokenizer.id_to_token(index)
                                    for index in range(keras_hub_tokenizer.vocabulary_size())]
    ours = tokenizer.tokenize(TEXTS).to_list()
    theirs = keras_hub_tokenizer(TEXTS)  # keras-hub gives eager results as Python lists
    assert ours == theirs

    if family in PREPROCESSORS:  # keras-hub has no ELECTRA preprocessor
        length = 24
        packed = tokenizer(TEXTS, SECOND_TEXTS, max_length=length)
        preprocessor = PREPROCESSORS[family](keras_hub_tokenizer, sequence_length=length)
        # x= as a keyword: a positional tuple would be read as (x, y).
        expected = preprocessor(x=(tf.constant(TEXTS), tf.constant(SECOND_TEXTS)))
        assert set(expected) <= set(packed)  # keras-hub's RoBERTa and DistilBERT: no segment_ids
        for name, value in expected.items():
            np.testing.assert_array_equal(np.asarray(packed[name]),
                                          np.asarray(value).astype("int32"), err_msg=name)
        if "segment_ids" not in expected:  # their models take none: ours are all zero, pairs too
            assert not np.asarray(packed["segment_ids"]).any()


def test_a_preset_without_a_tokenizer_gives_the_encoder_only(presets, tmp_path):
    backbone, _, _ = presets["bert"]
    backbone.save_to_preset(os.fspath(tmp_path))
    assert isinstance(from_keras_hub(tmp_path), kerasbert.models.Encoder)
    with pytest.raises(KerasHubPresetError, match="has no tokenizer"):
        from_keras_hub(tmp_path, with_tokenizer=True)


def test_a_tokenizer_setting_kerasbert_cannot_reproduce_is_a_named_error(presets, tmp_path):
    backbone, _, _ = presets["bert"]
    backbone.save_to_preset(os.fspath(tmp_path))
    keras_hub.models.BertTokenizer(
        vocabulary=os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt"),
        special_tokens_in_strings=True).save_to_preset(os.fspath(tmp_path))
    with pytest.raises(KerasHubPresetError, match="special_tokens_in_strings=True"):
        from_keras_hub(tmp_path, with_tokenizer=True)


def test_every_unpaired_variable_is_reported(presets, monkeypatch):
    """Without the pooler rows, keras-hub's pooler variables find no kerasbert variable."""
    _, _, directory = presets["bert"]
    tables = keras_hub_names.keras_hub_tables("bert")
    without_pooler = dataclasses.replace(
        tables, encoder=dataclasses.replace(tables.encoder, pooler=()))
    monkeypatch.setattr(keras_hub_names, "keras_hub_tables", lambda family: without_pooler)
    with pytest.raises(kerasbert.convert.WeightMismatchError) as error:
        from_keras_hub(directory)
    assert "'pooled_dense/bias', 'pooled_dense/kernel'" in str(error.value)


def test_a_folder_that_is_not_a_preset_is_a_named_error(tmp_path):
    with pytest.raises(KerasHubPresetError, match="no config.json"):
        from_keras_hub(tmp_path)
    with pytest.raises(KerasHubPresetError, match="does not exist"):
        from_keras_hub(tmp_path / "missing")
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 32}))
    with pytest.raises(KerasHubPresetError, match="not a keras-hub backbone config"):
        from_keras_hub(tmp_path)


def test_a_hugging_face_folder_points_to_from_hf(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(KerasHubPresetError, match="from_hf"):
        from_keras_hub(tmp_path)


def test_a_preset_without_weights_is_a_named_error(presets, tmp_path):
    _, _, directory = presets["bert"]
    (tmp_path / "config.json").write_text((directory / "config.json").read_text())
    with pytest.raises(KerasHubPresetError, match="has no weights"):
        from_keras_hub(tmp_path)


def test_an_unsupported_backbone_names_its_class(tmp_path):
    backbone = keras_hub.models.FNetBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=8)
    backbone.save_to_preset(os.fspath(tmp_path))
    with pytest.raises(kerasbert.convert.UnsupportedArchitectureError,
                       match="'FNetBackbone' is not supported"):
        from_keras_hub(tmp_path)
