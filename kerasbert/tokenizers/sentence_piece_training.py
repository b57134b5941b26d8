"""Train an ALBERT-style SentencePiece model (`spiece.model`) from text files."""

import io
import re

import sentencepiece

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.tokenizers.sentence_piece import parse_model_proto, preprocess
from kerasbert.tokenizers.text_files import check_text_files, line_dataset, report_progress

ALBERT_RESERVED = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
MODEL_TYPES = ("unigram", "bpe")

# ALBERT's settings (its README's `spm_train` command) where they differ from SentencePiece's.
_ALBERT_TRAINER_OPTIONS = {
    "character_coverage": 0.99995,
    "shuffle_input_sentence": True,
    "input_sentence_size": 10_000_000,
}


def train_sentence_piece(files, vocab_size, lowercase=True, reserved_tokens=ALBERT_RESERVED,
                         output_dir=None, model_type="unigram", keep_accents=False,
                         unk_token="<unk>", pad_token="<pad>", progress=None, batch_size=1024,
                         **trainer_options):
    """Train a SentencePiece model on the lines of `files` (plain or gzip text), ALBERT's way.

    Each line is preprocessed exactly as `SentencePieceTokenizer` preprocesses
    at tokenize time (whitespace, quotes, accents unless `keep_accents`,
    lower-casing with `lowercase`); the `sentencepiece` library then trains
    the model, with the `nmt_nfkc` normalizer and ALBERT's trainer settings.
    `reserved_tokens` take ids 0, 1, ... in order: `unk_token` becomes the
    unknown piece, `pad_token` (if reserved) the padding piece, the others
    control pieces, which text never produces (ALBERT: `<pad>`=0, `<unk>`=1,
    `[CLS]`=2, `[SEP]`=3, `[MASK]`=4). `trainer_options` go to
    `sentencepiece.SentencePieceTrainer.train` (e.g. `user_defined_symbols`).

    Returns the serialized model (bytes); with `output_dir`, also writes
    `output_dir/spiece.model` (to a temporary name, then renamed). `progress`,
    if given, is called with the number of lines each time a batch is read.

    Example:
    >>> import os, tempfile
    >>> from kerasbert.data import demo
    >>> from kerasbert.tokenizers import SentencePieceTokenizer
    >>> output_dir = tempfile.mkdtemp()
    >>> proto = train_sentence_piece(demo.pretraining_corpus_files()[:1], vocab_size=1000,
    ...                              output_dir=output_dir)
    >>> tokenizer = SentencePieceTokenizer(proto)
    >>> tokenizer.vocabulary[:5], tokenizer.vocabulary_size()
    (['<pad>', '<unk>', '[CLS]', '[SEP]', '[MASK]'], 1000)
    >>> os.listdir(output_dir)
    ['spiece.model']
    """
    files = check_text_files(files)
    reserved_tokens = list(reserved_tokens)
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    if len(set(reserved_tokens)) != len(reserved_tokens):
        raise ValueError(f"reserved_tokens has duplicates: {reserved_tokens}")
    if unk_token not in reserved_tokens:
        raise ValueError(f"reserved_tokens {reserved_tokens} lack the unknown token {unk_token!r}")
    if vocab_size <= len(reserved_tokens):
        raise ValueError(f"vocab_size {vocab_size} leaves no room beside {len(reserved_tokens)} "
                         "reserved tokens")

    lines = line_dataset(files).batch(batch_size)
    if progress is not None:
        lines = lines.map(lambda batch: report_progress(batch, progress))
    lines = lines.map(lambda batch: preprocess(batch, lowercase=lowercase,
                                               keep_accents=keep_accents))

    def sentences():
        for batch in lines.as_numpy_iterator():
            for line in batch:
                if line:
                    yield line.decode("utf-8")

    options = {
        **_ALBERT_TRAINER_OPTIONS,
        "minloglevel": 2,
        **trainer_options,
        "vocab_size": vocab_size,
        "model_type": model_type,
        "normalization_rule_name": "nmt_nfkc",
        "unk_id": reserved_tokens.index(unk_token),
        "unk_piece": unk_token,
        "pad_id": reserved_tokens.index(pad_token) if pad_token in reserved_tokens else -1,
        "pad_piece": pad_token,
        "bos_id": -1,
        "eos_id": -1,
        "control_symbols": [t for t in reserved_tokens if t not in (unk_token, pad_token)],
    }
    writer = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(sentence_iterator=sentences(), model_writer=writer,
                                                 **options)
    except RuntimeError as error:
        limit = re.search(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)",
                          str(error))
        if limit:
            raise ValueError(f"vocab_size {vocab_size} is more than SentencePiece can learn from "
                             f"{files}: at most {limit.group(1)}") from None
        raise ValueError(f"SentencePiece training on {files} failed: {error}") from None
    proto = writer.getvalue()
    pieces = parse_model_proto(proto)["pieces"]
    if pieces[:len(reserved_tokens)] != reserved_tokens:
        raise AssertionError(f"reserved tokens landed at the wrong ids: "
                             f"{pieces[:len(reserved_tokens)]} != {reserved_tokens}")
    if output_dir is not None:
        write_atomically(file_system.join(output_dir, "spiece.model"), proto)
    return proto
