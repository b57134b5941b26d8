"""`kerasbert.tokenizers.from_hf` picks the tokenizer and its settings from a Hugging Face directory."""

import json
import shutil

import pytest

from kerasbert.data import demo
import transformers

from kerasbert.tokenizers import BytePairTokenizer, SentencePieceTokenizer, WordPieceTokenizer, from_hf
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


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        from_hf(tmp_path / "nowhere")


def test_unigram_tokenizer_json_without_spiece_model_is_refused_clearly(tmp_path):
    directory = demo.vocabulary_dir("sentence_piece")
    transformers.AlbertTokenizer.from_pretrained(directory).save_pretrained(tmp_path)
    assert not (tmp_path / "spiece.model").exists()
    with pytest.raises(ValueError, match="'Unigram' is not supported.*spiece.model"):
        from_hf(tmp_path)
