"""`from_hf`: the right kerasbert tokenizer for a Hugging Face tokenizer directory (local, or a
TensorFlow file-system URL such as `gs://...`; see `kerasbert.file_system`)."""

import os

from kerasbert import file_system
from kerasbert.json_files import JsonFileError, read_json_file
from kerasbert.tokenizers.base import VocabularyError, vocabulary_from_ids
from kerasbert.tokenizers.byte_pair import BytePairTokenizer
from kerasbert.tokenizers.sentence_transformers_modules import (
    SentenceTransformersFolderError, is_sentence_transformers_folder, transformer_settings)
from kerasbert.tokenizers.sentence_piece import (DIGIT_COMMA_PENALTY, SentencePieceTokenizer,
                                                 is_digit_comma_piece,
                                                 parse_model_proto)
from kerasbert.tokenizers.unigram_json import model_proto_from_unigram_json
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

_SPECIAL_KEYS = ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token")


def from_hf(directory):
    """A tokenizer equal to the Hugging Face tokenizer saved in `directory`.

    Reads, in this order of preference: `spiece.model` (SentencePiece, ALBERT),
    `vocab.json` + `merges.txt` (byte-level BPE, RoBERTa), `vocab.txt`
    (WordPiece, BERT and ELECTRA), or a `tokenizer.json` holding a WordPiece,
    BPE or Unigram (ALBERT, as transformers 5 saves it) model; settings (lower-casing, accents, special tokens) come from
    `tokenizer_config.json` or the `tokenizer.json` normalizer. A
    sentence-transformers folder (`modules.json`) gives its Transformer
    module's tokenizer.

    Example (with a directory written by `transformers`' `save_pretrained`):

        tokenizer = kerasbert.tokenizers.from_hf("/models/bert-base-uncased")
        batch = tokenizer(["first text"], ["second text"], max_length=128)
    """
    directory = os.fspath(directory)
    if not file_system.isdir(directory):
        raise FileNotFoundError(f"Tokenizer directory {directory!r} does not exist")
    if is_sentence_transformers_folder(directory):
        folder, settings = transformer_settings(directory)
        tokenizer = _from_tokenizer_files(folder)
        if settings.get("do_lower_case") and not getattr(tokenizer, "lowercase", False):
            raise SentenceTransformersFolderError(
                f"{folder}: sentence_bert_config.json lower-cases the text before a "
                f"{type(tokenizer).__name__} that does not; kerasbert cannot put the two together")
        return tokenizer
    return _from_tokenizer_files(directory)


def _from_tokenizer_files(directory):
    """`from_hf` of a folder with Hugging Face tokenizer files."""
    files = set(file_system.listdir(directory))
    config = _read_json(directory, "tokenizer_config.json") if "tokenizer_config.json" in files else {}
    specials = _special_tokens(config)
    if "spiece.model" in files:
        path = file_system.join(directory, "spiece.model")
        proto = file_system.read_bytes(path)
        penalize = "tokenizer.json" in files and _penalizes_digit_comma(proto, path, directory)
        return SentencePieceTokenizer(
            proto, lowercase=config.get("do_lower_case", True),
            keep_accents=config.get("keep_accents", False),
            remove_space=config.get("remove_space", True), penalize_digit_comma=penalize,
            source=path, **specials)
    if {"vocab.json", "merges.txt"} <= files:
        with file_system.local_copy(file_system.join(directory, "vocab.json")) as vocabulary, \
                file_system.local_copy(file_system.join(directory, "merges.txt")) as merges:
            return BytePairTokenizer.from_files(vocabulary, merges, **_byte_pair_options(config),
                                                **specials)
    if "vocab.txt" in files:
        path = file_system.join(directory, "vocab.txt")
        return WordPieceTokenizer(
            read_vocab_txt(path), lowercase=config.get("do_lower_case", True),
            strip_accents=config.get("strip_accents"),
            split_cjk=config.get("tokenize_chinese_chars", True),
            second_segment_id=_second_segment_id(config), source=path, **specials)
    if "tokenizer.json" in files:
        return _from_tokenizer_json(directory, config, specials)
    raise FileNotFoundError(
        f"No tokenizer files in {directory!r}: expected spiece.model, vocab.json + merges.txt, "
        f"vocab.txt or tokenizer.json; found {sorted(files)}")


def _penalizes_digit_comma(proto, model_path, directory):
    """Whether `directory`'s `tokenizer.json` lowers digit-comma piece scores as transformers'
    ALBERT converter does (`proto`: the SentencePiece model at `model_path`)."""
    model = parse_model_proto(proto, model_path)
    vocab = (_read_json(directory, "tokenizer.json").get("model") or {})
    scores = dict(map(tuple, vocab.get("vocab") or []))
    for piece, score in zip(model["pieces"], model["scores"]):
        if is_digit_comma_piece(piece) and piece in scores:
            return abs(score - DIGIT_COMMA_PENALTY - scores[piece]) < 1e-3
    return False


def read_vocab_txt(path):
    """The tokens of a WordPiece `vocab.txt`, one per line, in id order."""
    with file_system.open_file(path, encoding="utf-8") as file:
        return [line.rstrip("\n") for line in file]


def _from_tokenizer_json(directory, config, specials):
    path = file_system.join(directory, "tokenizer.json")
    spec = _read_json(directory, "tokenizer.json")
    model = spec.get("model") or {}
    if model.get("type") == "WordPiece":
        normalizer = spec.get("normalizer") or {}
        if normalizer.get("type") != "BertNormalizer" or model.get("continuing_subword_prefix") != "##":
            raise VocabularyError(f"{path}: only BERT-style WordPiece (BertNormalizer, '##') is supported")
        return WordPieceTokenizer(
            vocabulary_from_ids(model["vocab"], path), lowercase=normalizer.get("lowercase", True),
            strip_accents=normalizer.get("strip_accents"),
            split_cjk=normalizer.get("handle_chinese_chars", True),
            max_chars_per_word=model.get("max_input_chars_per_word", 100),
            second_segment_id=_second_segment_id(config), source=path,
            **{**specials, "unk_token": model.get("unk_token", specials.get("unk_token", "[UNK]"))})
    if model.get("type") == "BPE":
        pre_tokenizer = spec.get("pre_tokenizer") or {}
        if pre_tokenizer.get("type") != "ByteLevel":
            raise VocabularyError(f"{path}: only byte-level BPE (ByteLevel pre-tokenizer) is supported")
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        # Added tokens (ModernBERT's [CLS], [SEP], ... after the BPE vocabulary) have ids too.
        vocabulary = {**model["vocab"], **{token["content"]: token["id"]
                                           for token in spec.get("added_tokens", [])}}
        return BytePairTokenizer(
            vocabulary_from_ids(vocabulary, path), merges,
            add_prefix_space=pre_tokenizer.get("add_prefix_space", False),
            lstrip_tokens=[t["content"] for t in spec.get("added_tokens", []) if t.get("lstrip")],
            rstrip_tokens=[t["content"] for t in spec.get("added_tokens", []) if t.get("rstrip")],
            pair_separators=_pair_separators(spec.get("post_processor")), source=path,
            **specials)
    if model.get("type") == "Unigram":
        steps = _normalizer_types(spec.get("normalizer"))
        return SentencePieceTokenizer(
            model_proto_from_unigram_json(spec, path),
            lowercase=config.get("do_lower_case", "Lowercase" in steps),
            keep_accents=config.get("keep_accents", "StripAccents" not in steps),
            remove_space=config.get("remove_space", True), source=path, **specials)
    raise VocabularyError(f"{path}: tokenizer model type {model.get('type')!r} is not supported")


def _pair_separators(post_processor):
    """How many separators a `tokenizer.json` post-processor puts between a pair's texts:
    RoBERTa's two (`<s> A </s></s> B </s>`), or as many special tokens as a template has
    between `$A` and `$B` (ModernBERT's `[CLS] A [SEP] B [SEP]`: one)."""
    post_processor = post_processor or {}
    if post_processor.get("type") != "TemplateProcessing":
        return 2
    pieces = post_processor.get("pair") or []
    kinds = ["A" if (piece.get("Sequence") or {}).get("id") == "A" else
             "B" if (piece.get("Sequence") or {}).get("id") == "B" else "special"
             for piece in pieces]
    if "A" not in kinds or "B" not in kinds:
        return 2
    return kinds.index("B") - kinds.index("A") - 1


def _second_segment_id(config):
    """0 for a WordPiece tokenizer without token types (DistilBERT's), else BERT's 1."""
    input_names = config.get("model_input_names")
    if str(config.get("tokenizer_class", "")).startswith("DistilBert") or (
            input_names is not None and "token_type_ids" not in input_names):
        return 0
    return 1


def _normalizer_types(normalizer):
    """The types of a `tokenizer.json` normalizer and of the steps of a `Sequence` one."""
    if not normalizer:
        return set()
    types = {normalizer.get("type")}
    for part in normalizer.get("normalizers") or []:
        types |= _normalizer_types(part)
    return types


def _byte_pair_options(config):
    """`add_prefix_space` and the special tokens that swallow neighbouring spaces (RoBERTa's
    `<mask>` has `"lstrip": true`), from a `tokenizer_config.json`."""
    options = {"add_prefix_space": config.get("add_prefix_space", False)}
    for side in ("lstrip", "rstrip"):
        tokens = [value["content"] for key, value in config.items()
                  if key.endswith("_token") and isinstance(value, dict) and value.get(side)]
        if tokens:
            options[f"{side}_tokens"] = tokens
    return options


def _special_tokens(config):
    specials = {}
    for key in _SPECIAL_KEYS:
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            specials[key] = value
    return specials


def _read_json(directory, name):
    path = file_system.join(directory, name)
    try:
        return read_json_file(path, f"a Hugging Face {name}")
    except JsonFileError as error:
        raise VocabularyError(str(error)) from None
