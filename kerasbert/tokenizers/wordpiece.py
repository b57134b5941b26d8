"""BERT / ELECTRA / DistilBERT WordPiece tokenization, in the TensorFlow graph."""

import dataclasses

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert.tokenizers.base import Tokenizer
from kerasbert.tokenizers.bert_normalizer_model import bert_normalizer_model
from kerasbert.tokenizers.fast_offsets import fast_tokens_with_offsets
from kerasbert.tokenizers.unicode_text import lowercase_per_character

# The steps of the Hugging Face `tokenizers` BertNormalizer and BertPreTokenizer, as RE2 patterns.
# Control characters (Unicode C* but tab, newline, carriage return), NUL and U+FFFD are dropped.
_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\p{Cf}\p{Co}\p{Cs}\x{fffd}]"
# Characters with the Unicode White_Space property that survive the control filter.
_WHITESPACE = r"[\t\n\r\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"
_CJK = (r"([\x{4e00}-\x{9fff}\x{3400}-\x{4dbf}\x{20000}-\x{2a6df}\x{2a700}-\x{2b73f}"
        r"\x{2b740}-\x{2b81f}\x{2b820}-\x{2ceaf}\x{f900}-\x{faff}\x{2f800}-\x{2fa1f}])")
# ASCII punctuation and symbols, and every Unicode punctuation character, each its own token.
_PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"
# The WordPiece decoder's clean-up: it runs per token, so of its rules only these can apply
# (a ".", "?", "!" or "," token loses the space before it).
_DECODE_CLEANUP = r" ([.?!,])"


def normalize_text(texts, lowercase, strip_accents, split_cjk):
    """`texts` (tf.string) as Hugging Face's BertNormalizer leaves them: control, format and
    private-use characters and U+FFFD dropped, Unicode whitespace made a space, CJK ideographs
    surrounded by spaces (`split_cjk`), accents stripped after NFD (`strip_accents`),
    lower-cased per character (`lowercase`).

    >>> normalize_text(tf.constant(["Ca\\x00fè\\u3000中"]), True, True, True).numpy().tolist()
    [b'cafe  \\xe4\\xb8\\xad ']
    """
    texts = tf.strings.regex_replace(texts, _CONTROL, "")
    texts = tf.strings.regex_replace(texts, _WHITESPACE, " ")
    if split_cjk:
        texts = tf.strings.regex_replace(texts, _CJK, r" \1 ")
    if strip_accents:
        texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFD"), r"\p{Mn}", "")
    if lowercase:
        texts = lowercase_per_character(texts)
    return texts


@keras.saving.register_keras_serializable(package="kerasbert")
class WordPieceTokenizer(Tokenizer):
    """BERT's WordPiece tokenizer, exactly as Hugging Face's `BertTokenizerFast` tokenizes.

    Normalization (control characters dropped, whitespace unified, CJK
    characters split, optional accent stripping and lower-casing), splitting
    on whitespace and punctuation, then WordPiece with `##` continuations;
    words longer than `max_chars_per_word` become `[UNK]`. `tokenize` runs on
    tensorflow-text's fast kernels (`FastBertNormalizer` with Hugging Face's
    rules as its table, `FastWordpieceTokenizer` splitting words), redoing on
    regular expressions the rows whose words are long in bytes, and every row
    when `split_cjk=False`; so does `tokenize_with_offsets`, the offsets traced
    back through the normalizer's byte map (`kerasbert.tokenizers.fast_offsets`).
    Code points whose Unicode category or case changed across
    Unicode versions may differ (docs/tokenizers.md). `detokenize` joins pieces and
    words and cleans up spaces before punctuation as Hugging Face's `decode` does.
    Special-token strings inside the text (e.g. "[MASK]") are tokenized as
    text, not matched as special tokens.

    Args:
        vocabulary: the tokens, in id order (the lines of a `vocab.txt`).
        lowercase: lower-case the text (uncased models).
        strip_accents: remove accents after NFD; defaults to `lowercase`.
        split_cjk: put CJK ideographs in tokens of their own.
        max_chars_per_word: longer words become the unknown token.
        second_segment_id: the segment id of a pair's second text: 1, or 0 for
            DistilBERT, whose tokenizer gives no token types.

    Example:
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "qu", "##ick", "fox", "."]
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> tokenizer.tokenize(["The quick fox."]).to_list()
    [[5, 6, 7, 8, 9]]
    >>> tokenizer(["The fox"], max_length=6)["token_ids"].numpy().tolist()
    [[2, 5, 8, 3, 0, 0]]
    """

    def __init__(self, vocabulary, lowercase=True, strip_accents=None, split_cjk=True,
                 max_chars_per_word=100, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                 pad_token="[PAD]", mask_token="[MASK]", second_segment_id=1, **kwargs):
        special_tokens = {"pad": pad_token, "unk": unk_token, "cls": cls_token,
                          "sep": sep_token, "mask": mask_token}
        super().__init__(vocabulary, special_tokens, **kwargs)
        if second_segment_id not in (0, 1):
            raise ValueError(f"second_segment_id must be 0 or 1, got {second_segment_id!r}")
        self.second_segment_id = second_segment_id
        self.layout = dataclasses.replace(self.layout, second_segment_id=second_segment_id)
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.split_cjk = split_cjk
        self.max_chars_per_word = max_chars_per_word
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocabulary, suffix_indicator="##", max_bytes_per_word=4 * max_chars_per_word,
            token_out_type=tf.int32, unknown_token=unk_token, no_pretokenization=True,
            support_detokenization=True)
        self._fast = None

    def normalize(self, texts):
        """The normalized text, as the BertNormalizer leaves it (1-D tf.string)."""
        return normalize_text(texts, self.lowercase, self.strip_accents, self.split_cjk)

    def split_words(self, texts):
        """Ragged words `[batch, None]` of normalized texts: whitespace and punctuation split."""
        return tf_text.regex_split(texts, delim_regex_pattern=rf"\s+|{_PUNCTUATION}",
                                   keep_delim_regex_pattern=_PUNCTUATION)

    def _tokenize(self, texts):
        if not self.split_cjk:      # tensorflow-text's word splitter always splits CJK
            return self._tokenize_exactly(texts)
        normalizer, wordpiece = self.fast_kernels()
        normalized = normalizer.normalize(texts)
        pieces = wordpiece.tokenize(normalized)
        # The splitter limits a word by its bytes, Hugging Face by its characters: a row with a
        # word of more bytes than `max_chars_per_word` (an [UNK] spanning it) is redone exactly.
        # Only rows with an [UNK] can have one, and those are few: only they are looked at.
        is_unknown = tf.equal(pieces.flat_values, self.token_to_id(self.special_tokens["unk"]))
        return tf.cond(tf.reduce_any(is_unknown),
                       lambda: self._redo_over_long_words(texts, normalized, pieces, is_unknown),
                       lambda: pieces)

    def _redo_over_long_words(self, texts, normalized, pieces, is_unknown):
        rows = pieces.nrows(out_type=tf.int32)
        has_unknown = _any_per_row(is_unknown, pieces.value_rowids(), rows)
        suspects, starts, ends = self.fast_kernels()[1].tokenize_with_offsets(
            tf.boolean_mask(normalized, has_unknown))
        over_long = tf.logical_and(
            tf.equal(suspects.flat_values, self.token_to_id(self.special_tokens["unk"])),
            ends.flat_values - starts.flat_values > self.max_chars_per_word)
        over_long = _any_per_row(over_long, suspects.value_rowids(),
                                 suspects.nrows(out_type=tf.int32))
        redo = tf.scatter_nd(tf.where(has_unknown), over_long, [rows])
        return tf.cond(tf.reduce_any(redo),
                       lambda: _replace_rows(pieces, redo, texts, self._tokenize_exactly),
                       lambda: pieces)

    def fast_kernels(self):
        """`(normalizer, wordpiece)`: tensorflow-text's FastBertNormalizer with Hugging Face's
        table (`bert_normalizer_model`) and FastWordpieceTokenizer splitting words itself, as
        `tokenize` and `model_text.tflite` run them. Built on first use, outside any graph
        being traced. Words are limited to `max_chars_per_word` bytes (see `tokenize`)."""
        if self._fast is None:
            with tf.init_scope():
                table = bert_normalizer_model(self.lowercase, self.strip_accents)
                normalizer = tf_text.FastBertNormalizer(
                    model_buffer=tf.constant(np.frombuffer(table, dtype=np.uint8)))
                wordpiece = tf_text.FastWordpieceTokenizer(
                    vocab=self.vocabulary, suffix_indicator="##",
                    max_bytes_per_word=self.max_chars_per_word, token_out_type=tf.int32,
                    unknown_token=self.special_tokens["unk"], no_pretokenization=False)
            self._fast = (normalizer, wordpiece)
        return self._fast

    def _tokenize_exactly(self, texts):
        """The regular-expression path: normalization, word splitting, then WordPiece."""
        words = self.split_words(self.normalize(texts))
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self.max_chars_per_word
        flat_words = tf.where(too_long, self.special_tokens["unk"], words.flat_values)
        pieces = self._wordpiece.tokenize(flat_words)
        return words.with_flat_values(pieces).merge_dims(1, 2)

    def _tokenize_with_offsets(self, texts):
        if not self.split_cjk:      # tensorflow-text's word splitter always splits CJK
            return self._tokenize_with_offsets_exactly(texts)
        tokens = fast_tokens_with_offsets(*self.fast_kernels(), texts)
        # One ragged tensor of (id, start, end) rows, so that redone rows replace all three.
        found = tf.RaggedTensor.from_row_splits(
            tf.stack([tokens["ids"], tokens["char_start"], tokens["char_end"]], axis=1),
            tf.cast(tokens["splits"], tf.int64), validate=False)
        # As in `_tokenize`: a row with an [UNK] spanning more than `max_chars_per_word` bytes
        # is redone on the regular-expression path, which counts characters.
        over_long = tf.logical_and(
            tf.equal(tokens["ids"], self.token_to_id(self.special_tokens["unk"])),
            tokens["normalized_bytes"] > self.max_chars_per_word)
        redo = _any_per_row(over_long, tokens["row"], tf.size(texts))
        found = tf.cond(tf.reduce_any(redo),
                        lambda: _replace_rows(found, redo, texts, self._stacked_exact_offsets),
                        lambda: found)
        return tuple(found.with_flat_values(found.flat_values[:, column]) for column in range(3))

    def _stacked_exact_offsets(self, texts):
        ids, starts, ends = self._tokenize_with_offsets_exactly(texts)
        return ids.with_flat_values(tf.stack(
            [tf.cast(ragged.flat_values, tf.int32) for ragged in (ids, starts, ends)], axis=1))

    def _tokenize_with_offsets_exactly(self, texts):
        # Every BertNormalizer step acts on one character at a time (NFD's reordering of
        # combining marks aside, and those are stripped whenever NFD runs), so normalizing each
        # original character on its own and joining the results gives the normalized text, with
        # each normalized byte traceable to the original character it came from. Each distinct
        # character (code point) is normalized once.
        characters = tf.strings.unicode_decode(texts, "UTF-8")
        distinct, index = tf.unique(characters.flat_values)
        distinct = self.normalize(tf.strings.unicode_encode(distinct[:, tf.newaxis], "UTF-8"))
        normalized = tf.strings.reduce_join(characters.with_flat_values(tf.gather(distinct, index)),
                                            axis=-1)
        # Global (whole-batch) normalized byte position where each original character's bytes end.
        character_ends = tf.cumsum(tf.gather(tf.cast(tf.strings.length(distinct), tf.int64), index))
        row_byte_starts = tf.cumsum(tf.cast(tf.strings.length(normalized), tf.int64),
                                    exclusive=True)
        row_character_starts = characters.row_starts()

        words, word_starts, _ = tf_text.regex_split_with_offsets(
            normalized, delim_regex_pattern=rf"\s+|{_PUNCTUATION}",
            keep_delim_regex_pattern=_PUNCTUATION)
        flat_words = words.flat_values
        too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > self.max_chars_per_word
        pieces, piece_starts, piece_ends = self._wordpiece.tokenize_with_offsets(
            tf.where(too_long, self.special_tokens["unk"], flat_words))
        # A word replaced by the unknown token spans the whole word.
        piece_word = pieces.value_rowids()
        replaced = tf.gather(too_long, piece_word)
        piece_starts = tf.where(replaced, tf.zeros_like(piece_starts.flat_values),
                                piece_starts.flat_values)
        piece_ends = tf.where(replaced, tf.gather(tf.cast(tf.strings.length(flat_words), tf.int64),
                                                  piece_word), piece_ends.flat_values)

        piece_row = tf.gather(words.value_rowids(), piece_word)
        word_base = (tf.gather(word_starts.flat_values, piece_word)
                     + tf.gather(row_byte_starts, piece_row))
        # The character holding a byte is the first whose normalized bytes end after it.
        first = tf.searchsorted(character_ends, word_base + piece_starts, side="right",
                                out_type=tf.int64)
        last = tf.searchsorted(character_ends, word_base + piece_ends - 1, side="right",
                               out_type=tf.int64)
        row_base = tf.gather(row_character_starts, piece_row)
        starts = tf.cast(first - row_base, tf.int32)
        ends = tf.cast(last + 1 - row_base, tf.int32)

        def shaped(values):
            return words.with_flat_values(pieces.with_flat_values(values)).merge_dims(1, 2)

        return shaped(pieces.flat_values), shaped(starts), shaped(ends)

    def _detokenize(self, token_ids):
        return tf.strings.regex_replace(self._wordpiece.detokenize(token_ids), _DECODE_CLEANUP, r"\1")

    def get_config(self):
        config = super().get_config()
        config.update({
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "split_cjk": self.split_cjk,
            "max_chars_per_word": self.max_chars_per_word,
            "second_segment_id": self.second_segment_id,
            **{f"{name}_token": token for name, token in self.special_tokens.items()},
        })
        return config


def _replace_rows(ragged, rows, texts, redo):
    """`ragged` (one row per text) with the rows where `rows` (bool) is true replaced by
    `redo` (texts -> ragged) of their texts."""
    redone = redo(tf.boolean_mask(texts, rows))
    count = ragged.nrows()
    # Row i is `ragged`'s row i, or the redone row numbered by the redone rows before it.
    index = tf.where(rows, count + tf.cumsum(tf.cast(rows, tf.int64), exclusive=True),
                     tf.range(count))
    return tf.gather(tf.concat([ragged, redone], axis=0), index)


def _any_per_row(values, value_rows, rows):
    """Whether any of a ragged tensor's bool `values` is true, per row (bool [rows])."""
    return tf.math.unsorted_segment_max(tf.cast(values, tf.int32), value_rows, rows) > 0
