"""One entry point over the three vocabulary trainers, for the `kerasbert-vocab` binary."""

from kerasbert import file_system
from kerasbert.tokenizers.byte_pair_training import train_byte_pair
from kerasbert.tokenizers.sentence_piece_training import train_sentence_piece
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
    trainer, outputs = TRAINERS[kind]
    trainer(files, vocab_size, output_dir=output_dir, progress=progress, **options)
    return [file_system.join(output_dir, name) for name in outputs]
