"""A kerasbert tokenizer -> the files of the equal Hugging Face tokenizer.

WordPiece gives `vocab.txt` (`BertTokenizer`), byte-level BPE `vocab.json` +
`merges.txt` (`RobertaTokenizer`: `<s> A </s></s> B </s>`) or, with one
separator between a pair's texts (ModernBERT's `[CLS] A [SEP] B [SEP]`), a
`tokenizer.json` with that template, as transformers saves ModernBERT's;
SentencePiece `spiece.model` (`AlbertTokenizer`); each with a
`tokenizer_config.json` carrying its settings and a `special_tokens_map.json`.
`transformers.AutoTokenizer.from_pretrained` on them gives the ids the
kerasbert tokenizer gives, and so does `kerasbert.tokenizers.from_hf`.
"""

import json

from kerasbert.convert.hf_config_writer import UnsupportedModelError
from kerasbert.tokenizers.byte_pair import BytePairTokenizer
from kerasbert.tokenizers.sentence_piece import SentencePieceTokenizer, penalize_digit_comma_pieces
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

# transformers' WordPiece model turns words longer than this into the unknown token; its
# BertTokenizer has no setting for it.
HF_MAX_CHARS_PER_WORD = 100


def tokenizer_files(tokenizer, model_max_length):
    """`{file name: str or bytes}` of the Hugging Face tokenizer equal to `tokenizer`.

    kerasbert's WordPiece and SentencePiece tokenizers read special-token
    strings in the text ("[MASK]") as text; the files say so to transformers
    with `split_special_tokens: true` (its default would map them to their
    ids). One difference stays: without lower-casing, transformers' Unigram
    model matches a SentencePiece model's control pieces spelled in the text
    ("[MASK]"), which SentencePiece (and so kerasbert) never does. Raises
    `UnsupportedModelError` for settings transformers' tokenizer classes
    cannot express.

    >>> import kerasbert
    >>> tokenizer = kerasbert.tokenizers.WordPieceTokenizer(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> files = tokenizer_files(tokenizer, model_max_length=512)
    >>> sorted(files)
    ['special_tokens_map.json', 'tokenizer_config.json', 'vocab.txt']
    >>> files["vocab.txt"].split()
    ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'hi']
    """
    specials = {f"{name}_token": token for name, token in tokenizer.special_tokens.items()}
    if isinstance(tokenizer, WordPieceTokenizer):
        if tokenizer.max_chars_per_word != HF_MAX_CHARS_PER_WORD:
            raise UnsupportedModelError(
                f"WordPieceTokenizer.max_chars_per_word is {tokenizer.max_chars_per_word}; "
                f"transformers' BertTokenizer always allows {HF_MAX_CHARS_PER_WORD}")
        files = {"vocab.txt": "".join(token + "\n" for token in tokenizer.vocabulary)}
        # A tokenizer without token types is DistilBERT's (it returns no token_type_ids).
        settings = {"tokenizer_class": "DistilBertTokenizer" if tokenizer.second_segment_id == 0
                    else "BertTokenizer", "do_lower_case": tokenizer.lowercase,
                    "strip_accents": tokenizer.strip_accents,
                    "tokenize_chinese_chars": tokenizer.split_cjk, "split_special_tokens": True}
    elif isinstance(tokenizer, BytePairTokenizer) and tokenizer.pair_separators == 1:
        files = {"tokenizer.json": _json(_single_separator_tokenizer_json(tokenizer))}
        settings = {"tokenizer_class": "PreTrainedTokenizerFast",
                    "split_special_tokens": tokenizer.split_special_tokens,
                    "model_input_names": ["input_ids", "attention_mask"]
                    + (["token_type_ids"] if tokenizer.second_segment_id else [])}
    elif isinstance(tokenizer, BytePairTokenizer):
        token_ids = {token: index for index, token in enumerate(tokenizer.vocabulary)}
        files = {"vocab.json": json.dumps(token_ids, ensure_ascii=False),
                 "merges.txt": "".join(line + "\n" for line in ["#version: 0.2",
                                                                *tokenizer.merges])}
        settings = {"tokenizer_class": "RobertaTokenizer",
                    "add_prefix_space": tokenizer.add_prefix_space,
                    "split_special_tokens": tokenizer.split_special_tokens}
        specials.update(bos_token=specials["cls_token"], eos_token=specials["sep_token"])
        specials = {key: _added_token(token, token in tokenizer.lstrip_tokens,
                                      token in tokenizer.rstrip_tokens)
                    for key, token in specials.items()}
    elif isinstance(tokenizer, SentencePieceTokenizer):
        if not tokenizer.remove_space:
            raise UnsupportedModelError(
                "SentencePieceTokenizer.remove_space is False; transformers' AlbertTokenizer "
                "always splits on and collapses whitespace")
        # The digit-comma penalty goes into the scores, so that any reader of the file applies it.
        proto = (penalize_digit_comma_pieces(tokenizer.proto) if tokenizer.penalize_digit_comma
                 else tokenizer.proto)
        files = {"spiece.model": proto}
        settings = {"tokenizer_class": "AlbertTokenizer", "do_lower_case": tokenizer.lowercase,
                    "keep_accents": tokenizer.keep_accents, "split_special_tokens": True}
        specials.update(bos_token=specials["cls_token"], eos_token=specials["sep_token"])
    else:
        raise UnsupportedModelError(
            f"No Hugging Face tokenizer files for a {type(tokenizer).__name__}; expected a "
            "WordPieceTokenizer, BytePairTokenizer or SentencePieceTokenizer")
    files["tokenizer_config.json"] = _json({**settings, **specials,
                                            "model_max_length": model_max_length})
    files["special_tokens_map.json"] = _json(specials)
    return files


def _single_separator_tokenizer_json(tokenizer):
    """The `tokenizer.json` of a byte-level BPE tokenizer that packs `[CLS] A [SEP] B [SEP]`:
    its special tokens are added tokens (never split, matched before the BPE runs unless it
    splits them), with the spaces they take."""
    ids = {token: index for index, token in enumerate(tokenizer.vocabulary)}
    cls, sep = tokenizer.special_tokens["cls"], tokenizer.special_tokens["sep"]
    second = tokenizer.second_segment_id

    def piece(kind, name, type_id):
        return {kind: {"id": name, "type_id": type_id}}

    byte_level = {"type": "ByteLevel", "add_prefix_space": tokenizer.add_prefix_space,
                  "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": ids[token], "content": token, "single_word": False,
             "lstrip": token in tokenizer.lstrip_tokens, "rstrip": token in tokenizer.rstrip_tokens,
             "normalized": False, "special": True}
            for token in sorted(set(tokenizer.special_tokens.values()), key=ids.get)],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [piece("SpecialToken", cls, 0), piece("Sequence", "A", 0),
                       piece("SpecialToken", sep, 0)],
            "pair": [piece("SpecialToken", cls, 0), piece("Sequence", "A", 0),
                     piece("SpecialToken", sep, 0), piece("Sequence", "B", second),
                     piece("SpecialToken", sep, second)],
            "special_tokens": {token: {"id": token, "ids": [ids[token]], "tokens": [token]}
                               for token in (cls, sep)}},
        "decoder": {**byte_level, "add_prefix_space": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": ids, "merges": [merge.split(" ") for merge in tokenizer.merges]},
    }


def _added_token(token, lstrip, rstrip):
    """A special token as `transformers` writes an `AddedToken` that takes neighbouring spaces."""
    if not (lstrip or rstrip):
        return token
    return {"__type": "AddedToken", "content": token, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": False, "single_word": False, "special": True}


def _json(value):
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
