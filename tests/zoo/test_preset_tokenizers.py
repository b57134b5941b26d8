"""Zoo presets know their tokenizer family, settings and special tokens."""

import pytest

from kerasbert import zoo
from kerasbert.data import demo
from kerasbert.tokenizers import BytePairTokenizer, SentencePieceTokenizer, WordPieceTokenizer


@pytest.mark.parametrize("preset,kind,lowercase", [
    ("bert_base_uncased", "wordpiece", True),
    ("bert_large_cased", "wordpiece", False),
    ("bert_base_multilingual_cased", "wordpiece", False),
    ("electra_small_discriminator", "wordpiece", True),
    ("albert_base_v2", "sentence_piece", True),
    ("roberta_large", "byte_pair", None),
])
def test_every_family_has_its_tokenizer(preset, kind, lowercase):
    spec = zoo.tokenizer_spec(preset)
    assert spec.kind == kind
    assert spec.options.get("lowercase") == lowercase


def test_every_preset_has_a_tokenizer_spec():
    for preset in zoo.list_presets():
        spec = zoo.tokenizer_spec(preset)
        assert set(spec.special_tokens) == {"pad", "unk", "cls", "sep", "mask"}


@pytest.mark.parametrize("preset,kind,cls", [
    ("bert_tiny_uncased", "wordpiece", WordPieceTokenizer),
    ("roberta_base", "byte_pair", BytePairTokenizer),
    ("albert_base_v2", "sentence_piece", SentencePieceTokenizer),
])
def test_build_tokenizer_with_the_shipped_vocabularies(preset, kind, cls):
    tokenizer = zoo.build_tokenizer(preset, demo.vocabulary_dir(kind))
    assert isinstance(tokenizer, cls)
    special = zoo.tokenizer_spec(preset).special_tokens
    packed = tokenizer(["Python is a language."], ["It is used widely."], max_length=16)
    ids = packed["token_ids"].numpy()[0]
    assert ids[0] == tokenizer.token_to_id(special["cls"])
    assert list(ids).count(tokenizer.token_to_id(special["sep"])) == (3 if kind == "byte_pair" else 2)


def test_missing_vocabulary_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing \['merges.txt'\]"):
        (tmp_path / "vocab.json").write_text("{}")
        zoo.build_tokenizer("roberta_base", tmp_path)
    with pytest.raises(ValueError, match="bert_bse_uncased"):
        zoo.tokenizer_spec("bert_bse_uncased")
