"""Byte-level BPE tokenizer (RoBERTa): identical to Hugging Face's, in-graph, with clear errors."""

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
import transformers

from kerasbert.tokenizers import VocabularyError
from kerasbert.tokenizers.byte_pair import (BytePairTokenizer, bytes_to_unicode, pre_tokenize,
                                            read_merges_txt, read_vocabulary_json)
from kerasbert.tokenizers.byte_pair_training import train_byte_pair
from kerasbert.tokenizers.text_files import iterate_lines
from tests.tokenizer_cases import ADVERSARIAL_TEXTS, corpus_files, transformers_mismatches

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

# What byte-level BPE and GPT-2's pre-tokenization regex are sensitive to, beyond the shared set.
BYTE_LEVEL_TEXTS = [
    "'s'S 's 'S ' s  's'll 'LL 're 'RE 've 'm 'd 't x's x'", "it's 1's ''s '''",
    "a  b   c    d", "a \n b\n\n c \t\t d", "\t\tx", "x\t\t", "   ", "\n", " \n ", "\r\n\r\n",
    "a\u00a0\u00a0b \u00a0c\u3000\u3000d\u2028e\x85f\x1cg\x1fh",
    "NUL\x00inside \x00\x00 \x01\x02\x03 ÿþ \xff\xfe", "word1234 1234word 12 345 ٣٤ ①",
    "<mask> <s></s><pad><unk> a<mask>b <mask>  <mask>\n<s> x", "<<s>> </s< <mas <mask",
    "Cyrillic \u1c89\u1c8a Garay \U00010d40\U00010d4a\U00010d65 Kawi \U00011f00 Tulu \U00011380",
    "ZWJ 👩‍❤️‍💋‍👨 🏳️‍🌈 flags 🇯🇵🇺🇸 skin 👋🏿 keycap 1️⃣",
    "Devanagari क्षत्रिय ज्ञान Arabic لا إله بِسْمِ اللَّهِ",
    "x" * 300 + " " + "ab" * 200, "\u0301\u0301\u0301", "\U0010ffff\ue000",
]


@pytest.fixture(scope="module")
def corpus_lines():
    return list(iterate_lines(corpus_files()))


@pytest.fixture(scope="module", params=["kerasbert", "tokenizers"])
def vocab_dir(request, tmp_path_factory):
    """A 2000-token vocabulary trained on the demo corpus: by us, or by HF's `tokenizers`."""
    directory = tmp_path_factory.mktemp(f"byte_pair_{request.param}")
    if request.param == "kerasbert":
        train_byte_pair(corpus_files(), vocab_size=2000, output_dir=directory)
    else:
        from tokenizers import ByteLevelBPETokenizer

        trainer = ByteLevelBPETokenizer()
        trainer.train([str(path) for path in corpus_files(plain_text_dir=directory)],
                      vocab_size=2000, special_tokens=SPECIALS)
        trainer.save_model(str(directory))
    return directory


@pytest.fixture(scope="module")
def tokenizers(vocab_dir):
    ours = BytePairTokenizer.from_files(vocab_dir / "vocab.json", vocab_dir / "merges.txt")
    reference = transformers.RobertaTokenizer.from_pretrained(str(vocab_dir))
    return ours, reference


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A 600-token vocabulary trained by us on one corpus shard."""
    return train_byte_pair(corpus_files()[:1], vocab_size=600,
                           output_dir=tmp_path_factory.mktemp("byte_pair_small"))


@pytest.fixture(scope="module")
def small_tokenizer(small_vocab):
    return BytePairTokenizer.from_files(*small_vocab)


def test_trained_vocabulary(small_vocab, tmp_path):
    vocab_path, merges_path = small_vocab
    vocabulary = read_vocabulary_json(vocab_path)
    merges = read_merges_txt(merges_path)
    assert vocabulary[:5] == SPECIALS and vocabulary[5:261] == bytes_to_unicode()
    assert len(vocabulary) == 600 and len(merges) == 600 - 261
    assert open(merges_path, encoding="utf-8").readline() == "#version: 0.2\n"
    tokens = set(vocabulary)
    assert all(a in tokens and b in tokens and a + b in tokens for a, b in map(str.split, merges))
    # Trained twice, the same files; the tokenizer really uses the merges.
    again = train_byte_pair(corpus_files()[:1], vocab_size=600, output_dir=tmp_path / "again")
    assert [open(p, "rb").read() for p in again] == [open(p, "rb").read()
                                                    for p in (vocab_path, merges_path)]
    tokenizer = BytePairTokenizer.from_files(vocab_path, merges_path)
    ids = tokenizer.tokenize(["The Python documentation"]).to_list()[0]
    assert len(ids) < len("The Python documentation") and max(ids) >= 261


def test_training_options_and_errors(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("Hello HELLO hello World\n" * 20, encoding="utf-8")
    lines_read = []
    vocab_path, _ = train_byte_pair(path, vocab_size=300, lowercase=True,
                                    reserved_tokens=["[CLS]", "<unk>"], output_dir=tmp_path / "out",
                                    progress=lines_read.append, batch_size=8)
    assert lines_read == [8, 8, 4]
    vocabulary = read_vocabulary_json(vocab_path)
    assert vocabulary[:2] == ["[CLS]", "<unk>"] and "hello" in vocabulary
    assert not any("H" in token for token in vocabulary[258:])
    with pytest.raises(ValueError, match="smaller than the 5 reserved and 256 byte"):
        train_byte_pair(path, vocab_size=200)
    with pytest.raises(ValueError, match="'<s>' is listed twice"):
        train_byte_pair(path, vocab_size=300, reserved_tokens=["<s>", "<s>"])
    with pytest.raises(ValueError, match="'a' is one of the 256 byte tokens"):
        train_byte_pair(path, vocab_size=300, reserved_tokens=["a"])
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        train_byte_pair(tmp_path / "missing.txt", vocab_size=300)


@pytest.mark.slow
def test_identical_ids_on_the_whole_corpus(tokenizers, corpus_lines):
    ours, reference = tokenizers
    assert transformers_mismatches(ours, reference, corpus_lines) == []


def test_identical_ids_on_adversarial_texts(tokenizers):
    ours, reference = tokenizers
    assert transformers_mismatches(ours, reference, ADVERSARIAL_TEXTS + BYTE_LEVEL_TEXTS) == []


@pytest.mark.slow
def test_identical_ids_with_prefix_space_and_split_special_tokens(vocab_dir, corpus_lines):
    texts = ADVERSARIAL_TEXTS + BYTE_LEVEL_TEXTS + corpus_lines[:300]
    files = vocab_dir / "vocab.json", vocab_dir / "merges.txt"
    for add_prefix_space in (False, True):
        reference = transformers.RobertaTokenizer.from_pretrained(
            str(vocab_dir), add_prefix_space=add_prefix_space)
        for split in (False, True):
            ours = BytePairTokenizer.from_files(*files, add_prefix_space=add_prefix_space,
                                                split_special_tokens=split)
            assert transformers_mismatches(ours, reference, texts, split_special_tokens=split) == []


@pytest.mark.parametrize("lstrip, rstrip", [(True, False), (False, True), (True, True)])
def test_special_tokens_that_take_surrounding_whitespace(vocab_dir, lstrip, rstrip):
    """The Hub's RoBERTa `<mask>` is AddedToken(lstrip=True): it swallows the spaces before it."""
    from tokenizers import AddedToken

    reference = transformers.RobertaTokenizer.from_pretrained(
        str(vocab_dir), mask_token=AddedToken("<mask>", lstrip=lstrip, rstrip=rstrip))
    ours = BytePairTokenizer.from_files(vocab_dir / "vocab.json", vocab_dir / "merges.txt",
                                        lstrip_tokens=["<mask>"] * lstrip,
                                        rstrip_tokens=["<mask>"] * rstrip)
    pieces = [" ", "  ", "\t", "\n", "\u00a0", "a", "x'", "!", "<mask>", "<s>", "</s>", "1"]
    rng = np.random.default_rng(0)
    texts = ["".join(rng.choice(pieces, size=rng.integers(0, 12))) for _ in range(500)]
    texts += ["The capital of France is <mask>.", "a <mask>  <mask>\n<mask> b"]
    assert transformers_mismatches(ours, reference, texts + BYTE_LEVEL_TEXTS) == []
    with pytest.raises(ValueError, match="'<nope>' in lstrip_tokens/rstrip_tokens is not one"):
        BytePairTokenizer(ours.vocabulary, ours.merges, lstrip_tokens=["<nope>"])


def test_pre_tokenization_of_every_kind_of_character():
    """Letters, numbers, whitespace and the rest, as Hugging Face's regex (Unicode 16) sees them."""
    from tokenizers import pre_tokenizers

    unicode_16 = [0x1C89, 0xA7CD, 0x105C0, 0x10D40, 0x10D4A, 0x11380, 0x13460, 0x143FA, 0x16100,
                  0x16130, 0x1CCF0, 0x1E5D0, 0x1E5F1, 0x2EBF0, 0x2EE5D]
    code_points = sorted({*range(0, 0x3400), *range(0x3400, 0x110000, 37), *unicode_16}
                         - set(range(0xD800, 0xE000)))
    texts = [f"a{c}b 1{c}2{c}{c} x {c}'s'{c}" for c in map(chr, code_points)]
    alphabet = bytes_to_unicode()
    ours = [["".join(alphabet[b] for b in word) for word in words]
            for words in pre_tokenize(texts).to_list()]
    reference = pre_tokenizers.ByteLevel(add_prefix_space=False)
    theirs = [[word for word, _ in reference.pre_tokenize_str(text)] for text in texts]
    assert [t for t, o, h in zip(texts, ours, theirs) if o != h] == []


@pytest.mark.parametrize("max_length", [8, 13, 32, 128])
def test_pair_packing_matches_transformers(tokenizers, corpus_lines, max_length):
    ours, reference = tokenizers
    firsts = corpus_lines[:400] + ADVERSARIAL_TEXTS
    extra = (BYTE_LEVEL_TEXTS + ADVERSARIAL_TEXTS)[:len(ADVERSARIAL_TEXTS)]
    seconds = corpus_lines[400:800][::-1] + extra
    packed = ours(firsts, seconds, max_length=max_length, truncation="longest_first")
    expected = reference(firsts, seconds, max_length=max_length, truncation="longest_first",
                         padding="max_length")
    np.testing.assert_array_equal(packed["token_ids"].numpy(), expected["input_ids"])
    np.testing.assert_array_equal(packed["padding_mask"].numpy(), expected["attention_mask"])
    assert not packed["segment_ids"].numpy().any()
    single = ours(firsts, max_length=max_length)
    expected = reference(firsts, max_length=max_length, truncation=True, padding="max_length")
    np.testing.assert_array_equal(single["token_ids"].numpy(), expected["input_ids"])


def test_detokenize_restores_the_text(tokenizers, corpus_lines):
    ours, reference = tokenizers
    texts = corpus_lines[:2000] + ADVERSARIAL_TEXTS + BYTE_LEVEL_TEXTS
    restored = ours.detokenize(ours.tokenize(texts)).numpy()
    assert [t for t, r in zip(texts, restored) if r.decode("utf-8") != t] == []
    # Cut inside a character, the bytes left over become U+FFFD, as in Hugging Face's decode.
    ids = ours.tokenize(["東京 😀 é", "<mask> x"]).to_list()
    rows = [ids[0][:1], ids[0][:2], ids[0][1:], ids[0][-1:], ids[1]]
    decoded = [text.decode("utf-8") for text in ours.detokenize(tf.ragged.constant(rows)).numpy()]
    assert decoded == [reference.decode(row, clean_up_tokenization_spaces=False) for row in rows]
    assert "\ufffd" in decoded[0]


def _hf_bpe(vocabulary, merges):
    from tokenizers import Tokenizer, models, pre_tokenizers

    reference = Tokenizer(models.BPE({t: i for i, t in enumerate(vocabulary)},
                                     [tuple(m.split(" ")) for m in merges]))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return reference


@pytest.mark.parametrize("merges, all_at_once", [
    (["a b", "ab a", "aba b", "b c", "c c", "cc c"], True),  # trained-like: tokens made before use
    (["ab a", "a b", "c c", "cc c", "b c"], False),          # "ab a" ranks before "ab" is made
    (["a b", "b c", "a b", "c c"], True),                     # a rule twice: its last rank counts
])
def test_merge_order_matches_hugging_face(merges, all_at_once):
    made = {a + b for a, b in map(str.split, merges)}
    vocabulary = SPECIALS + bytes_to_unicode() + sorted(made)
    ours = BytePairTokenizer(vocabulary, merges)
    assert ours._merge_all_occurrences == all_at_once
    reference = _hf_bpe(vocabulary, merges)
    texts = ["abab", "ababab abab", "abc", "abcc", "ccccc", "cccccc", "abababcccbcab", "a" * 9]
    assert ours.tokenize(texts).to_list() == [reference.encode(t).ids for t in texts]


def test_characters_missing_from_the_vocabulary_are_dropped_as_in_hugging_face():
    vocabulary = SPECIALS + [c for c in bytes_to_unicode() if c not in "bĠ"] + ["ac"]
    ours = BytePairTokenizer(vocabulary, ["a c"])
    reference = _hf_bpe(vocabulary, ["a c"])
    texts = ["abc", "a b c", "bbb", "b"]
    assert ours.tokenize(texts).to_list() == [reference.encode(t).ids for t in texts]
    assert ours.tokenize(["abc"]).to_list() == [[vocabulary.index("ac")]]


def test_cache_changes_nothing_but_speed(small_tokenizer, corpus_lines):
    ours = small_tokenizer
    texts = corpus_lines[:500] + BYTE_LEVEL_TEXTS
    expected = ours.tokenize(texts).to_list()
    uncached = BytePairTokenizer.from_config(ours.get_config())
    uncached.cache_capacity = 0
    assert uncached.tokenize(texts).to_list() == expected
    assert int(uncached._cache.size()) == 0
    assert ours.tokenize(texts).to_list() == expected  # served from the cache this time
    assert 0 < int(ours._cache.size()) <= ours.cache_capacity


@pytest.mark.slow
def test_config_round_trip(small_tokenizer):
    ours = small_tokenizer
    texts = ADVERSARIAL_TEXTS + BYTE_LEVEL_TEXTS
    config = ours.get_config()
    json.dumps(config)
    assert config["vocabulary"] == ours.vocabulary and config["merges"] == ours.merges
    for options in ({}, {"add_prefix_space": True, "split_special_tokens": True},
                    {"lstrip_tokens": ["<mask>"], "rstrip_tokens": ["<s>", "</s>"]}):
        original = BytePairTokenizer.from_config({**config, **options})
        restored = keras.saving.deserialize_keras_object(
            keras.saving.serialize_keras_object(original))
        assert isinstance(restored, BytePairTokenizer)
        assert restored.get_config() == original.get_config()
        assert restored.tokenize(texts).to_list() == original.tokenize(texts).to_list()


@pytest.mark.slow
def test_runs_in_tf_function_tf_data_and_saved_model(small_tokenizer, tmp_path):
    ours = small_tokenizer
    texts = ADVERSARIAL_TEXTS + BYTE_LEVEL_TEXTS
    eager = ours(texts, texts[::-1], max_length=24)

    graph = tf.function(lambda a, b: ours(a, b, max_length=24))(tf.constant(texts),
                                                                 tf.constant(texts[::-1]))
    dataset = tf.data.Dataset.from_tensor_slices((texts, texts[::-1])).batch(7).map(
        lambda a, b: ours(a, b, max_length=24), num_parallel_calls=2)
    batches = list(dataset.as_numpy_iterator())
    module = tf.Module()
    module.tokenizer = ours
    module.serve = tf.function(lambda t: ours(t, max_length=24),
                               input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    served = tf.saved_model.load(str(tmp_path / "saved")).serve(tf.constant(texts))

    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(graph[key].numpy(), eager[key].numpy())
        np.testing.assert_array_equal(np.concatenate([b[key] for b in batches]), eager[key].numpy())
    np.testing.assert_array_equal(served["token_ids"].numpy(),
                                  ours(texts, max_length=24)["token_ids"].numpy())


def test_bad_inputs_name_the_culprit(small_tokenizer):
    ours = small_tokenizer
    with pytest.raises(TypeError, match="texts is None"):
        ours.tokenize(None)
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        ours.tokenize(["fine", 3])
    with pytest.raises(TypeError, match="int32 tensor"):
        ours.tokenize(tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"texts\[1\] is not valid UTF-8"):
        ours.tokenize([b"fine", b"caf\xe9"])
    with pytest.raises(TypeError, match="pair_texts is None|pair_texts"):
        ours(["a"], [None])


def _write(directory, vocabulary, merges="#version: 0.2\na b\n"):
    vocab_path, merges_path = directory / "vocab.json", directory / "merges.txt"
    vocab_path.write_text(vocabulary if isinstance(vocabulary, str) else json.dumps(vocabulary),
                          encoding="utf-8")
    merges_path.write_text(merges, encoding="utf-8")
    return vocab_path, merges_path


def _good_vocabulary(**extra):
    tokens = SPECIALS + bytes_to_unicode() + ["ab"]
    return {**{token: i for i, token in enumerate(tokens)}, **extra}


@pytest.mark.parametrize("vocabulary, merges, error", [
    ("{not json", None, "vocab.json is not valid JSON"),
    ("[1, 2]", None, "must hold a JSON object"),
    ('{"<s>": 0, "a": 1, "<s>": 2}', None, "token '<s>' is listed twice (ids 0 and 2)"),
    (_good_vocabulary(ab=5), None, "tokens 'Ā' and 'ab' share the id 5"),
    (_good_vocabulary(ab=300), None, "ids must be 0..261 without gaps; 1 missing, first [261]"),
    (_good_vocabulary(ab="7"), None, "token 'ab' has id '7'"),
    ({t: i for i, t in enumerate(["<s>", "</s>", "<unk>", "<pad>"] + bytes_to_unicode())},
     "#version: 0.2\n", "lacks the special token(s) ['<mask>']"),
    (_good_vocabulary(), "#version: 0.2\na b\nzz q\n", "merges.txt line 3: merge 'zz q' uses 'zz'"),
    (_good_vocabulary(), "#version: 0.2\na b\na c\n", "line 3: merge 'a c' makes 'ac', which is"),
    (_good_vocabulary(), "#version: 0.2\na b\n\n", "line 3: expected two tokens"),
    (_good_vocabulary(), "a b c\n", "line 1: expected two tokens separated by one space"),
])
def test_bad_vocabulary_files_name_the_culprit(tmp_path, vocabulary, merges, error):
    files = _write(tmp_path, vocabulary, *([merges] if merges else []))
    with pytest.raises(VocabularyError, match=re.escape(error)):
        BytePairTokenizer.from_files(*files)


def test_missing_files_and_bad_merges_in_memory(tmp_path):
    vocab_path, merges_path = _write(tmp_path, _good_vocabulary())
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        BytePairTokenizer.from_files(tmp_path / "nowhere.json", merges_path)
    with pytest.raises(FileNotFoundError, match="nowhere.txt"):
        BytePairTokenizer.from_files(vocab_path, tmp_path / "nowhere.txt")
    vocabulary = read_vocabulary_json(vocab_path)
    with pytest.raises(VocabularyError, match=r"merges\[1\]: merge 'a zz' uses 'zz'"):
        BytePairTokenizer(vocabulary, ["a b", "a zz"])
    with pytest.raises(TypeError, match="from_files"):
        BytePairTokenizer(vocabulary, str(merges_path))
