"""SentencePiece tokenizer: ALBERT's tokenization in-graph, identical to `sentencepiece` and to
transformers' `AlbertTokenizer`, with clear errors."""

import gzip
import json
import re
import shutil
import unicodedata

import keras
import numpy as np
import pytest
import sentencepiece
import tensorflow as tf
import transformers

from kerasbert.data import demo
from kerasbert.tokenizers.base import VocabularyError
from kerasbert.tokenizers.sentence_piece import (
    SentencePieceModelError, SentencePieceTokenizer, is_digit_comma_piece,
    load_sentence_piece_tokenizer, parse_model_proto, penalize_digit_comma_pieces)
from kerasbert.tokenizers.sentence_piece_training import train_sentence_piece
from kerasbert.tokenizers.text_files import iterate_lines
from tests.tokenizer_cases import ADVERSARIAL_TEXTS, transformers_mismatches

CORPUS_FILES = demo.pretraining_corpus_files()  # real English prose, ~18.6k lines

ALBERT_TEXTS = [
    "9,000 and 1,000,000; (1, 2) 2000, f(1,2) [1,2,3] x1,y2, 3,",
    "``Quoted,'' he said. '''Triple''' and `single` ``",
    "Crème brûlée à la façon de Noël — Ærøskøbing, Øresund, Łódź, ﬁnal ①②③",
    "ΣΑΣ ΟΔΟΣ. İstanbul ǅemal ẞ Ｆｕｌｌｗｉｄｔｈ",
    "हिन्दी कुछ पाठ, ประเทศไทย, ελληνικά",
    "tab\tnewline\nvt\x0bff\x0ccr\rfs\x1cgs\x1dus\x1fnel\x85nbsp\xa0ogham\u1680end",
    "nul\x00inside and\x00\x00twice\x00",
    "\x00",
    "\u200b\ufeff\u2060\u00ad soft hyphen zero width",
    "e\u20dd enclosing mark, a\u0301 e\u0300 combining",
    "⁇ ▁ ▁▁ ▁the underscore-like ▁ pieces",
    "\t \n \u3000 ",
    "🤗🤗🤗 " * 30,
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 10,
]

# Where transformers' AlbertTokenizer and SentencePiece (and so kerasbert) differ, see
# test_known_differences_from_transformers: transformers splits text that spells a special token
# into that token, and (keeping accents) applies the model's normalization rules to a character
# cluster of 6 bytes or more one character at a time.
SPECIAL_TOKEN_TEXTS = ["[MASK] [CLS] <pad> <unk>", "a[SEP]b"]
STACKED_MARKS = "a\u0301\u0302\u0303 stacked marks"

_WHITESPACE = re.compile("[\t\n\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")


def reference_preprocess(text, lowercase=True, keep_accents=False, remove_space=True):
    """ALBERT's preprocessing in plain Python, following transformers 5's `AlbertTokenizer`.

    Its normalizer: Replace(``) and Replace(''), NFKD + StripAccents (drops every
    Unicode mark, category M), Lowercase (per character); then WhitespaceSplit
    (Unicode White_Space, after SentencePiece's normalizer has deleted U+000B).
    """
    if remove_space:
        text = _WHITESPACE.sub(" ", text).strip(" ")
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.category(c).startswith("M"))
    if lowercase:
        text = "".join(c.lower() for c in text)
    return text


@pytest.fixture(scope="module")
def corpus_lines():
    return list(iterate_lines(CORPUS_FILES))


@pytest.fixture(scope="module")
def small_corpus(corpus_lines, tmp_path_factory):
    """A 1500-line plain text file, for quick training tests."""
    path = tmp_path_factory.mktemp("corpus") / "small.txt"
    path.write_text("".join(line + "\n" for line in corpus_lines[:1500]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained_models(tmp_path_factory):
    """{lowercase: directory holding spiece.model} for an uncased and a cased model."""
    models = {}
    for lowercase in (True, False):
        models[lowercase] = tmp_path_factory.mktemp("spiece")
        train_sentence_piece(CORPUS_FILES, vocab_size=8000, lowercase=lowercase,
                             output_dir=models[lowercase])
    return models


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def model_dir(request, trained_models):
    return trained_models[request.param], request.param


@pytest.fixture(scope="module")
def uncased(trained_models):
    """The uncased tokenizer, for tests of mechanics rather than of tokenization."""
    return load_sentence_piece_tokenizer(trained_models[True])


@pytest.fixture(scope="module")
def tokenizers(model_dir):
    """(ours, sentencepiece processor, transformers AlbertTokenizer, lowercase) on one model."""
    directory, lowercase = model_dir
    ours = load_sentence_piece_tokenizer(directory, lowercase=lowercase)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(directory / "spiece.model"))
    # Not AlbertTokenizer(vocab_file=...): in transformers 5 that keeps only the special tokens.
    reference = transformers.AlbertTokenizer.from_pretrained(str(directory),
                                                             do_lower_case=lowercase)
    assert len(reference) == ours.vocabulary_size() == 8000
    return ours, processor, reference, lowercase


def _sentencepiece_mismatches(ours, processor, texts, **options):
    mine = ours.tokenize(texts).to_list()
    theirs = [processor.encode(reference_preprocess(text, **options)) for text in texts]
    return [(text, m, t) for text, m, t in zip(texts, mine, theirs) if m != t]


@pytest.mark.slow
def test_trained_model(model_dir):
    directory, lowercase = model_dir
    model = parse_model_proto((directory / "spiece.model").read_bytes())
    assert model["pieces"][:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert model["types"][:5] == ["control", "unknown", "control", "control", "control"]
    assert model["model_type"] == "unigram" and len(model["pieces"]) == 8000
    assert [p for p in model["pieces"] if p.startswith("▁")], "no word-initial pieces"
    # Trained on text lower-cased as the tokenizer lower-cases it: no piece has a capital.
    capitals = [p for p in model["pieces"][5:] if p != "".join(c.lower() for c in p)]
    assert (capitals == []) == lowercase
    assert [path.name for path in directory.iterdir()] == ["spiece.model"]


@pytest.mark.slow
def test_identical_to_sentencepiece_on_the_whole_corpus(tokenizers, corpus_lines):
    ours, processor, _, lowercase = tokenizers
    assert _sentencepiece_mismatches(ours, processor, corpus_lines, lowercase=lowercase) == []


def test_identical_to_sentencepiece_on_adversarial_texts(tokenizers):
    ours, processor, _, lowercase = tokenizers
    texts = ADVERSARIAL_TEXTS + ALBERT_TEXTS + SPECIAL_TOKEN_TEXTS + [STACKED_MARKS]
    assert _sentencepiece_mismatches(ours, processor, texts, lowercase=lowercase) == []


@pytest.mark.parametrize("keep_accents,remove_space", [(True, True), (False, False), (True, False)])
def test_identical_to_sentencepiece_with_other_options(tokenizers, corpus_lines, keep_accents,
                                                       remove_space):
    _, processor, _, lowercase = tokenizers
    ours = SentencePieceTokenizer(processor.serialized_model_proto(), lowercase=lowercase,
                                  keep_accents=keep_accents, remove_space=remove_space)
    texts = corpus_lines[:2000] + ADVERSARIAL_TEXTS + ALBERT_TEXTS + [STACKED_MARKS]
    assert _sentencepiece_mismatches(ours, processor, texts, lowercase=lowercase,
                                     keep_accents=keep_accents, remove_space=remove_space) == []


@pytest.mark.slow
def test_identical_to_transformers(tokenizers, corpus_lines):
    ours, _, reference, _ = tokenizers
    texts = corpus_lines + ADVERSARIAL_TEXTS + ALBERT_TEXTS
    assert transformers_mismatches(ours, reference, texts) == []


def test_identical_to_transformers_keeping_accents(model_dir, corpus_lines):
    directory, lowercase = model_dir
    ours = load_sentence_piece_tokenizer(directory, lowercase=lowercase, keep_accents=True)
    reference = transformers.AlbertTokenizer.from_pretrained(
        str(directory), do_lower_case=lowercase, keep_accents=True)
    texts = corpus_lines[:2000] + ADVERSARIAL_TEXTS + ALBERT_TEXTS
    assert transformers_mismatches(ours, reference, texts) == []


def test_known_differences_from_transformers(tokenizers):
    ours, processor, reference, lowercase = tokenizers
    mine = ours.tokenize(SPECIAL_TOKEN_TEXTS).to_list()
    theirs = reference(SPECIAL_TOKEN_TEXTS, add_special_tokens=False)["input_ids"]
    assert theirs[0] == [ours.mask_token_id, ours.cls_token_id, ours.pad_token_id,
                         ours.unk_token_id]
    assert ours.mask_token_id not in mine[0] and ours.sep_token_id not in mine[1]

    # SentencePiece composes a + U+0301 to á in a+U+0301+U+0302+U+0303; transformers does not.
    proto = processor.serialized_model_proto()
    ours = SentencePieceTokenizer(proto, lowercase=lowercase, keep_accents=True)
    reference = transformers.AlbertTokenizer.from_pretrained(
        reference.name_or_path, do_lower_case=lowercase, keep_accents=True)
    mine = ours.tokenize([STACKED_MARKS]).to_list()[0]
    assert mine == processor.encode(STACKED_MARKS)
    assert mine[:2] == [ours.token_to_id("▁"), ours.unk_token_id]
    assert reference(STACKED_MARKS, add_special_tokens=False)["input_ids"][:2] == [
        ours.token_to_id("▁a"), ours.unk_token_id]


@pytest.mark.slow
def test_digit_comma_pieces_as_the_hub_tokenizer_json(model_dir, corpus_lines, tmp_path):
    """`penalize_digit_comma=True` equals transformers reading a `tokenizer.json` that
    transformers 4's AlbertConverter wrote (as the hub's ALBERT checkpoints have)."""
    from transformers.convert_slow_tokenizer import AlbertConverter

    directory, lowercase = model_dir
    from_spiece = transformers.AlbertTokenizer.from_pretrained(str(directory),
                                                               do_lower_case=lowercase)
    AlbertConverter(from_spiece).converted().save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "AlbertTokenizer", "do_lower_case": lowercase}))
    hub_like = transformers.AlbertTokenizer.from_pretrained(str(tmp_path))
    ours = load_sentence_piece_tokenizer(directory, lowercase=lowercase, penalize_digit_comma=True)
    plain = load_sentence_piece_tokenizer(directory, lowercase=lowercase)
    digit_comma = [piece for piece in ours.vocabulary if is_digit_comma_piece(piece)]
    assert digit_comma, "the trained model has no piece ending in a digit and a comma"
    texts = corpus_lines + ADVERSARIAL_TEXTS + ALBERT_TEXTS
    # Where two segmentations score exactly the same ("111" as 1+11 or 11+1), SentencePiece and
    # the tokenizers library may break the tie differently; nowhere else.
    scores = parse_model_proto(penalize_digit_comma_pieces(ours.proto))["scores"]
    for text, mine, theirs in transformers_mismatches(ours, hub_like, texts):
        assert sum(scores[i] for i in mine) == pytest.approx(sum(scores[i] for i in theirs),
                                                             abs=1e-4), text
    differ = sum(a != b for a, b in zip(ours.tokenize(texts).to_list(),
                                        plain.tokenize(texts).to_list()))
    assert differ > 10
    assert ours.vocabulary == plain.vocabulary


@pytest.mark.parametrize("max_length", [5, 8, 16, 64, 128])
def test_pair_packing_equals_transformers(tokenizers, corpus_lines, max_length):
    ours, _, reference, _ = tokenizers
    first, second = corpus_lines[:80:2], corpus_lines[1:80:2]
    first[0] = " ".join(corpus_lines[100:130])  # longer than every max_length
    second[1] = " ".join(corpus_lines[200:230])
    second[3], first[5], first[7], second[7] = "", "", "   ", "\t"
    for pair in (None, second):
        packed = ours(first, pair, max_length=max_length, truncation="longest_first")
        # transformers 5's AlbertTokenizer returns token_type_ids only when asked.
        expected = reference(first, pair, max_length=max_length, truncation="longest_first",
                             padding="max_length", return_tensors="np", return_token_type_ids=True)
        np.testing.assert_array_equal(packed["token_ids"], expected["input_ids"])
        np.testing.assert_array_equal(packed["segment_ids"], expected["token_type_ids"])
        np.testing.assert_array_equal(packed["padding_mask"], expected["attention_mask"])


def test_unpadded_packing(tokenizers):
    ours, _, reference, _ = tokenizers
    texts = ["The list is sorted.", "A much longer line of text, with a comma and 9,000 words."]
    packed = ours(texts, texts[::-1], padding="longest")
    expected = reference(texts, texts[::-1], padding="longest", return_tensors="np",
                         return_token_type_ids=True)
    for key, theirs in (("token_ids", "input_ids"), ("segment_ids", "token_type_ids"),
                        ("padding_mask", "attention_mask")):
        np.testing.assert_array_equal(packed[key], expected[theirs])


def test_special_tokens_and_vocabulary_access(tokenizers):
    ours, processor, reference, _ = tokenizers
    assert (ours.pad_token_id, ours.unk_token_id, ours.cls_token_id, ours.sep_token_id,
            ours.mask_token_id) == (0, 1, 2, 3, 4)
    assert (reference.cls_token_id, reference.sep_token_id, reference.mask_token_id) == (2, 3, 4)
    assert ours.vocabulary == [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    assert ours.id_to_token(ours.token_to_id("▁the")) == "▁the"
    with pytest.raises(ValueError, match="99999"):
        ours.id_to_token(99999)
    with pytest.raises(ValueError, match="'notapiece'"):
        ours.token_to_id("notapiece")


def test_detokenize(tokenizers, corpus_lines):
    ours, processor, reference, _ = tokenizers
    texts = corpus_lines[:300] + ALBERT_TEXTS
    ids = ours.tokenize(texts)
    decoded = [t.decode("utf-8") for t in ours.detokenize(ids).numpy()]
    assert decoded == [processor.decode(row) for row in ids.to_list()]
    assert decoded[:300] == reference.batch_decode(ids.to_list()[:300])
    padded = ours(texts[:4], max_length=32)["token_ids"]  # [CLS], [SEP], <pad> decode to nothing
    assert [t.decode() for t in ours.detokenize(padded).numpy()] == [
        processor.decode(row) for row in ours.tokenize(texts[:4])[:, :30].to_list()]


@pytest.mark.slow
def test_runs_in_tf_function_and_tf_data(uncased, corpus_lines):
    texts = corpus_lines[:30] + ALBERT_TEXTS[:2]
    eager = uncased(texts, texts[::-1], max_length=24)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def packed(first, second):
        return uncased(first, second, max_length=24)

    graph = packed(tf.constant(texts), tf.constant(texts[::-1]))
    dataset = tf.data.Dataset.from_tensor_slices((texts, texts[::-1])).batch(8).map(
        lambda a, b: uncased(a, b, max_length=24), num_parallel_calls=2)
    streamed = {key: np.concatenate([batch[key].numpy() for batch in dataset]) for key in eager}
    for key in eager:
        np.testing.assert_array_equal(graph[key], eager[key])
        np.testing.assert_array_equal(streamed[key], eager[key])


def test_get_config_round_trip_needs_no_file(model_dir, corpus_lines, tmp_path):
    directory, lowercase = model_dir
    copy = tmp_path / "spiece.model"
    shutil.copy(directory / "spiece.model", copy)
    ours = load_sentence_piece_tokenizer(copy, lowercase=lowercase, keep_accents=True,
                                         penalize_digit_comma=True, name="albert_tokenizer")
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(ours)))
    copy.unlink()
    clone = keras.saving.deserialize_keras_object(config)
    assert isinstance(clone, SentencePieceTokenizer) and clone.name == "albert_tokenizer"
    assert clone.get_config() == ours.get_config()
    assert clone.lowercase == lowercase and clone.keep_accents and clone.penalize_digit_comma
    texts = corpus_lines[:50] + ALBERT_TEXTS
    assert clone.tokenize(texts).to_list() == ours.tokenize(texts).to_list()


def test_bpe_model_identical_to_sentencepiece(small_corpus, corpus_lines):
    proto = train_sentence_piece([small_corpus], vocab_size=1000, model_type="bpe")
    ours = SentencePieceTokenizer(proto)
    assert ours.model_type == "bpe" and ours.vocabulary[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]",
                                                                 "[MASK]"]
    processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    assert _sentencepiece_mismatches(ours, processor, corpus_lines[:3000] + ALBERT_TEXTS) == []


class TestTraining:
    def test_plain_and_gzip_files_give_the_same_model(self, small_corpus, tmp_path):
        compressed = tmp_path / "small.txt.gz"
        compressed.write_bytes(gzip.compress(small_corpus.read_bytes()))
        assert (train_sentence_piece([small_corpus], vocab_size=500)
                == train_sentence_piece([compressed], vocab_size=500))

    def test_user_defined_symbols_and_progress(self, small_corpus):
        counts = []
        proto = train_sentence_piece([small_corpus], vocab_size=500, progress=counts.append,
                                     batch_size=500, user_defined_symbols=["(", ")"])
        assert parse_model_proto(proto)["pieces"][:7] == [
            "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "(", ")"]
        assert counts == [500, 500, 500]
        # SentencePiece always cuts user-defined symbols out whole; so do we. (transformers 5's
        # AlbertTokenizer built from such an spiece.model does not: see SentencePieceTokenizer.)
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        texts = small_corpus.read_text(encoding="utf-8").splitlines() + ALBERT_TEXTS
        assert _sentencepiece_mismatches(SentencePieceTokenizer(proto), processor, texts) == []

    def test_other_reserved_tokens(self, small_corpus):
        proto = train_sentence_piece([small_corpus], vocab_size=500,
                                     reserved_tokens=("[CLS]", "[SEP]", "<unk>", "[MASK]", "<pad>"))
        model = parse_model_proto(proto)
        assert model["pieces"][:5] == ["[CLS]", "[SEP]", "<unk>", "[MASK]", "<pad>"]
        assert model["unk_id"] == 2
        assert SentencePieceTokenizer(proto).cls_token_id == 0

    def test_errors(self, small_corpus, tmp_path):
        with pytest.raises(ValueError, match="vocab_size 50000 is more than .* at most"):
            train_sentence_piece([small_corpus], vocab_size=50_000)
        with pytest.raises(ValueError, match="lack the unknown token '<unk>'"):
            train_sentence_piece([small_corpus], vocab_size=500, reserved_tokens=("<pad>", "[CLS]"))
        with pytest.raises(ValueError, match="model_type"):
            train_sentence_piece([small_corpus], vocab_size=500, model_type="wordpiece")
        with pytest.raises(FileNotFoundError, match="no-such-file.txt"):
            train_sentence_piece([tmp_path / "no-such-file.txt"], vocab_size=500)


class TestBadInput:
    def test_none(self, uncased):
        with pytest.raises(TypeError, match="texts is None"):
            uncased.tokenize(None)
        with pytest.raises(TypeError, match=r"texts\[1\] is NoneType"):
            uncased.tokenize(["ok", None])
        with pytest.raises(TypeError, match=r"pair_texts\[0\] is NoneType"):
            uncased(["ok"], [None])

    def test_non_string_tensor(self, uncased):
        with pytest.raises(TypeError, match="int32 tensor"):
            uncased.tokenize(tf.constant([1, 2]))
        with pytest.raises(TypeError, match=r"texts\[0\] is int"):
            uncased.tokenize([3])

    def test_invalid_utf8(self, uncased):
        ours = uncased
        with pytest.raises(ValueError, match=r"texts\[1\] is not valid UTF-8"):
            ours.tokenize([b"fine", b"bad \xff byte"])
        graph = tf.function(lambda t: ours.tokenize(t).flat_values)
        with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
            graph(tf.constant([b"fine", b"bad \xff byte"]))
        with pytest.raises(ValueError, match=r"pair_texts\[0\] is not valid UTF-8"):
            ours(["fine"], [b"\xc3"])

    def test_missing_file(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="nothing.model"):
            load_sentence_piece_tokenizer(tmp_path / "nothing.model")
        with pytest.raises(FileNotFoundError, match="spiece.model"):
            load_sentence_piece_tokenizer(tmp_path)

    @pytest.mark.parametrize("content,reason", [
        (b"", "it is empty"),
        (b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n", "invalid protobuf data"),
        (b'{"model": {"type": "Unigram"}}', "invalid protobuf data"),
        (gzip.compress(b"some text"), "invalid protobuf data"),
        (bytes(range(256)), "invalid protobuf data"),
        (b"\x08\x01", "it has no pieces"),
    ], ids=["empty", "vocab.txt", "json", "gzip", "bytes", "other-protobuf"])
    def test_not_a_sentence_piece_model(self, tmp_path, content, reason):
        path = tmp_path / "spiece.model"
        path.write_bytes(content)
        expected = rf"{re.escape(str(path))} is not a SentencePiece model: ({reason})"
        with pytest.raises(SentencePieceModelError, match=expected):
            load_sentence_piece_tokenizer(path)

    def test_truncated_model(self, uncased, tmp_path):
        path = tmp_path / "spiece.model"
        path.write_bytes(uncased.proto[:-3])
        with pytest.raises(SentencePieceModelError, match="invalid protobuf data"):
            load_sentence_piece_tokenizer(path)

    def test_model_lacking_special_tokens(self, small_corpus, tmp_path):
        train_sentence_piece([small_corpus], vocab_size=500, reserved_tokens=("<pad>", "<unk>"),
                             output_dir=tmp_path)
        with pytest.raises(VocabularyError, match=re.escape(
                f"{tmp_path / 'spiece.model'} lacks the special token(s) "
                "['[CLS]', '[SEP]', '[MASK]']")):
            load_sentence_piece_tokenizer(tmp_path)
        with pytest.raises(VocabularyError, match=r"unk_token '<pad>' is id 0, but the model's "
                                                  r"unknown piece is '<unk>' \(id 1\)"):
            load_sentence_piece_tokenizer(tmp_path, unk_token="<pad>", cls_token="<pad>",
                                          sep_token="<pad>", mask_token="<pad>")

    def test_proto_of_the_wrong_type(self, trained_models):
        path = trained_models[True] / "spiece.model"
        with pytest.raises(TypeError, match="not str .*load_sentence_piece_tokenizer"):
            SentencePieceTokenizer(str(path))
        with pytest.raises(TypeError, match="got int"):
            SentencePieceTokenizer(5)

