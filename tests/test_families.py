"""Each family's record (kerasbert/families/<family>.py) is complete and consistent.

A sixth family is one new file there plus its rows in the test tables: these tests check every
record against the generic code that reads it (EncoderConfig, the heads, the zoo).
"""

import subprocess
import sys

import pytest

from kerasbert import EncoderConfig, families, zoo
from kerasbert.families.model_traits import ModelTraits, TokenizerTraits
from kerasbert.models import HEADS, TASK_MODEL_KINDS
from kerasbert.zoo.presets import PRESETS

TOKENIZER_KINDS = ("wordpiece", "byte_pair", "sentence_piece")
SPECIAL_TOKEN_ROLES = {"pad", "unk", "cls", "sep", "mask"}


@pytest.fixture(params=families.NAMES)
def family(request):
    return families.get(request.param)


def test_names_are_the_records_names_in_order():
    assert families.NAMES == ("bert", "roberta", "albert", "electra", "distilbert", "modernbert")
    assert [families.get(name).name for name in families.NAMES] == list(families.NAMES)


def test_an_unknown_family_is_named_in_the_error():
    with pytest.raises(ValueError, match=r"Unknown family 'bort'.*'bert', 'roberta'"):
        families.get("bort")
    with pytest.raises(ValueError, match=r"Unknown family \['bert'\]"):
        families.get(["bert"])


def test_record_parts_have_their_types(family):
    assert isinstance(family.model, ModelTraits)
    assert isinstance(family.tokenizer, TokenizerTraits)


def test_every_preset_validates_as_its_family(family):
    assert family.model.presets, f"{family.name} has no preset"
    for name, (source, fields) in family.model.presets.items():
        assert name.startswith(f"{family.name}_"), name
        assert isinstance(source, str) and "/" in source, (name, source)
        config = EncoderConfig.from_dict(fields)
        assert config.family == family.name, name
        assert config.family_traits is family.model


def test_zoo_presets_are_the_families_presets_in_family_order():
    names = [name for family_name in families.NAMES
             for name in families.get(family_name).model.presets]
    assert len(names) == len(set(names))
    assert list(PRESETS) == names
    assert zoo.list_presets() == sorted(names)


def test_config_defaults_follow_the_traits(family):
    config = EncoderConfig(family=family.name, vocab_size=100, hidden_size=32, num_layers=2,
                           num_heads=2, intermediate_size=64)
    assert config.use_pooler == family.model.has_pooler_by_default
    assert config.has_segment_embeddings == family.model.has_segment_embeddings
    assert config.has_embedding_projection == family.model.always_projects_embeddings
    # ALBERT's default: one group of one layer, applied num_layers times.
    assert config.num_distinct_layers == (1 if family.model.shares_layers else 2)


def test_head_traits_name_known_heads(family):
    model = family.model
    assert model.pretraining_heads and set(model.pretraining_heads) <= set(HEADS)
    assert model.has_pooler_by_default <= model.may_have_pooler
    assert set(model.summary_heads) == {"sequence_classification", "multiple_choice"}
    assert set(model.summary_heads) <= set(TASK_MODEL_KINDS)
    for head in model.summary_heads.values():
        assert head.source in ("pooled_output", "first_token")
        assert not head.reads_pooler or model.may_have_pooler
    if {"nsp", "sop"} & set(model.pretraining_heads):
        assert model.has_pooler_by_default


def test_tokenizer_traits_are_complete(family):
    tokenizer = family.tokenizer
    assert tokenizer.kind in TOKENIZER_KINDS
    assert set(tokenizer.special_tokens) == SPECIAL_TOKEN_ROLES
    assert not (tokenizer.lowercase_when_uncased and "lowercase" in tokenizer.options)


@pytest.mark.parametrize("preset, kind, options", [
    ("bert_base_uncased", "wordpiece", {"lowercase": True, "second_segment_id": 1}),
    ("bert_base_cased", "wordpiece", {"lowercase": False, "second_segment_id": 1}),
    ("roberta_base", "byte_pair", {"add_prefix_space": False, "lstrip_tokens": ["<mask>"]}),
    ("albert_base_v2", "sentence_piece", {"lowercase": True, "keep_accents": False}),
    ("electra_base_discriminator", "wordpiece", {"lowercase": True, "second_segment_id": 1}),
    ("distilbert_base_uncased", "wordpiece", {"lowercase": True, "second_segment_id": 0}),
    ("distilbert_base_cased", "wordpiece", {"lowercase": False, "second_segment_id": 0}),
])
def test_preset_tokenizer_settings_come_from_the_family(preset, kind, options):
    spec = zoo.tokenizer_spec(preset)
    assert (spec.kind, spec.options) == (kind, options)
    spec.options.clear()  # a spec is the caller's copy: the family's record is unchanged
    assert zoo.tokenizer_spec(preset).options == options


def test_families_import_without_tensorflow():
    code = ("import sys, kerasbert.families; "
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
