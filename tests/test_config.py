"""EncoderConfig validates every field and round-trips."""

import dataclasses

import pytest

from kerasbert import EncoderConfig

VALID = dict(family="bert", vocab_size=100, hidden_size=32, num_layers=2, num_heads=2,
             intermediate_size=64)


@pytest.mark.parametrize("changes,field", [
    (dict(hidden_size=30, num_heads=4), "hidden_size"),
    (dict(family="albert", num_layers=3, num_hidden_groups=2), "num_layers"),
    (dict(hidden_activation="gelu_fancy"), "hidden_activation"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(hidden_size=-32), "hidden_size"),
    (dict(num_layers=0), "num_layers"),
    (dict(intermediate_size=0), "intermediate_size"),
    (dict(embedding_size=0), "embedding_size"),
    (dict(max_positions=0), "max_positions"),
    (dict(type_vocab_size=0), "type_vocab_size"),
    (dict(num_heads=2.0), "num_heads"),
    (dict(family="gpt2"), "family"),
    (dict(pad_token_id=100), "pad_token_id"),
    (dict(pad_token_id=-1), "pad_token_id"),
    (dict(position_offset=512), "position_offset"),
    (dict(layer_norm_epsilon=0.0), "layer_norm_epsilon"),
    (dict(dropout=1.0), "dropout"),
    (dict(attention_dropout=-0.1), "attention_dropout"),
    (dict(num_hidden_groups=2, num_layers=2), "num_hidden_groups"),
    (dict(use_pooler="yes"), "use_pooler"),
])
def test_invalid_values_name_the_field(changes, field):
    with pytest.raises(ValueError, match=rf"EncoderConfig\.{field}\b"):
        EncoderConfig(**dict(VALID, **changes))


def test_defaults_and_derived_values():
    config = EncoderConfig(**VALID)
    assert config.embedding_size == 32
    assert config.head_size == 16
    assert config.use_pooler and not config.has_embedding_projection
    electra = EncoderConfig(**dict(VALID, family="electra", embedding_size=16))
    assert not electra.use_pooler and electra.has_embedding_projection
    albert = EncoderConfig(**dict(VALID, family="albert"))
    assert albert.has_embedding_projection  # ALBERT always projects, even when E == H
    roberta = EncoderConfig(**dict(VALID, family="roberta", max_positions=514, pad_token_id=1,
                                   position_offset=2))
    assert roberta.max_sequence_length == 512


def test_albert_layer_schedule():
    config = EncoderConfig(**dict(VALID, family="albert", num_layers=4, num_hidden_groups=2,
                                  inner_group_num=2))
    assert config.num_distinct_layers == 4
    assert config.layer_schedule == (0, 1, 0, 1, 2, 3, 2, 3)
    shared = EncoderConfig(**dict(VALID, family="albert", num_layers=3))
    assert shared.layer_schedule == (0, 0, 0)
    assert EncoderConfig(**VALID).layer_schedule == (0, 1)


def test_round_trip_and_replace():
    config = EncoderConfig(**dict(VALID, family="electra", embedding_size=16))
    assert EncoderConfig.from_dict(config.to_dict()) == config
    assert config.replace(num_layers=4).num_layers == 4
    with pytest.raises(ValueError, match="num_heads"):
        config.replace(num_heads=3)
    with pytest.raises(ValueError, match="no field"):
        config.replace(hidden_dim=3)
    with pytest.raises(ValueError, match="no field"):
        EncoderConfig.from_dict(dict(VALID, vocabulary_size=3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_layers = 3
