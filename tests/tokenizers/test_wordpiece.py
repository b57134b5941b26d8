"""WordPiece tokenizer: identical to Hugging Face's BERT tokenizer, in-graph, with clear errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import transformers

from kerasbert.tokenizers import VocabularyError, WordPieceTokenizer, from_hf
from kerasbert.tokenizers.text_files import iterate_lines
from tests.tokenizer_cases import ADVERSARIAL_TEXTS, corpus_files, transformers_mismatches


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def vocab_dir(request, trained_wordpiece_dir):
    return trained_wordpiece_dir(request.param), request.param


@pytest.fixture(scope="module")
def tokenizers(vocab_dir):
    directory, lowercase = vocab_dir
    ours = from_hf(directory)
    assert isinstance(ours, WordPieceTokenizer) and ours.lowercase == lowercase
    reference = transformers.BertTokenizer(vocab=str(directory / "vocab.txt"), do_lower_case=lowercase)
    return ours, reference


@pytest.fixture(scope="module")
def corpus_lines():
    return list(iterate_lines(corpus_files()))


@pytest.mark.slow
def test_trained_vocabulary(vocab_dir):
    directory, _ = vocab_dir
    vocabulary = (directory / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert vocabulary[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 1000 < len(vocabulary) <= 4000 and len(set(vocabulary)) == len(vocabulary)
    assert any(token.startswith("##") for token in vocabulary)


def test_identical_ids_on_the_whole_corpus(tokenizers, corpus_lines):
    ours, reference = tokenizers
    assert transformers_mismatches(ours, reference, corpus_lines) == []


def test_identical_ids_on_adversarial_texts(tokenizers):
    ours, reference = tokenizers
    assert transformers_mismatches(ours, reference, ADVERSARIAL_TEXTS) == []


def test_greek_final_sigma_is_lowered_like_transformers(tmp_path):
    """ICU lower-cases a final Σ to ς; Hugging Face, character by character, to σ."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "οδος", "οδοσ", "σ", "ς"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    reference = transformers.BertTokenizer(vocab=str(tmp_path / "vocab.txt"), do_lower_case=True)
    ours = from_hf(tmp_path)
    texts = ["ΟΔΟΣ", "Σ ς σ", "οδος ΟΔΟΣ"]
    assert transformers_mismatches(ours, reference, texts) == []
    assert ours.tokenize(["ΟΔΟΣ"]).to_list() == [[6]]


@pytest.mark.slow
def test_identical_ids_with_a_vocabulary_from_the_tokenizers_library(tmp_path, corpus_lines):
    """A vocabulary we did not make: trained by Hugging Face's `tokenizers`."""
    from tokenizers import BertWordPieceTokenizer

    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train([str(path) for path in corpus_files(plain_text_dir=tmp_path)], vocab_size=3000,
                  special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    trainer.save_model(str(tmp_path))
    reference = transformers.BertTokenizer(vocab=str(tmp_path / "vocab.txt"), do_lower_case=True)
    ours = from_hf(tmp_path)
    assert transformers_mismatches(ours, reference, corpus_lines + ADVERSARIAL_TEXTS) == []


@pytest.mark.parametrize("max_length", [6, 9, 16, 64])
def test_packing_equals_transformers(tokenizers, corpus_lines, max_length):
    ours, reference = tokenizers
    first, second = corpus_lines[:40:2], corpus_lines[1:40:2]
    second[3], first[5] = "", ""
    for pair in (None, second):
        packed = ours(first, pair, max_length=max_length, truncation="longest_first")
        expected = reference(first, pair, max_length=max_length, truncation="longest_first",
                             padding="max_length", return_tensors="np")
        np.testing.assert_array_equal(packed["token_ids"], expected["input_ids"])
        np.testing.assert_array_equal(packed["segment_ids"], expected["token_type_ids"])
        np.testing.assert_array_equal(packed["padding_mask"], expected["attention_mask"])


def test_longest_first_for_every_length_combination(tokenizers):
    """Exhaustive lengths: one token per word, so a text of n words has n tokens."""
    ours, reference = tokenizers
    word = "the"
    assert len(ours.tokenize([word]).to_list()[0]) == 1
    lengths = [(a, b) for a in range(0, 13) for b in range(0, 13)]
    first = [" ".join([word] * a) for a, _ in lengths]
    second = [" ".join([word] * b) for _, b in lengths]
    for max_length in (5, 8, 11, 14):
        packed = ours(first, second, max_length=max_length, truncation="longest_first")
        expected = reference(first, second, max_length=max_length, truncation="longest_first",
                             padding="max_length", return_tensors="np")
        np.testing.assert_array_equal(packed["token_ids"], expected["input_ids"])
        np.testing.assert_array_equal(packed["segment_ids"], expected["token_type_ids"])


def test_only_second_equals_transformers(tokenizers):
    ours, reference = tokenizers
    first = ["the the", "the"]
    second = ["the " * 20, "the the"]
    packed = ours(first, second, max_length=10, truncation="only_second")
    expected = reference(first, second, max_length=10, truncation="only_second",
                         padding="max_length", return_tensors="np")
    np.testing.assert_array_equal(packed["token_ids"], expected["input_ids"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="first text alone exceeds"):
        ours(["the " * 20], ["the"], max_length=10, truncation="only_second")


def test_round_robin(tokenizers):
    ours, _ = tokenizers
    packed = ours(["the " * 9, "the", "the " * 9], ["the " * 9, "the " * 9, "the"], max_length=10,
                  truncation="round_robin")
    segments = packed["segment_ids"].numpy()
    real = packed["padding_mask"].numpy().astype(bool)
    first_lengths = ((segments == 0) & real).sum(axis=1) - 2  # minus [CLS] and [SEP]
    second_lengths = ((segments == 1) & real).sum(axis=1) - 1
    assert first_lengths.tolist() == [4, 1, 6] and second_lengths.tolist() == [3, 6, 1]


def test_unpadded_packing_and_single_texts(tokenizers):
    ours, reference = tokenizers
    texts = ["the cat", "a much longer line of text here"]
    packed = ours(texts, padding="longest")
    expected = reference(texts, padding="longest", return_tensors="np")
    np.testing.assert_array_equal(packed["token_ids"], expected["input_ids"])
    with pytest.raises(ValueError, match="truncation"):
        ours(texts, max_length=8, truncation="longest_last")
    with pytest.raises(ValueError, match="max_length=2"):
        ours(texts, max_length=2)


def test_special_tokens_and_vocabulary_access(tokenizers):
    ours, reference = tokenizers
    assert ours.cls_token_id == reference.cls_token_id == 2
    assert (ours.sep_token_id, ours.pad_token_id, ours.unk_token_id, ours.mask_token_id) == (3, 0, 1, 4)
    assert ours.id_to_token(ours.token_to_id("the")) == "the"
    assert ours.vocabulary_size() == len(reference.get_vocab())
    with pytest.raises(ValueError, match="99999"):
        ours.id_to_token(99999)
    with pytest.raises(ValueError, match="'notavocabularyword'"):
        ours.token_to_id("notavocabularyword")


def test_detokenize_matches_transformers_decode(tokenizers, corpus_lines):
    ours, reference = tokenizers
    texts = corpus_lines[:200]
    ids = ours.tokenize(texts)
    decoded = [t.decode("utf-8") for t in ours.detokenize(ids).numpy()]
    expected = [reference.decode(row, clean_up_tokenization_spaces=False) for row in ids.to_list()]
    assert decoded == expected


@pytest.mark.slow
def test_runs_in_tf_function_and_tf_data(tokenizers, corpus_lines):
    ours, _ = tokenizers
    texts = corpus_lines[:32]
    eager = ours(texts, max_length=24)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def packed(batch):
        return ours(batch, max_length=24)

    graph = packed(tf.constant(texts))
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(8).map(lambda t: ours(t, max_length=24))
    streamed = {key: np.concatenate([batch[key].numpy() for batch in dataset]) for key in eager}
    for key in eager:
        np.testing.assert_array_equal(graph[key], eager[key])
        np.testing.assert_array_equal(streamed[key], eager[key])


def test_get_config_round_trip_needs_no_file(tokenizers, corpus_lines):
    ours, _ = tokenizers
    config = keras.saving.serialize_keras_object(ours)
    clone = keras.saving.deserialize_keras_object(config)
    assert isinstance(clone, WordPieceTokenizer)
    assert clone.get_config() == ours.get_config()
    assert clone.tokenize(corpus_lines[:50]).to_list() == ours.tokenize(corpus_lines[:50]).to_list()


class TestBadInput:
    def test_none(self, tokenizers):
        with pytest.raises(TypeError, match="texts is None"):
            tokenizers[0].tokenize(None)
        with pytest.raises(TypeError, match=r"texts\[1\] is NoneType"):
            tokenizers[0].tokenize(["ok", None])

    def test_non_string_tensor(self, tokenizers):
        with pytest.raises(TypeError, match="int32 tensor"):
            tokenizers[0].tokenize(tf.constant([1, 2]))
        with pytest.raises(TypeError, match=r"texts\[0\] is int"):
            tokenizers[0].tokenize([3])

    def test_invalid_utf8(self, tokenizers):
        with pytest.raises(ValueError, match=r"texts\[1\] is not valid UTF-8"):
            tokenizers[0].tokenize([b"fine", b"bad \xff byte"])
        graph = tf.function(lambda t: tokenizers[0].tokenize(t).flat_values)
        with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
            graph(tf.constant([b"fine", b"bad \xff byte"]))
        with pytest.raises(ValueError, match=r"pair_texts\[0\] is not valid UTF-8"):
            tokenizers[0](["fine"], [b"\xc3"])

    def test_duplicate_vocabulary_entry(self, tmp_path):
        (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nthe\n")
        with pytest.raises(VocabularyError, match=r"vocab.txt: token 'the' appears twice.*lines 6 and 8"):
            from_hf(tmp_path)

    def test_missing_special_token(self, tmp_path):
        (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[MASK]\nthe\n")
        with pytest.raises(VocabularyError, match=r"vocab.txt lacks the special token\(s\) \['\[SEP\]'\]"):
            from_hf(tmp_path)

    def test_no_tokenizer_files(self, tmp_path):
        (tmp_path / "README.md").write_text("nothing here")
        with pytest.raises(FileNotFoundError, match="vocab.txt.*README.md"):
            from_hf(tmp_path)


def test_reads_transformers_save_pretrained_output(vocab_dir, tmp_path, corpus_lines):
    """transformers 5 saves only tokenizer.json (+ tokenizer_config.json): read that too."""
    directory, lowercase = vocab_dir
    reference = transformers.BertTokenizer(vocab=str(directory / "vocab.txt"), do_lower_case=lowercase)
    reference.save_pretrained(tmp_path)
    assert not (tmp_path / "vocab.txt").exists()
    ours = from_hf(tmp_path)
    assert ours.lowercase == lowercase
    assert transformers_mismatches(ours, reference, corpus_lines[:500] + ADVERSARIAL_TEXTS) == []
