"""In-graph tokenizers (WordPiece, byte-level BPE, SentencePiece), input packing, vocabulary training."""

from kerasbert.tokenizers.base import Tokenizer, VocabularyError
from kerasbert.tokenizers.from_hf import from_hf
from kerasbert.tokenizers.packing import SpecialTokenLayout, pack
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer
from kerasbert.tokenizers.wordpiece_training import train_wordpiece

__all__ = ["SpecialTokenLayout", "Tokenizer", "VocabularyError", "WordPieceTokenizer", "from_hf",
           "pack", "train_wordpiece"]
