"""Token character offsets: identical to Hugging Face's `return_offsets_mapping`, in-graph."""

import json

import pytest
import tensorflow as tf
import transformers

from kerasbert.tokenizers import WordPieceTokenizer, from_hf
from kerasbert.tokenizers.base import Tokenizer
from kerasbert.tokenizers.text_files import iterate_lines
from tests.tokenizer_cases import (ADVERSARIAL_TEXTS, assert_answer_spans_map_to_tokens,
                                   assert_offsets_same_in_graph, corpus_files)


@pytest.fixture(scope="module")
def corpus_lines():
    return list(iterate_lines(corpus_files()))


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizers(request, tmp_path_factory, trained_wordpiece_dir):
    """Uncased: a vocabulary from our `train_wordpiece`; cased: from the `tokenizers` library's
    trainer (a vocabulary we did not make)."""
    lowercase = request.param
    if lowercase:
        directory = trained_wordpiece_dir(True)
    else:
        from tokenizers import BertWordPieceTokenizer

        directory = tmp_path_factory.mktemp("wordpiece_offsets")
        trainer = BertWordPieceTokenizer(lowercase=False)
        trainer.train([str(path) for path in corpus_files(plain_text_dir=directory)],
                      vocab_size=4000,
                      special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        trainer.save_model(str(directory))
        (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    reference = transformers.BertTokenizer(vocab=str(directory / "vocab.txt"),
                                           do_lower_case=lowercase)
    return from_hf(directory), reference


@pytest.fixture(scope="module")
def texts(corpus_lines):
    return corpus_lines + ADVERSARIAL_TEXTS


@pytest.fixture(scope="module")
def offsets(tokenizers, texts):
    """Our ids and (start, end) pairs, and the reference's, for the corpus and adversarial texts."""
    ours, reference = tokenizers
    ids, starts, ends = ours.tokenize_with_offsets(texts)
    for tensor in (ids, starts, ends):
        assert isinstance(tensor, tf.RaggedTensor) and tensor.dtype == tf.int32
        assert tensor.shape.rank == 2
    mine = [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())]
    expected = reference(texts, add_special_tokens=False, return_offsets_mapping=True)
    theirs = [[tuple(pair) for pair in row] for row in expected["offset_mapping"]]
    return ids.to_list(), mine, expected["input_ids"], theirs


def _mismatches(texts, mine, theirs):
    return [(text, m, t) for text, m, t in zip(texts, mine, theirs) if m != t]


@pytest.mark.slow
def test_offsets_equal_transformers(offsets, texts):
    _, mine, _, theirs = offsets
    assert _mismatches(texts, mine, theirs) == []


def test_ids_equal_tokenize_and_transformers(tokenizers, offsets, texts):
    ours, _ = tokenizers
    ids, _, reference_ids, _ = offsets
    assert ids == ours.tokenize(texts).to_list()
    assert ids == reference_ids


@pytest.mark.slow
def test_per_character_normalization_equals_normalize(tokenizers, texts):
    """What the offsets rest on: normalizing character by character gives `normalize(text)`."""
    ours, _ = tokenizers
    characters = tf.strings.unicode_split(tf.constant(texts), "UTF-8")
    per_character = tf.strings.reduce_join(
        characters.with_flat_values(ours.normalize(characters.flat_values)), axis=-1)
    whole = ours.normalize(tf.constant(texts))
    assert per_character.numpy().tolist() == whole.numpy().tolist()


@pytest.mark.parametrize("options", [dict(lowercase=True, strip_accents=False),
                                     dict(lowercase=False, strip_accents=True),
                                     dict(lowercase=True, split_cjk=False)],
                         ids=["lower-keep-accents", "cased-strip-accents", "no-cjk-split"])
def test_other_normalizer_options(tokenizers, corpus_lines, options):
    """Lower-casing that lengthens a character (İ -> i + dot), accents kept, CJK not split."""
    vocabulary = tokenizers[0].vocabulary
    ours = WordPieceTokenizer(vocabulary, **options)
    reference = transformers.BertTokenizer(
        vocab={token: i for i, token in enumerate(vocabulary)}, do_lower_case=ours.lowercase,
        strip_accents=ours.strip_accents, tokenize_chinese_chars=ours.split_cjk)
    extra = ["İSTANBUL İi", "ǅ ǈ Ǆ", "中文字符 ÀÉ", "Ω\u0301 a\u0301\u0302b"]
    texts = corpus_lines[:300] + ADVERSARIAL_TEXTS + extra
    ids, starts, ends = ours.tokenize_with_offsets(texts)
    mine = [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())]
    expected = reference(texts, add_special_tokens=False, return_offsets_mapping=True)
    theirs = [[tuple(pair) for pair in row] for row in expected["offset_mapping"]]
    assert ids.to_list() == expected["input_ids"]
    assert _mismatches(texts, mine, theirs) == []


@pytest.mark.slow
def test_runs_in_tf_function_and_tf_data(tokenizers, corpus_lines):
    ours, _ = tokenizers
    texts = corpus_lines[:64] + ["", "x" * 150]
    assert_offsets_same_in_graph(ours, texts)


def test_squad_style_answer_spans(tokenizers, corpus_lines):
    """An answer given by character offsets maps to the tokens that spell exactly that text."""
    assert_answer_spans_map_to_tokens(tokenizers[0], corpus_lines, decode_only_letters=True)


def test_base_class_names_the_tokenizer_without_offsets():
    class NoOffsets(Tokenizer):
        pass

    tokenizer = NoOffsets(["[PAD]", "[CLS]", "[SEP]"],
                          {"pad": "[PAD]", "cls": "[CLS]", "sep": "[SEP]"})
    with pytest.raises(NotImplementedError, match="NoOffsets"):
        tokenizer.tokenize_with_offsets(["text"])
