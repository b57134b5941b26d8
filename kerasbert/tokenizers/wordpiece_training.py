"""Train a WordPiece vocabulary (`vocab.txt`) from text files."""

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.tokenizers.text_files import line_dataset, report_progress
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

WORDPIECE_RESERVED = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(files, vocab_size, lowercase=True, reserved_tokens=WORDPIECE_RESERVED,
                    output_dir=None, progress=None, batch_size=1024):
    """Train a WordPiece vocabulary on the lines of `files` (plain or gzip text).

    The text is normalized and split into words exactly as `WordPieceTokenizer`
    does at tokenize time, then keras-hub's `compute_word_piece_vocabulary`
    (tensorflow-text's trainer) learns the pieces. Reserved tokens come first,
    in the given order. Returns the vocabulary (a list); with `output_dir`,
    also writes `output_dir/vocab.txt` (to a temporary name, then renamed).
    `progress`, if given, is called with the number of lines each time a
    batch of lines has been read.

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "text.txt")
    >>> _ = open(path, "w").write("The cat sat on the mat.\\nThe dog sat too.\\n")
    >>> vocab = train_wordpiece([path], vocab_size=60)
    >>> vocab[:6], "##t" in vocab
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.'], True)
    """
    if vocab_size <= len(reserved_tokens):
        raise ValueError(f"vocab_size {vocab_size} leaves no room beside {len(reserved_tokens)} "
                         "reserved tokens")
    # A throwaway tokenizer supplies the exact normalization and word splitting.
    splitter = WordPieceTokenizer(list(reserved_tokens), lowercase=lowercase,
                                  unk_token=reserved_tokens[1], pad_token=reserved_tokens[0],
                                  cls_token=reserved_tokens[2], sep_token=reserved_tokens[3],
                                  mask_token=reserved_tokens[4])
    lines = line_dataset(files).batch(batch_size)
    if progress is not None:
        lines = lines.map(lambda batch: report_progress(batch, progress))
    words = lines.map(lambda batch: splitter.split_words(splitter.normalize(batch)))
    # keras-hub is imported here only: it adds over a second to `import kerasbert`.
    from keras_hub.tokenizers import compute_word_piece_vocabulary

    vocabulary = compute_word_piece_vocabulary(
        words, vocab_size, lowercase=False, strip_accents=False, split=False,
        reserved_tokens=list(reserved_tokens))
    if output_dir is not None:
        write_atomically(file_system.join(output_dir, "vocab.txt"),
                         "".join(token + "\n" for token in vocabulary))
    return vocabulary
