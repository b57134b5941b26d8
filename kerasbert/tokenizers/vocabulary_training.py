"""One entry point over the three vocabulary trainers, for the `kerasbert-vocab` binary."""

from kerasbert import file_system
from kerasbert.tokenizers.byte_pair_training import train_byte_pair
from kerasbert.tokenizers.sentence_piece_training import train_sentence_piece
from kerasbert.tokenizers.text_files import check_text_files, iterate_lines
from kerasbert.tokenizers.wordpiece_training import train_wordpiece

TRAINERS = {
    "wordpiece": (train_wordpiece, ("vocab.txt",)),
    "byte_pair": (train_byte_pair, ("vocab.json", "merges.txt")),
    "sentence_piece": (train_sentence_piece, ("spiece.model",)),
}


def train(kind, files, vocab_size, output_dir, progress=None, **options):
    """Train a `kind` vocabulary on `files` into `output_dir`; return the paths written."""
    if kind not in TRAINERS:
        raise ValueError(f"Unknown vocabulary kind {kind!r}; expected one of {sorted(TRAINERS)}")
    files = check_text_files(files)
    if next(iterate_lines(files), None) is None:  # a trainer would fail inside its library
        raise ValueError(f"text files {files}: no text (every line is blank); nothing to train "
                         "a vocabulary on")
    trainer, outputs = TRAINERS[kind]
    trainer(files, vocab_size, output_dir=output_dir, progress=progress, **options)
    return [file_system.join(output_dir, name) for name in outputs]


def train_from_patterns(kind, patterns, vocab_size, output_dir, **options):
    """`train` on the files the globs `patterns` match, with a progress bar over their lines;
    prints the paths written and returns them. A `FileNotFoundError` names a pattern that
    matches no file."""
    import keras

    from kerasbert.tokenizers.text_files import count_lines

    for pattern in patterns:
        if not file_system.glob(pattern):
            raise FileNotFoundError(f"--input_files: no file matches {pattern}")
    files = sorted({path for pattern in patterns for path in file_system.glob(pattern)})
    bar = keras.utils.Progbar(count_lines(files), unit_name="line")
    written = train(kind, files, vocab_size, output_dir, progress=bar.add, **options)
    print(f"\nWrote {', '.join(written)}")
    return written
