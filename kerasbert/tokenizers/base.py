"""The tokenizer base class: vocabulary, special tokens, and text -> packed encoder inputs."""

import keras
import tensorflow as tf

from kerasbert.tokenizers.packing import SpecialTokenLayout, pack
from kerasbert.tokenizers.text_inputs import to_text_tensor


class VocabularyError(ValueError):
    """A vocabulary that cannot serve a tokenizer (missing special tokens, duplicates, ...)."""


class Tokenizer(keras.layers.Layer):
    """Base of kerasbert's in-graph tokenizers.

    Subclasses set `special_tokens` (attribute name -> token string, e.g.
    `{"cls": "[CLS]"}`), `pair_separators` and `second_segment_id`, and
    implement `_tokenize(texts)` (1-D tf.string -> ragged int32 ids) and
    `_detokenize(ids)`. Each special token's id is an attribute named
    `<name>_token_id`. Calling the tokenizer tokenizes and packs one text or a
    pair into `token_ids` / `segment_ids` / `padding_mask`.

    Example (with the WordPiece subclass):
    >>> from kerasbert.tokenizers import WordPieceTokenizer
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi", "yo"])
    >>> tokenizer.cls_token_id, tokenizer.id_to_token(5), tokenizer.token_to_id("yo")
    (2, 'hi', 6)
    >>> packed = tokenizer(["hi"], ["yo yo"], max_length=8)
    >>> packed["token_ids"].numpy().tolist(), packed["padding_mask"].numpy().tolist()
    ([[2, 5, 3, 6, 6, 3, 0, 0]], [[1, 1, 1, 1, 1, 1, 0, 0]])
    """

    pair_separators = 1
    second_segment_id = 1

    def __init__(self, vocabulary, special_tokens, source="vocabulary", **kwargs):
        super().__init__(trainable=False, **kwargs)
        # Strings in, ragged ids out: keep Keras from converting either.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True
        self.vocabulary = list(vocabulary)
        self.special_tokens = dict(special_tokens)
        self._token_to_id = _index_vocabulary(self.vocabulary, source)
        missing = [token for token in self.special_tokens.values() if token not in self._token_to_id]
        if missing:
            raise VocabularyError(f"{source} lacks the special token(s) {missing}")
        for name, token in self.special_tokens.items():
            setattr(self, f"{name}_token_id", self._token_to_id[token])
        self.layout = SpecialTokenLayout(
            start_id=self.cls_token_id, end_id=self.sep_token_id, pad_id=self.pad_token_id,
            pair_separators=self.pair_separators, second_segment_id=self.second_segment_id)

    # --- vocabulary ---

    def vocabulary_size(self):
        return len(self.vocabulary)

    @property
    def special_token_ids(self):
        return sorted(self._token_to_id[token] for token in self.special_tokens.values())

    def id_to_token(self, token_id):
        token_id = int(token_id)
        if not 0 <= token_id < len(self.vocabulary):
            raise ValueError(f"Token id {token_id} is outside the vocabulary [0, {len(self.vocabulary)})")
        return self.vocabulary[token_id]

    def token_to_id(self, token):
        try:
            return self._token_to_id[token]
        except KeyError:
            raise ValueError(f"Token {token!r} is not in the vocabulary") from None

    # --- text <-> ids ---

    def tokenize(self, texts):
        """Ragged int32 ids `[batch, None]` of each text, without special tokens."""
        return self._tokenize(to_text_tensor(texts))

    def tokenize_with_offsets(self, texts):
        """Ids and character spans of each token: `(token_ids, starts, ends)`.

        Three ragged int32 `[batch, None]` tensors, without special tokens. Token
        `i` of text `b` came from `text[starts[b, i]:ends[b, i]]` of the original
        text, counted in Unicode characters (code points, as Python indexes a
        `str`), `end` exclusive: Hugging Face's `return_offsets_mapping`. The ids
        are those of `tokenize`. Runs in the TensorFlow graph.

        Example (with the WordPiece subclass):
        >>> from kerasbert.tokenizers import WordPieceTokenizer
        >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "qu", "##ick", "fox", "."]
        >>> tokenizer = WordPieceTokenizer(vocab)
        >>> ids, starts, ends = tokenizer.tokenize_with_offsets(["Thé  Quick fox."])
        >>> ids.to_list(), starts.to_list(), ends.to_list()
        ([[5, 6, 7, 8, 9]], [[0, 5, 7, 11, 14]], [[3, 7, 10, 14, 15]])
        """
        return self._tokenize_with_offsets(to_text_tensor(texts))

    def detokenize(self, token_ids):
        """The text of each row of ids (ragged or dense `[batch, seq]`), as 1-D tf.string."""
        if not isinstance(token_ids, tf.RaggedTensor):
            token_ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(token_ids))
        return self._detokenize(tf.cast(token_ids, tf.int32))

    def call(self, texts, pair_texts=None, max_length=None, truncation="longest_first",
             padding="max_length"):
        """Tokenize and pack: `{"token_ids", "segment_ids", "padding_mask"}` int32 `[batch, seq]`."""
        first = self.tokenize(texts)
        second = None if pair_texts is None else self._tokenize(to_text_tensor(pair_texts, "pair_texts"))
        if second is not None:
            tf.debugging.assert_equal(first.nrows(), second.nrows(),
                                      message="texts and pair_texts must have the same length")
        return pack(first, second, self.layout, max_length=max_length, truncation=truncation,
                    padding=padding)

    def _tokenize(self, texts):
        raise NotImplementedError

    def _tokenize_with_offsets(self, texts):
        raise NotImplementedError(f"{type(self).__name__} does not compute token offsets")

    def _detokenize(self, token_ids):
        raise NotImplementedError

    def get_config(self):
        config = super().get_config()
        config.pop("trainable", None)
        config.update({"vocabulary": list(self.vocabulary)})
        return config


def _index_vocabulary(vocabulary, source):
    index = {}
    for position, token in enumerate(vocabulary):
        if token in index:
            raise VocabularyError(
                f"{source}: token {token!r} appears twice, as ids {index[token]} and {position} "
                f"(lines {index[token] + 1} and {position + 1} of a vocabulary file)")
        index[token] = position
    if not index:
        raise VocabularyError(f"{source} is empty")
    return index


def vocabulary_from_ids(token_to_id, source):
    """A `{token: id}` mapping (a `vocab.json`) as a token list in id order.

    Raises `VocabularyError` naming `source` unless the ids are non-negative
    integers, each given to one token, covering exactly 0..n-1.

    Example:
    >>> vocabulary_from_ids({"b": 1, "a": 0}, "vocab.json")
    ['a', 'b']
    """
    by_id = {}
    for token, token_id in token_to_id.items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
            raise VocabularyError(f"{source}: token {token!r} has id {token_id!r}; "
                                  "ids must be non-negative integers")
        if token_id in by_id:
            raise VocabularyError(f"{source}: tokens {by_id[token_id]!r} and {token!r} "
                                  f"share the id {token_id}")
        by_id[token_id] = token
    missing = sorted(set(range(len(by_id))) - set(by_id))
    if missing:
        raise VocabularyError(f"{source}: ids must be 0..{len(by_id) - 1} without gaps; "
                              f"{len(missing)} missing, first {missing[:5]} "
                              f"(largest id is {max(by_id)})")
    return [by_id[token_id] for token_id in range(len(by_id))]
