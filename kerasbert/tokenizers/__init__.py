"""In-graph tokenizers (WordPiece, byte-level BPE, SentencePiece), input packing, vocabulary training."""

from kerasbert.tokenizers.base import Tokenizer, VocabularyError
from kerasbert.tokenizers.from_hf import from_hf
from kerasbert.tokenizers.packing import SpecialTokenLayout, pack
from kerasbert.tokenizers.sentence_piece import (SentencePieceModelError, SentencePieceTokenizer,
                                                 load_sentence_piece_tokenizer)
from kerasbert.tokenizers.sentence_piece_training import train_sentence_piece
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer
from kerasbert.tokenizers.wordpiece_training import train_wordpiece

__all__ = ["SentencePieceModelError", "SentencePieceTokenizer", "SpecialTokenLayout", "Tokenizer",
           "VocabularyError", "WordPieceTokenizer", "from_hf", "load_sentence_piece_tokenizer",
           "pack", "train_sentence_piece", "train_wordpiece"]
