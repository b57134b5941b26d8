"""`kerasbert.tokenizers.from_hf` picks the tokenizer and its settings from a Hugging Face directory."""

import json
import re
import shutil

import pytest

from kerasbert.data import demo
import transformers

from kerasbert.tokenizers import BytePairTokenizer, SentencePieceTokenizer, WordPieceTokenizer, from_hf
from kerasbert.tokenizers.base import VocabularyError
from kerasbert.tokenizers.sentence_piece import load_sentence_piece_tokenizer
from kerasbert.tokenizers.text_files import iterate_lines
from tests.helpers import save_modernbert_tokenizer
from tests.tokenizer_cases import ADVERSARIAL_TEXTS


def test_spiece_model_with_its_settings(tmp_path):
    shutil.copy(f"{demo.vocabulary_dir('sentence_piece')}/spiece.model", tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": False, "keep_accents": True, "unk_token": "<unk>",
         "mask_token": {"content": "[MASK]", "lstrip": True}}))
    tokenizer = from_hf(tmp_path)
    assert isinstance(tokenizer, SentencePieceTokenizer)
    assert (tokenizer.lowercase, tokenizer.keep_accents, tokenizer.penalize_digit_comma) == (False, True, False)
    assert tokenizer.mask_token_id == tokenizer.token_to_id("[MASK]")


def test_vocab_txt_with_its_settings(tmp_path):
    shutil.copy(f"{demo.vocabulary_dir('wordpiece')}/vocab.txt", tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": False, "tokenize_chinese_chars": False}))
    tokenizer = from_hf(tmp_path)
    assert isinstance(tokenizer, WordPieceTokenizer)
    assert (tokenizer.lowercase, tokenizer.strip_accents, tokenizer.split_cjk) == (False, False, False)


def test_vocab_json_and_merges_with_roberta_settings(tmp_path):
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(f"{demo.vocabulary_dir('byte_pair')}/{name}", tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"add_prefix_space": False, "mask_token": {"content": "<mask>", "lstrip": True}}))
    tokenizer = from_hf(tmp_path)
    assert isinstance(tokenizer, BytePairTokenizer) and tokenizer.lstrip_tokens == ["<mask>"]


def test_reads_transformers_5_tokenizer_json_for_byte_pair(tmp_path):
    """transformers 5 saves a RoBERTa tokenizer as tokenizer.json only."""
    directory = demo.vocabulary_dir("byte_pair")
    reference = transformers.RobertaTokenizer(vocab=f"{directory}/vocab.json",
                                              merges=f"{directory}/merges.txt")
    reference.save_pretrained(tmp_path)
    assert not (tmp_path / "vocab.json").exists()
    ours = from_hf(tmp_path)
    assert isinstance(ours, BytePairTokenizer)
    texts = ADVERSARIAL_TEXTS + ["This is a <mask> test.", "Python's docs are good."]
    assert ours.tokenize(texts).to_list() == reference(texts, add_special_tokens=False)["input_ids"]


def test_shipped_vocabularies_load():
    assert isinstance(from_hf(demo.vocabulary_dir("wordpiece")), WordPieceTokenizer)
    assert isinstance(from_hf(demo.vocabulary_dir("sentence_piece")), SentencePieceTokenizer)
    assert isinstance(from_hf(demo.vocabulary_dir("byte_pair")), BytePairTokenizer)
    with pytest.raises(ValueError, match="'gpt'"):
        demo.vocabulary_dir("gpt")


@pytest.mark.parametrize("name", ["tokenizer_config.json", "tokenizer.json"])
def test_a_json_file_that_is_not_an_object_is_named(tmp_path, name):
    (tmp_path / name).write_text("[]")
    if name == "tokenizer_config.json":
        (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    path = re.escape(str(tmp_path / name))
    with pytest.raises(VocabularyError, match=f"{path} is not a Hugging Face {re.escape(name)}: "
                                              "it holds an array, not an object"):
        from_hf(tmp_path)


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        from_hf(tmp_path / "nowhere")


@pytest.fixture(scope="module")
def albert_tokenizer_json_dir(tmp_path_factory):
    """What transformers 5 writes for an ALBERT tokenizer: tokenizer.json, no spiece.model."""
    directory = tmp_path_factory.mktemp("albert_tokenizer_json")
    transformers.AlbertTokenizer.from_pretrained(
        demo.vocabulary_dir("sentence_piece")).save_pretrained(directory)
    assert not (directory / "spiece.model").exists()
    return directory


@pytest.mark.slow
def test_reads_transformers_5_tokenizer_json_for_sentence_piece(albert_tokenizer_json_dir):
    reference = transformers.AlbertTokenizer.from_pretrained(albert_tokenizer_json_dir)
    ours = from_hf(albert_tokenizer_json_dir)
    assert isinstance(ours, SentencePieceTokenizer)
    assert (ours.lowercase, ours.keep_accents, ours.model_type) == (True, False, "unigram")
    corpus = list(iterate_lines(demo.pretraining_corpus_files()))
    texts = corpus + ADVERSARIAL_TEXTS + ["In 1999, 2,000 people came.", "1,2,3, go"]
    assert ours.tokenize(texts).to_list() == reference(texts, add_special_tokens=False)["input_ids"]
    pairs = corpus[:64], corpus[64:128]
    packed = ours(*pairs, max_length=48)
    expected = reference(*pairs, max_length=48, truncation="longest_first", padding="max_length",
                         return_token_type_ids=True)
    assert packed["token_ids"].numpy().tolist() == expected["input_ids"]
    assert packed["segment_ids"].numpy().tolist() == expected["token_type_ids"]


def test_tokenizer_json_equals_the_spiece_model_it_came_from(albert_tokenizer_json_dir):
    """transformers 5 writes the pieces' scores unchanged: the rebuilt model is the original."""
    rebuilt = from_hf(albert_tokenizer_json_dir)
    original = load_sentence_piece_tokenizer(demo.vocabulary_dir("sentence_piece"))
    assert rebuilt.vocabulary == original.vocabulary
    assert rebuilt.piece_types == original.piece_types
    texts = ADVERSARIAL_TEXTS + ["Ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ ①②", "x\u00a0y\u2003z"]
    assert rebuilt.tokenize(texts).to_list() == original.tokenize(texts).to_list()


def test_unigram_tokenizer_json_errors_name_the_field(tmp_path):
    spec = {"model": {"type": "Unigram", "unk_id": 7, "vocab": [["<unk>", 0.0]]}}
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(VocabularyError, match=r"tokenizer.json: model.unk_id 7"):
        from_hf(tmp_path)
    spec["model"].update(unk_id=0, vocab=[["<unk>", 0.0], ["▁a"]])
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(VocabularyError, match=r"model.vocab\[1\]"):
        from_hf(tmp_path)


def test_reads_a_modernbert_tokenizer_json(tmp_path):
    """ModernBERT's tokenizer: byte-level BPE with BERT's special tokens ([MASK] with lstrip)
    and a `[CLS] A [SEP] B [SEP]` template: ids, pairs and truncation equal to transformers'
    fast tokenizer."""
    reference = save_modernbert_tokenizer(tmp_path)
    ours = from_hf(tmp_path)
    assert isinstance(ours, BytePairTokenizer) and ours.pair_separators == 1
    assert ours.lstrip_tokens == ["[MASK]"]
    assert ours.cls_token_id == reference.cls_token_id == len(ours.vocabulary) - 4
    first = ADVERSARIAL_TEXTS + ["This is a [MASK] test."]
    second = list(reversed(first))
    packed = ours(first, second, max_length=24, truncation="longest_first")
    expected = reference(first, second, max_length=24, truncation="longest_first",
                         padding="max_length")
    assert packed["token_ids"].numpy().tolist() == expected["input_ids"]
    assert packed["padding_mask"].numpy().tolist() == expected["attention_mask"]
    single = ours(first, max_length=16)["token_ids"].numpy().tolist()
    assert single == reference(first, max_length=16, truncation=True,
                               padding="max_length")["input_ids"]
