"""In-graph tokenizers (WordPiece, byte-level BPE, SentencePiece), input packing, vocabulary training."""

from kerasbert.tokenizers.base import Tokenizer, VocabularyError
from kerasbert.tokenizers.byte_pair import BytePairTokenizer, read_merges_txt, read_vocabulary_json
from kerasbert.tokenizers.byte_pair_training import train_byte_pair
from kerasbert.tokenizers.from_hf import from_hf
from kerasbert.tokenizers.packing import SpecialTokenLayout, pack
from kerasbert.tokenizers.sentence_piece import (SentencePieceModelError, SentencePieceTokenizer,
                                                 load_sentence_piece_tokenizer)
from kerasbert.tokenizers.sentence_piece_training import train_sentence_piece
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer
from kerasbert.tokenizers.wordpiece_training import train_wordpiece

__all__ = ["BytePairTokenizer", "SentencePieceModelError", "SentencePieceTokenizer",
           "SpecialTokenLayout", "Tokenizer", "VocabularyError", "WordPieceTokenizer", "from_hf",
           "load_sentence_piece_tokenizer", "pack", "read_merges_txt", "read_vocabulary_json",
           "train_byte_pair", "train_sentence_piece", "train_wordpiece"]
