"""ALBERT's SentencePiece tokenization, in the TensorFlow graph."""

import base64
import os

import keras
import tensorflow as tf
import tensorflow_text as tf_text
from google.protobuf.message import DecodeError
from sentencepiece import sentencepiece_model_pb2 as model_pb2

from kerasbert import file_system
from kerasbert.tokenizers.base import Tokenizer, VocabularyError
from kerasbert.tokenizers.unicode_text import lowercase_per_character

# Characters `remove_space` turns into a single space: the Unicode White_Space characters that
# Hugging Face's `WhitespaceSplit` splits on, except U+000B, which SentencePiece's `nmt_nfkc`
# normalizer deletes (and which Hugging Face therefore never sees, its Precompiled step running
# before the split). The others are spaces to SentencePiece too, but for U+0085.
_WHITESPACE = (r"[\t\n\f\r \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}"
               r"\x{205f}\x{3000}]+")

# How much transformers' AlbertConverter lowers the score of pieces ending in a digit and a comma.
DIGIT_COMMA_PENALTY = 100.0


class SentencePieceModelError(ValueError):
    """Bytes or a file that are not a usable serialized SentencePiece model."""


def preprocess(texts, lowercase=True, keep_accents=False, remove_space=True):
    """ALBERT's text preprocessing, in-graph, as Hugging Face's `AlbertTokenizer` normalizes.

    In order: runs of whitespace become one space and the ends are stripped
    (`remove_space`); `` and '' become "; without `keep_accents`, NFKD and
    every combining mark (Unicode category M) dropped; with `lowercase`,
    each character lower-cased on its own (so a final sigma stays σ). The
    SentencePiece model's own normalizer (usually `nmt_nfkc`) runs after this.

    The original ALBERT code (and transformers 4's slow tokenizer) differs on
    rare characters: it drops only marks of non-zero combining class (so it
    keeps Indic vowel signs), and makes U+000B and U+001C-U+001F spaces, where
    SentencePiece's normalizer deletes them.

    Args:
        texts: 1-D `tf.string` tensor of valid UTF-8.

    Returns:
        The preprocessed texts, 1-D `tf.string`.
    """
    if remove_space:
        texts = tf.strings.regex_replace(texts, _WHITESPACE, " ")
        texts = tf.strings.regex_replace(texts, "^ | $", "")
    texts = tf.strings.regex_replace(texts, "``", '"')
    texts = tf.strings.regex_replace(texts, "''", '"')
    if not keep_accents:
        texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFKD"), r"\p{M}", "")
    if lowercase:
        texts = lowercase_per_character(texts)
    return texts


@keras.saving.register_keras_serializable(package="kerasbert")
class SentencePieceTokenizer(Tokenizer):
    """ALBERT's SentencePiece tokenizer, exactly as Hugging Face's `AlbertTokenizer` tokenizes.

    ALBERT's preprocessing (`preprocess`: whitespace, quotes, accents,
    lower-casing) runs in the graph, then the SentencePiece model itself runs
    on tensorflow-text's `SentencepieceTokenizer` (the SentencePiece C++
    library), so the ids equal `sentencepiece.SentencePieceProcessor.encode`
    of the preprocessed text. The vocabulary is the model's pieces in id
    order; pairs pack as `[CLS] A [SEP] B [SEP]` with segment ids 0 and 1.

    Where transformers 5's `AlbertTokenizer` gives other ids than SentencePiece
    (kerasbert follows SentencePiece, which the original ALBERT used):
    - text that spells a special token ("[MASK]"): transformers gives the
      special token's id;
    - built from an `spiece.model` alone, transformers cuts the model's
      user-defined symbols (ALBERT's `( ) " - . – £ €`) out of the raw text as
      added tokens, so `the "list"` becomes `▁the " ▁list "`, not `▁the ▁ " list "`
      (built from the hub's `tokenizer.json` files it agrees with
      SentencePiece, as those do not list the symbols as added tokens);
    - with `keep_accents`, in a cluster of a letter and marks of 6 bytes or
      more, transformers does not compose the letter with its first mark;
    - where two segmentations score exactly the same, the tie may break
      differently (seen only with `penalize_digit_comma`: "111" as 1+11 or 11+1).

    `tokenize_with_offsets` gives each piece the original characters its
    normalized characters came from, as transformers' `return_offsets_mapping`:
    a word-start "▁" spans the word's first character ("▁the" spans "the", a
    lone "▁" the character after it), the " of `` or '' the pair's second
    character, whitespace and characters SentencePiece deletes no piece.
    Keeping accents, where SentencePiece composes a letter and its marks
    (a + U+0301 -> á), the span holds the marks; transformers' stops at the letter.

    Args:
        proto: the serialized SentencePiece model (the bytes of an
            `spiece.model`); `load_sentence_piece_tokenizer` reads a file.
        lowercase: lower-case the text (uncased models: ALBERT's `do_lower_case`).
        keep_accents: keep accents and other combining marks.
        remove_space: collapse runs of whitespace and strip the ends.
        unk_token, cls_token, sep_token, pad_token, mask_token: the special
            pieces; each must be in the model, and `unk_token` must be the
            piece SentencePiece emits for unknown text.
        penalize_digit_comma: lower by 100 the score of pieces that end in a
            digit and a comma (`▁2000,`), as the `tokenizer.json` files of the
            ALBERT checkpoints on the Hugging Face hub do (transformers 4
            wrote them so, approximating the original ALBERT's splitting of
            such pieces). transformers 5 building the tokenizer from an
            `spiece.model` alone does not: leave it off to match that.

    Example (a model trained on part of the demo corpus):
    >>> from kerasbert.data import demo
    >>> from kerasbert.tokenizers.sentence_piece_training import train_sentence_piece
    >>> proto = train_sentence_piece(demo.pretraining_corpus_files()[:1], vocab_size=1000)
    >>> tokenizer = SentencePieceTokenizer(proto)
    >>> ids = tokenizer.tokenize(["The  list is   sorted."]).to_list()[0]
    >>> [tokenizer.id_to_token(i) for i in ids]
    ['▁the', '▁list', '▁is', '▁sort', 'ed', '.']
    >>> packed = tokenizer(["The list"], ["is sorted."], max_length=9)
    >>> [tokenizer.id_to_token(i) for i in packed["token_ids"].numpy()[0]]
    ['[CLS]', '▁the', '▁list', '[SEP]', '▁is', '▁sort', 'ed', '.', '[SEP]']
    >>> packed["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 1, 1, 1, 1, 1]]
    >>> tokenizer.detokenize(tf.ragged.constant([ids])).numpy().tolist()
    [b'the list is sorted.']
    """

    def __init__(self, proto, lowercase=True, keep_accents=False, remove_space=True,
                 unk_token="<unk>", cls_token="[CLS]", sep_token="[SEP]", pad_token="<pad>",
                 mask_token="[MASK]", penalize_digit_comma=False, **kwargs):
        if isinstance(proto, str):
            hint = (" (it names a file: use load_sentence_piece_tokenizer(path))"
                    if os.path.exists(proto) else "")
            raise TypeError(f"proto must be the bytes of a serialized SentencePiece model, "
                            f"not str{hint}")
        if isinstance(proto, (bytearray, memoryview)):
            proto = bytes(proto)
        if not isinstance(proto, bytes):
            raise TypeError(f"proto must be the bytes of a serialized SentencePiece model, "
                            f"got {type(proto).__name__}")
        source = kwargs.pop("source", "SentencePiece model")
        model = parse_model_proto(proto, source)
        special_tokens = {"pad": pad_token, "unk": unk_token, "cls": cls_token,
                          "sep": sep_token, "mask": mask_token}
        super().__init__(model["pieces"], special_tokens, source=source, **kwargs)
        if model["unk_id"] != self.unk_token_id:
            raise VocabularyError(
                f"{source}: unk_token {unk_token!r} is id {self.unk_token_id}, but the "
                f"model's unknown piece is {model['pieces'][model['unk_id']]!r} "
                f"(id {model['unk_id']})")
        self.proto = proto
        self.model_type = model["model_type"]
        self.piece_types = model["types"]
        self.lowercase = lowercase
        self.keep_accents = keep_accents
        self.remove_space = remove_space
        self.penalize_digit_comma = penalize_digit_comma
        model_proto = penalize_digit_comma_pieces(proto) if penalize_digit_comma else proto
        try:
            self._sentence_piece = tf_text.SentencepieceTokenizer(model=model_proto,
                                                                  out_type=tf.int32)
        except (tf.errors.OpError, ValueError) as error:
            raise SentencePieceModelError(
                f"{source}: the SentencePiece library rejects the model: "
                f"{getattr(error, 'message', error)}") from None

    def preprocess(self, texts):
        """The texts as the SentencePiece model receives them (1-D tf.string)."""
        return preprocess(texts, self.lowercase, self.keep_accents, self.remove_space)

    def _tokenize(self, texts):
        return self._sentence_piece.tokenize(self.preprocess(texts))

    def _tokenize_with_offsets(self, texts):
        # Offsets as Hugging Face's `AlbertTokenizer` reports them: a piece spans the original
        # characters of the normalized characters it holds. The "▁" that begins a word is no
        # character of the text: it takes the span of the word's first character, so "▁the"
        # spans "the" and a lone "▁" piece the character after it (HF's Metaspace prepends
        # "▁" aligned to the word's first character, after WhitespaceSplit has dropped the
        # whitespace). Characters SentencePiece's normalizer deletes (zero-width ones) or
        # turns into whitespace count in no span.
        #
        # Mapping preprocessed bytes to original characters: each original character gets
        # the preprocessed text it becomes (per-character NFKD, mark removal, lower-casing,
        # as in WordPieceTokenizer), except the parts of `preprocess` that look at
        # neighbours, modelled here: with `remove_space`, a whitespace run becomes one space,
        # given to the run's last character, and nothing at the ends of the text; in each run
        # of ` (or '), characters pair up from the left, the first of a pair becoming nothing
        # and the second the " (as Hugging Face's Replace aligns it). Joined, these give
        # `preprocess(texts)` exactly.
        characters = tf.strings.unicode_decode(texts, "UTF-8")
        codes = characters.flat_values
        size = tf.size(codes, out_type=tf.int64)
        positions = tf.range(size)
        row_starts = characters.row_starts()
        row_limits = characters.row_limits()
        char_rows = characters.value_rowids()
        last_in_row = tf.equal(positions + 1, tf.gather(row_limits, char_rows))
        first_in_row = tf.equal(positions, tf.gather(row_starts, char_rows))

        def shift_left(values):  # values[i + 1] within the row, False at the row's end
            shifted = tf.concat([values[1:], tf.zeros([1], values.dtype)], axis=0)
            return tf.logical_and(tf.logical_not(last_in_row), tf.cast(shifted, tf.bool))

        # Per distinct character: its preprocessed length in bytes, and whether SentencePiece
        # makes anything of it but whitespace (its normalizer deletes zero-width characters).
        # The " of a quote pair is the last distinct entry.
        distinct, index = tf.unique(codes)
        distinct_text = tf.concat([tf.strings.unicode_encode(distinct[:, tf.newaxis], "UTF-8"),
                                   ['"']], axis=0)
        distinct_pieces = preprocess(distinct_text, self.lowercase, self.keep_accents,
                                     remove_space=False)
        distinct_lengths = tf.cast(tf.strings.length(distinct_pieces), tf.int64)
        distinct_significant = self._sentence_piece.tokenize(distinct_pieces).row_lengths() > 0
        lengths = tf.gather(distinct_lengths, index)
        significant = tf.gather(distinct_significant, index)
        if self.remove_space:
            is_space = tf.gather(tf.strings.regex_full_match(distinct_text, _WHITESPACE), index)
            solid = tf.cast(tf.logical_not(is_space), tf.int64)
            solid_before = tf.cumsum(solid, exclusive=True)
            solid_before -= tf.gather(solid_before, tf.gather(row_starts, char_rows))
            keeps_space = tf.logical_and(
                solid_before > 0, shift_left(tf.logical_not(is_space)))
            lengths = tf.where(is_space, tf.cast(keeps_space, tf.int64), lengths)
            significant = tf.logical_and(significant, tf.logical_not(is_space))
        for quote in ("`", "'"):
            is_quote = tf.equal(codes, ord(quote))
            previous_quote = tf.logical_and(
                tf.logical_not(first_in_row),
                tf.concat([[False], is_quote[:-1]], axis=0))
            # Where each run of quotes starts; a character's place in its run.
            run_starts = tf.where(tf.logical_not(tf.logical_and(is_quote, previous_quote)))[:, 0]
            run_start = tf.gather(run_starts, tf.searchsorted(run_starts, positions,
                                                              side="right") - 1)
            second = tf.logical_and(is_quote, tf.math.floormod(positions - run_start, 2) == 1)
            first = tf.logical_and(tf.logical_and(is_quote, tf.logical_not(second)),
                                   shift_left(is_quote))
            lengths = tf.where(first, tf.zeros_like(lengths),
                               tf.where(second, tf.ones_like(lengths), lengths))
            significant = tf.where(second, distinct_significant[-1], significant)
        significant = tf.logical_and(significant, lengths > 0)
        significant_positions = tf.concat([tf.where(significant)[:, 0], [size]], axis=0)

        # Global (whole-batch) preprocessed byte position where each character's bytes end.
        character_ends = tf.cumsum(lengths)
        row_byte_starts = tf.cumsum(
            tf.reduce_sum(characters.with_flat_values(lengths), axis=1), exclusive=True)

        token_ids, starts, ends = self._sentence_piece.tokenize_with_offsets(self.preprocess(texts))
        token_rows = token_ids.value_rowids()
        byte_base = tf.gather(row_byte_starts, token_rows)
        starts = tf.cast(starts.flat_values, tf.int64) + byte_base
        ends = tf.cast(ends.flat_values, tf.int64) + byte_base
        # The character holding a byte is the first whose bytes end after it; for an empty
        # range (SentencePiece's dummy-prefix "▁"), `last` comes before `first`.
        first = tf.searchsorted(character_ends, starts, side="right", out_type=tf.int64)
        last = tf.searchsorted(character_ends, ends - 1, side="right", out_type=tf.int64)
        # The first and last significant characters in [first, last]; with none (a lone
        # "▁"), the next significant character.
        low = tf.searchsorted(significant_positions, first, side="left", out_type=tf.int64)
        high = tf.searchsorted(significant_positions, last, side="right", out_type=tf.int64) - 1
        start_character = tf.gather(significant_positions, low)
        end_character = tf.gather(significant_positions, tf.maximum(low, high)) + 1
        row_base = tf.gather(row_starts, token_rows)
        row_limit = tf.gather(row_limits, token_rows)
        start_character = tf.clip_by_value(start_character, row_base, row_limit)
        end_character = tf.clip_by_value(end_character, start_character, row_limit)

        def shaped(values):
            return token_ids.with_flat_values(tf.cast(values, tf.int32))

        return (token_ids, shaped(start_character - row_base), shaped(end_character - row_base))

    def _detokenize(self, token_ids):
        return self._sentence_piece.detokenize(token_ids)

    def get_config(self):
        config = super().get_config()
        config.pop("vocabulary")  # the pieces come with the model
        config.update({
            "proto": base64.b64encode(self.proto).decode("ascii"),
            "lowercase": self.lowercase,
            "keep_accents": self.keep_accents,
            "remove_space": self.remove_space,
            "penalize_digit_comma": self.penalize_digit_comma,
            **{f"{name}_token": token for name, token in self.special_tokens.items()},
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("proto"), str):
            config["proto"] = base64.b64decode(config["proto"])
        return cls(**config)


def load_sentence_piece_tokenizer(path, **kwargs):
    """A `SentencePieceTokenizer` for the SentencePiece model at `path`.

    `path` is an `spiece.model` file, or a directory holding one. Keyword
    arguments go to `SentencePieceTokenizer` (`lowercase`, `keep_accents`,
    special tokens). Raises `FileNotFoundError` for a missing file,
    `SentencePieceModelError` for a file that is not a SentencePiece model
    and `VocabularyError` for a model that lacks a special token; each names
    the file.
    """
    path = os.fspath(path)
    if file_system.isdir(path):
        path = file_system.join(path, "spiece.model")
    if not file_system.isfile(path):
        raise FileNotFoundError(f"SentencePiece model {path!r} does not exist")
    proto = file_system.read_bytes(path)
    kwargs.setdefault("source", path)
    return SentencePieceTokenizer(proto, **kwargs)


def parse_model_proto(proto, source="SentencePiece model"):
    """The pieces, their scores and types, the unknown-piece id and the model type of a model.

    Parses the serialized `ModelProto` with the `sentencepiece` package's
    protobuf classes and raises `SentencePieceModelError`, naming `source`,
    for anything else.
    """
    def fail(reason):
        raise SentencePieceModelError(f"{source} is not a SentencePiece model: {reason}")

    if not proto:
        fail("it is empty")
    try:
        model = model_pb2.ModelProto.FromString(proto)
    except DecodeError as error:
        fail(f"invalid protobuf data ({error})")
    if not model.pieces:
        fail("it has no pieces")
    unknown = model_pb2.ModelProto.SentencePiece.UNKNOWN
    unk_ids = [index for index, piece in enumerate(model.pieces) if piece.type == unknown]
    if len(unk_ids) != 1:
        fail(f"it has {len(unk_ids)} unknown pieces, not 1")
    type_name = model_pb2.ModelProto.SentencePiece.Type.Name
    return {"pieces": [piece.piece for piece in model.pieces],
            "scores": [piece.score for piece in model.pieces],
            "types": [type_name(piece.type).lower() for piece in model.pieces],
            "unk_id": unk_ids[0],
            "model_type": model_pb2.TrainerSpec.ModelType.Name(model.trainer_spec.model_type).lower()}


def is_digit_comma_piece(piece):
    """Whether `piece` ends in a digit and a comma (`▁2000,`), a piece ALBERT splits."""
    return len(piece) >= 2 and piece[-1] == "," and piece[-2].isdigit()


def penalize_digit_comma_pieces(proto, penalty=DIGIT_COMMA_PENALTY):
    """`proto` with the score of every piece that ends in a digit and a comma lowered by `penalty`.

    This is what transformers' `AlbertConverter` does when it converts an
    ALBERT `spiece.model` to a `tokenizer.json` (the files on the Hugging Face
    hub were made so): SentencePiece then prefers splitting off the comma,
    approximating the original ALBERT code, which re-encodes such pieces.
    """
    model = model_pb2.ModelProto.FromString(proto)
    for piece in model.pieces:
        if is_digit_comma_piece(piece.piece):
            piece.score -= penalty
    return model.SerializeToString()
