"""BytePairTokenizer.tokenize_with_offsets: ids of `tokenize`, spans of Hugging Face's offsets."""

import pathlib

import pytest
import tensorflow as tf
import tokenizers
import transformers

import kerasbert.data.demo
from kerasbert.tokenizers.byte_pair import BytePairTokenizer, bytes_to_unicode
from kerasbert.tokenizers.text_files import iterate_lines
from tests.tokenizer_cases import ADVERSARIAL_TEXTS, assert_offsets_same_in_graph

# Where byte-level offsets are delicate: spaces (trimmed from spans), multi-byte characters split
# into byte tokens, special tokens, whitespace runs.
OFFSET_TEXTS = [
    "a 😀 b", "  x  ", "   ", "x\n\n  y", "<s>hi</s> <mask>  <mask>x", "Hello <mask> there",
    "é\u0301 x", "ZWJ 👩‍❤️‍💋‍👨 🏳️‍🌈 🇯🇵 👋🏿 1️⃣", "日本語のテキスト 中文",
    "a\u00a0\u00a0b \u3000c",
    "it's 1's ''s", "\U0010ffff\ue000 \x00\x01", "x" * 300 + " " + "ab" * 200,
]


@pytest.fixture(scope="module")
def vocab_dir():
    return pathlib.Path(kerasbert.data.demo.vocabulary_dir("byte_pair"))


@pytest.fixture(scope="module")
def tokenizer(vocab_dir):
    return BytePairTokenizer.from_files(vocab_dir / "vocab.json", vocab_dir / "merges.txt")


@pytest.fixture(scope="module")
def reference(vocab_dir):
    return transformers.RobertaTokenizer.from_pretrained(str(vocab_dir))


@pytest.fixture(scope="module")
def corpus_lines():
    return list(iterate_lines(kerasbert.data.demo.pretraining_corpus_files()))


def _offsets(tokenizer, texts):
    ids, starts, ends = tokenizer.tokenize_with_offsets(texts)
    return [[(token, (start, end)) for token, start, end in zip(*row)]
            for row in zip(ids.to_list(), starts.to_list(), ends.to_list())]


def _reference_offsets(reference, texts):
    encoded = reference(texts, add_special_tokens=False, return_offsets_mapping=True)
    return [[(token, tuple(span)) for token, span in zip(ids, spans)]
            for ids, spans in zip(encoded["input_ids"], encoded["offset_mapping"])]


def _mismatches(tokenizer, reference, texts):
    ours, theirs = _offsets(tokenizer, texts), _reference_offsets(reference, texts)
    return [(text, mine, hf) for text, mine, hf in zip(texts, ours, theirs) if mine != hf]


@pytest.mark.slow
def test_whole_corpus_matches_hugging_face(tokenizer, reference, corpus_lines):
    assert len(corpus_lines) > 100
    assert _mismatches(tokenizer, reference, corpus_lines) == []


def test_adversarial_texts_match_hugging_face(tokenizer, reference):
    texts = ADVERSARIAL_TEXTS + OFFSET_TEXTS
    assert _mismatches(tokenizer, reference, texts) == []


def test_ids_are_those_of_tokenize(tokenizer, corpus_lines):
    texts = corpus_lines[:300] + ADVERSARIAL_TEXTS + OFFSET_TEXTS
    ids, starts, ends = tokenizer.tokenize_with_offsets(texts)
    assert ids.to_list() == tokenizer.tokenize(texts).to_list()
    for values in (ids, starts, ends):
        assert values.dtype == tf.int32 and values.shape.rank == 2


def test_known_spans(tokenizer):
    """Byte tokens of one character all span it; spaces are trimmed, all-space tokens empty."""
    text = "a 😀 b"
    ids, starts, ends = (t.to_list()[0] for t in tokenizer.tokenize_with_offsets([text]))
    spans = [(tokenizer.id_to_token(i), (s, e)) for i, s, e in zip(ids, starts, ends)]
    emoji = [span for token, span in spans if token in "ðŁĺĢ"]
    assert len(emoji) == 4 and set(emoji) == {(2, 3)}
    assert ("Ġb", (4, 5)) in spans and spans[0] == ("a", (0, 1))
    assert all(e == s for token, (s, e) in spans if token == "Ġ")


def test_in_tf_function_and_tf_data(tokenizer, corpus_lines):
    texts = corpus_lines[:50] + ["a 😀 b", ""]
    assert_offsets_same_in_graph(tokenizer, texts)


def test_squad_style_answer_span(tokenizer):
    """A character span of the context -> the tokens covering it -> their text."""
    context = "The Eiffel Tower, in Paris, was completed in 1889 for the World's Fair. 🗼"
    for answer in ["Eiffel Tower", "Paris", "1889", "World's Fair", "🗼"]:
        answer_start = context.index(answer)
        answer_end = answer_start + len(answer)
        ids, starts, ends = (t.to_list()[0] for t in tokenizer.tokenize_with_offsets([context]))
        covering = [i for i, (s, e) in enumerate(zip(starts, ends))
                    if s < answer_end and e > answer_start]
        first, last = covering[0], covering[-1]
        assert covering == list(range(first, last + 1))
        assert context[starts[first]:ends[last]] == answer
        decoded = tokenizer.detokenize([ids[first:last + 1]]).numpy()[0].decode("utf-8")
        assert decoded.strip() == answer


def test_vocabulary_missing_bytes(reference):
    """Characters whose byte tokens are not in the vocabulary are dropped; spans skip them.

    Known, deliberate difference: Hugging Face's BPE counts a word's offsets over the bytes it
    kept, so after a dropped character its spans shift left onto the wrong characters ("zab"
    -> "za"). Ours stay on the characters each token came from. (Vocabularies trained for
    byte-level BPE, the shipped one included, hold all 256 byte tokens and never drop any.)
    """
    byte_chars = bytes_to_unicode()
    # No tokens for the bytes of "é" (c3 a9) nor for "z".
    missing = {byte_chars[0xC3], byte_chars[0xA9], "z"}
    vocabulary = ["<s>", "<pad>", "</s>", "<unk>", "<mask>",
                  *[c for c in byte_chars if c not in missing], "ab", "Ġab"]
    tokenizer = BytePairTokenizer(vocabulary, ["a b", "Ġ ab"])
    hf = transformers.RobertaTokenizer(
        vocab={token: i for i, token in enumerate(vocabulary)}, merges=[("a", "b"), ("Ġ", "ab")])
    ab, space_ab, s, end_s = 258, 259, 0, 2
    # Nothing dropped inside a word: the same as Hugging Face.
    same = ["😀ab", "z", "ab z ab", "é ab"]
    assert _offsets(tokenizer, same) == _reference_offsets(hf, same)
    texts = ["abzab éab zz é ab", "zé<s>éab</s>z", "zab"]
    ids, starts, ends = tokenizer.tokenize_with_offsets(texts)
    assert ids.to_list() == tokenizer.tokenize(texts).to_list() == hf(
        texts, add_special_tokens=False)["input_ids"]
    assert _offsets(tokenizer, texts) == [
        [(ab, (0, 2)), (ab, (3, 5)), (space_ab, (6, 9)), (37, (10, 10)), (37, (13, 13)),
         (space_ab, (15, 17))],
        [(s, (2, 5)), (ab, (6, 8)), (end_s, (8, 12))],
        [(ab, (1, 3))]]
    # Each span holds its token's text, and otherwise only dropped characters (a token's bytes
    # around a dropped character, "Ġ" "é" "ab", span it: spans are contiguous).
    for text, row in zip(texts, _offsets(tokenizer, texts)):
        assert all(text[start:end].replace("z", "").replace("é", "") in ("ab", "")
                   for token, (start, end) in row if token in (ab, space_ab, 37))
    assert _reference_offsets(hf, texts) == [
        [(ab, (0, 2)), (ab, (2, 4)), (space_ab, (6, 7)), (37, (10, 10)), (37, (13, 13)),
         (space_ab, (15, 17))],
        [(s, (2, 5)), (ab, (5, 6)), (end_s, (8, 12))],
        [(ab, (0, 2))]]


# Where the text is edited before it is split: whitespace taken by lstrip/rstrip tokens, prefix
# spaces added to each stretch between special tokens.
EDITED_TEXTS = ["Hello <mask> there", "Hello   <mask>!", "<mask>x", "a\n<mask>", "x<mask>", "   ",
                " hello", "  hello", "hello", "<s> x</s>y", "<mask> <mask>", "x\t<mask>\u3000y", ""]


@pytest.mark.slow
@pytest.mark.parametrize("add_prefix_space", [False, True], ids=["no_prefix", "prefix_space"])
@pytest.mark.parametrize("lstrip,rstrip", [(True, False), (False, True), (True, True)],
                         ids=["lstrip", "rstrip", "both"])
def test_stripped_tokens_and_prefix_space_match_hugging_face(
        vocab_dir, corpus_lines, add_prefix_space, lstrip, rstrip):
    reference = transformers.RobertaTokenizer.from_pretrained(
        str(vocab_dir), add_prefix_space=add_prefix_space)
    reference.add_special_tokens(
        {"mask_token": tokenizers.AddedToken("<mask>", lstrip=lstrip, rstrip=rstrip)})
    tokenizer = BytePairTokenizer.from_files(
        vocab_dir / "vocab.json", vocab_dir / "merges.txt", add_prefix_space=add_prefix_space,
        lstrip_tokens=["<mask>"] if lstrip else [], rstrip_tokens=["<mask>"] if rstrip else [])
    texts = EDITED_TEXTS + OFFSET_TEXTS + ADVERSARIAL_TEXTS + corpus_lines[:500]
    assert _mismatches(tokenizer, reference, texts) == []


def test_stripped_token_at_start_with_prefix_space(vocab_dir):
    """The one known difference: Hugging Face puts the whitespace an lstrip token takes at the
    very start of the text into that token's span when add_prefix_space is on (and only then);
    ours is the token's own text, as everywhere else."""
    reference = transformers.RobertaTokenizer.from_pretrained(str(vocab_dir), add_prefix_space=True)
    reference.add_special_tokens({"mask_token": tokenizers.AddedToken("<mask>", lstrip=True)})
    tokenizer = BytePairTokenizer.from_files(
        vocab_dir / "vocab.json", vocab_dir / "merges.txt", add_prefix_space=True,
        lstrip_tokens=["<mask>"])
    text = " <mask>  <mask> y"
    mask, space_y = tokenizer.mask_token_id, tokenizer.token_to_id("Ġy")
    assert _reference_offsets(reference, [text]) == [
        [(mask, (0, 7)), (mask, (9, 15)), (space_y, (16, 17))]]
    assert _offsets(tokenizer, [text]) == [[(mask, (1, 7)), (mask, (9, 15)), (space_y, (16, 17))]]


@pytest.mark.slow
def test_edited_texts_in_tf_function_and_tf_data(vocab_dir, corpus_lines):
    tokenizer = BytePairTokenizer.from_files(
        vocab_dir / "vocab.json", vocab_dir / "merges.txt", add_prefix_space=True,
        lstrip_tokens=["<mask>"])
    assert_offsets_same_in_graph(tokenizer, corpus_lines[:20] + EDITED_TEXTS)
