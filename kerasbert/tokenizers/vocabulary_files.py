"""A tokenizer from a vocabulary file, as the data binaries take it (`--vocab_file`)."""

import os

from kerasbert import file_system
from kerasbert.tokenizers.byte_pair import BytePairTokenizer
from kerasbert.tokenizers.from_hf import from_hf, read_vocab_txt
from kerasbert.tokenizers.sentence_piece import load_sentence_piece_tokenizer
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer


def load_tokenizer(vocab_file=None, merges_file=None, tokenizer_dir=None, lowercase=True):
    """The tokenizer of `vocab_file`, or of a Hugging Face `tokenizer_dir`.

    `vocab_file` is a WordPiece `vocab.txt` (BERT, ELECTRA), a SentencePiece
    `*.model` (ALBERT) or a byte-level BPE `vocab.json` with its `merges_file`
    (RoBERTa); `lowercase` applies to the first two.

    >>> import os, kerasbert.data.demo
    >>> vocab = os.path.join(kerasbert.data.demo.vocabulary_dir("wordpiece"), "vocab.txt")
    >>> load_tokenizer(vocab).tokenize(["Hello world"]).to_list()[0] == (
    ...     load_tokenizer(vocab).tokenize(["hello WORLD"]).to_list()[0])
    True
    """
    if (vocab_file is None) == (tokenizer_dir is None):
        raise ValueError("Give exactly one of vocab_file and tokenizer_dir")
    if tokenizer_dir is not None:
        return from_hf(tokenizer_dir)
    vocab_file = os.fspath(vocab_file)
    if not file_system.isfile(vocab_file):
        raise FileNotFoundError(f"Vocabulary file {vocab_file!r} does not exist")
    if vocab_file.endswith(".json"):
        if merges_file is None:
            raise ValueError(f"{vocab_file!r} is a byte-level BPE vocabulary: give its merges file")
        return BytePairTokenizer.from_files(vocab_file, merges_file)
    if merges_file is not None:
        raise ValueError(f"A merges file goes with a vocab.json, not with {vocab_file!r}")
    if vocab_file.endswith(".model"):
        return load_sentence_piece_tokenizer(vocab_file, lowercase=lowercase)
    return WordPieceTokenizer(read_vocab_txt(vocab_file), lowercase=lowercase, source=vocab_file)
