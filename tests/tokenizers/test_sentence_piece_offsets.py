"""SentencePiece token character offsets: Hugging Face's `return_offsets_mapping`, in-graph."""

import pytest
import sentencepiece
import tensorflow as tf
import transformers

from kerasbert.data import demo
from kerasbert.tokenizers.sentence_piece import load_sentence_piece_tokenizer
from kerasbert.tokenizers.sentence_piece_training import train_sentence_piece
from kerasbert.tokenizers.text_files import iterate_lines
from tests.tokenizer_cases import (ADVERSARIAL_TEXTS, assert_answer_spans_map_to_tokens,
                                   assert_offsets_same_in_graph)
from tests.tokenizers.test_sentence_piece import (ALBERT_TEXTS, SPECIAL_TOKEN_TEXTS,
                                                  STACKED_MARKS, reference_preprocess)

CORPUS_FILES = demo.pretraining_corpus_files()

# Lone "▁" pieces (before ")", an unknown character, ...), quote pairs, whitespace runs, text that
# SentencePiece's normalizer deletes or expands.
EXTRA_TEXTS = [
    "a ( b ) - c",
    "日本語 x 日本",
    "a \u200bb \u200b c x\u200by",
    "``double'' '''triple''' ````four```` `` '' ` '",
    "  \t``lead'' and trail``  ",
    "ﬁnal ① ＦＵＬＬ ½ ㍱ ¨",
    "x\x00y \x00z",
]


@pytest.fixture(scope="module")
def corpus_lines():
    return list(iterate_lines(CORPUS_FILES))


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizers(request, tmp_path_factory):
    """(ours, transformers AlbertTokenizer, sentencepiece processor) on a model trained here."""
    lowercase = request.param
    directory = tmp_path_factory.mktemp("spiece_offsets")
    train_sentence_piece(CORPUS_FILES, vocab_size=8000, lowercase=lowercase, output_dir=directory)
    ours = load_sentence_piece_tokenizer(directory, lowercase=lowercase)
    reference = transformers.AlbertTokenizer.from_pretrained(str(directory),
                                                             do_lower_case=lowercase)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(directory / "spiece.model"))
    return ours, reference, processor


@pytest.fixture(scope="module")
def texts(corpus_lines):
    return corpus_lines + ADVERSARIAL_TEXTS + ALBERT_TEXTS + EXTRA_TEXTS


def _offsets(tokenizer, texts):
    ids, starts, ends = tokenizer.tokenize_with_offsets(texts)
    for tensor in (ids, starts, ends):
        assert isinstance(tensor, tf.RaggedTensor) and tensor.dtype == tf.int32
        assert tensor.shape.rank == 2
    return ids.to_list(), [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())]


def _reference_offsets(reference, texts):
    expected = reference(texts, add_special_tokens=False, return_offsets_mapping=True)
    return expected["input_ids"], [[tuple(pair) for pair in row]
                                   for row in expected["offset_mapping"]]


@pytest.fixture(scope="module")
def offsets(tokenizers, texts):
    ours, reference, _ = tokenizers
    return _offsets(ours, texts) + _reference_offsets(reference, texts)


@pytest.mark.slow
def test_ids_equal_tokenize_and_transformers(tokenizers, offsets, texts):
    ours = tokenizers[0]
    ids, _, reference_ids, _ = offsets
    assert ids == ours.tokenize(texts).to_list()
    assert ids == reference_ids


def test_offsets_equal_transformers(offsets, texts):
    _, mine, _, theirs = offsets
    assert [(text, m, t) for text, m, t in zip(texts, mine, theirs) if m != t] == []


def test_word_start_marker_spans(tokenizers):
    """ "▁" is no character of the text: "▁the" spans "the", a lone "▁" the character after it
    (the word's first), as transformers reports; the " of `` or '' spans the pair's second
    character, as transformers' Replace aligns it."""
    ours = tokenizers[0]
    text = "  The ( x ) ``is'' 日本"
    ids, spans = _offsets(ours, [text])
    pieces = [ours.id_to_token(i) for i in ids[0]]
    assert [(piece, text[s:e]) for piece, (s, e) in zip(pieces, spans[0])] == [
        (pieces[0], "The"), ("▁(", "("), ("▁x", "x"), ("▁", ")"), (")", ")"),
        ('▁"', "`"), ("is", "is"), ('"', "'"), ("▁", "日"), ("<unk>", "日本")]
    assert spans[0][:2] == [(2, 5), (6, 7)]
    assert spans[0][5] == (13, 14) and spans[0][7] == (17, 18)


def _self_consistency_failures(tokenizer, processor, texts, **options):
    """Tokens whose span, preprocessed and normalized by SentencePiece, is not the piece."""
    ids, spans = _offsets(tokenizer, texts)
    failures = []
    for text, row, row_spans in zip(texts, ids, spans):
        for i, (token_id, (start, end)) in enumerate(zip(row, row_spans)):
            piece = tokenizer.id_to_token(token_id)
            assert 0 <= start < end <= len(text), (text, piece, start, end)
            if piece == "▁":  # the lone word-start marker: the next token's first character
                assert (start, end) == (row_spans[i + 1][0], row_spans[i + 1][0] + 1)
                continue
            if token_id == tokenizer.unk_token_id:
                continue
            if piece.lstrip("▁").startswith('"') and text[start - 1:start + 1] in ("``", "''"):
                start -= 1  # the " of a pair spans its second character only
            span = processor.normalize(reference_preprocess(text[start:end], **options))
            if span.replace("▁", "") == piece.replace("▁", ""):
                continue
            # A character that becomes several ("ﬁ" -> "fi") can end up in several pieces,
            # each spanning all of it.
            shared = [j for j in (i - 1, i + 1) if 0 <= j < len(row)
                      and row_spans[j][0] < end and row_spans[j][1] > start]
            if not (shared and piece.replace("▁", "") in span):
                failures.append((text, piece, text[start:end], span))
    return failures


@pytest.mark.slow
def test_spans_spell_their_pieces(tokenizers, texts):
    """Independent of transformers: each span, preprocessed, is the piece without "▁"."""
    ours, _, processor = tokenizers
    assert _self_consistency_failures(ours, processor, texts, lowercase=ours.lowercase) == []


@pytest.mark.parametrize("options", [dict(keep_accents=True), dict(remove_space=False)],
                         ids=["keep-accents", "keep-spaces"])
def test_spans_spell_their_pieces_with_other_options(tokenizers, corpus_lines, options):
    ours, _, processor = tokenizers
    other = type(ours)(ours.proto, lowercase=ours.lowercase, **options)
    texts = corpus_lines[:1000] + ADVERSARIAL_TEXTS + ALBERT_TEXTS + EXTRA_TEXTS
    ids, _ = _offsets(other, texts)
    assert ids == other.tokenize(texts).to_list()
    assert _self_consistency_failures(other, processor, texts, lowercase=ours.lowercase,
                                      **options) == []


def test_known_differences_from_transformers(tokenizers):
    ours, reference, processor = tokenizers
    # Text that spells a special token: transformers gives that token (other ids).
    ids, spans = _offsets(ours, SPECIAL_TOKEN_TEXTS)
    reference_ids, reference_spans = _reference_offsets(reference, SPECIAL_TOKEN_TEXTS)
    assert reference_spans[0][0] == (0, 6) and reference_ids[0][0] == ours.mask_token_id
    assert spans[0][0] == (0, 1) and ours.mask_token_id not in ids[0]

    # Keeping accents, where SentencePiece's normalizer composes a letter and its marks into
    # one character (a + U+0301 -> á), transformers aligns the composed character with the
    # letter alone; our span holds the marks too.
    keeping = type(ours)(ours.proto, lowercase=ours.lowercase, keep_accents=True)
    reference = transformers.AlbertTokenizer.from_pretrained(
        reference.name_or_path, do_lower_case=ours.lowercase, keep_accents=True)
    text = "a\u0301 e\u0300 o\u0308 (combining accents)"
    ids, spans = _offsets(keeping, [text])
    reference_ids, reference_spans = _reference_offsets(reference, [text])
    assert ids == reference_ids
    unknown = [i for i, token_id in enumerate(ids[0]) if token_id == ours.unk_token_id]
    assert [spans[0][i] for i in unknown] == [(0, 2), (3, 5), (6, 8)]
    assert [reference_spans[0][i] for i in unknown] == [(0, 1), (3, 4), (6, 7)]
    differing = [i for i, (m, t) in enumerate(zip(spans[0], reference_spans[0])) if m != t]
    assert differing == unknown
    # (and a cluster of 6 bytes or more, where the ids differ: see test_sentence_piece)
    ids, spans = _offsets(keeping, [STACKED_MARKS])
    assert [keeping.id_to_token(i) for i in ids[0][:2]] == ["▁", "<unk>"]
    assert spans[0][:2] == [(0, 1), (0, 4)]


@pytest.mark.slow
def test_runs_in_tf_function_and_tf_data(tokenizers, corpus_lines):
    ours = tokenizers[0]
    texts = corpus_lines[:64] + ["", " ", "``", "x" * 150] + EXTRA_TEXTS
    assert_offsets_same_in_graph(ours, texts)


@pytest.mark.slow
def test_squad_style_answer_spans(tokenizers, corpus_lines):
    """An answer given by character offsets maps to the tokens that spell exactly that text."""
    assert_answer_spans_map_to_tokens(tokenizers[0], corpus_lines)
