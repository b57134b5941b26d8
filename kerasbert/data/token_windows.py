"""Pre-split words -> overlapping windows of sub-tokens with one label per word, and back.

Token classification (named entities, part of speech) labels words, but the
model sees sub-tokens in windows of `max_seq_length`. `word_windows` tokenizes
every word on its own (in the TensorFlow graph), labels the first sub-token of
each word and ignores the rest (-100), and cuts a sentence longer than one
window into windows that overlap. Each word is predicted by exactly one window:
of the windows holding its first sub-token, the one where that sub-token has
the most context on both sides. `word_predictions` turns the per-token logits
of all windows back into one label id per word, so every word of every
sentence gets a prediction and none is silently dropped.
"""

import numpy as np
import tensorflow as tf

from kerasbert.tokenizers.byte_pair import BytePairTokenizer
from kerasbert.tokenizers.packing import pack

IGNORED_LABEL = -100
NO_WORD = -1


def window_capacity(tokenizer, max_seq_length):
    """How many sub-tokens of a sentence one window holds: `max_seq_length` less the special tokens.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> window_capacity(tokenizer, 128)
    126
    """
    capacity = max_seq_length - tokenizer.layout.num_special_tokens(pair=False)
    if capacity < 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for sub-tokens next to "
                         f"the {tokenizer.layout.num_special_tokens(pair=False)} special tokens")
    return capacity


def resolve_overlap(overlap, capacity):
    """The overlap in sub-tokens (`None`: half a window, rounded down), checked against `capacity`.

    Consecutive windows of one sentence share `overlap` sub-tokens: window `k`
    starts at sub-token `k * (capacity - overlap)`. This is the `stride` of
    Hugging Face tokenizers; Google's `doc_stride` is the step,
    `capacity - overlap`.

    >>> resolve_overlap(None, 126), resolve_overlap(32, 126)
    (63, 32)
    """
    if overlap is None:
        return capacity // 2
    if not 0 <= overlap < capacity:
        raise ValueError(f"overlap must be in [0, {capacity}) (a window holds {capacity} "
                         f"sub-tokens), got {overlap}")
    return int(overlap)


def word_windows(words, word_labels, example_index, tokenizer, max_seq_length, overlap=None):
    """Windows of sub-tokens, labelled on the first sub-token of each word they predict.

    Runs in the TensorFlow graph (eagerly, in `tf.function` or `tf.data` maps).
    Each word is tokenized on its own; for byte-level BPE it is tokenized as if
    preceded by a space (Hugging Face's RoBERTa with `add_prefix_space=True`
    and `is_split_into_words=True`). A word with no sub-tokens at all (say,
    only characters the tokenizer drops) becomes the unknown token, so it
    still gets a prediction (Hugging Face leaves such a word out).

    A sentence whose sub-tokens fit in one window (`window_capacity`) makes
    one window; a longer one makes windows of `capacity` sub-tokens starting
    every `capacity - overlap` sub-tokens (see `resolve_overlap`), the last
    one reaching the sentence's end: the windows of Hugging Face's
    `return_overflowing_tokens=True` with `stride=overlap`. A word is predicted by the window where
    its first sub-token has the most sub-tokens on its shorter side (ties:
    the longer window, then the earlier one), Google's "max context" rule.

    Args:
        words: ragged `tf.string` `[sentences, words]`.
        word_labels: ragged int32 `[sentences, words]`, each word's label id.
        example_index: int32 `[sentences]`, a number for each sentence (its
            index in the file), copied to its windows.
        tokenizer: a kerasbert tokenizer.
        max_seq_length: the length of every packed window.
        overlap: sub-tokens shared by consecutive windows; `None`: half a window.

    Returns:
        A dict, one row per window, sentence by sentence: `token_ids`,
        `segment_ids`, `padding_mask` (packed as the tokenizer packs one text),
        `labels` (the word's label id where the window predicts a word, -100
        elsewhere) and `word_index` (the index of that word in its sentence,
        -1 elsewhere), all int32 `[windows, max_seq_length]`, and
        `example_index` int32 `[windows]`.

    Example:
    >>> from kerasbert.tokenizers import WordPieceTokenizer
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "new",
    ...                                 "york", "##er", "visits"])
    >>> words = tf.ragged.constant([["Yorker", "visits", "New", "York"]])
    >>> labels = tf.ragged.constant([[1, 0, 2, 3]])
    >>> windows = word_windows(words, labels, tf.constant([7]), tokenizer, max_seq_length=5,
    ...                        overlap=1)
    >>> windows["token_ids"].numpy().tolist()
    [[2, 6, 7, 8, 3], [2, 8, 5, 6, 3]]
    >>> windows["labels"].numpy().tolist()
    [[-100, 1, -100, 0, -100], [-100, -100, 2, 3, -100]]
    >>> windows["word_index"].numpy().tolist(), windows["example_index"].numpy().tolist()
    ([[-1, 0, -1, 1, -1], [-1, -1, 2, 3, -1]], [7, 7])
    """
    capacity = window_capacity(tokenizer, max_seq_length)
    step = capacity - resolve_overlap(overlap, capacity)
    words = tf.RaggedTensor.from_row_splits(
        tf.convert_to_tensor(words.flat_values, tf.string),
        tf.cast(words.row_splits, tf.int64))
    word_labels = tf.cast(word_labels.flat_values, tf.int32)

    # Every sub-token of every sentence, one after the other ("flat" order).
    pieces = _at_least_one(_tokenize_words(tokenizer, words.flat_values), tokenizer.unk_token_id)
    flat_ids = pieces.flat_values
    word_of_token = pieces.value_rowids()
    is_first = tf.equal(tf.range(tf.size(flat_ids, tf.int64)),
                        tf.gather(pieces.row_starts(), word_of_token))
    word_in_sentence = tf.range(tf.size(words.flat_values, tf.int64)) - tf.gather(
        words.row_starts(), words.value_rowids())
    token_word = tf.cast(tf.gather(word_in_sentence, word_of_token), tf.int32)
    token_label = tf.gather(word_labels, word_of_token)
    sentence_lengths = tf.reduce_sum(words.with_flat_values(pieces.row_lengths()), axis=1)
    sentence_starts = tf.cumsum(sentence_lengths, exclusive=True)

    # Windows: k = 0, 1, ... of each sentence start at k * step.
    windows_per_sentence = 1 + tf.maximum(sentence_lengths - capacity + step - 1, 0) // step
    window_sentence = tf.repeat(tf.range(tf.size(sentence_lengths, tf.int64)),
                                windows_per_sentence)
    window_number = tf.range(tf.size(window_sentence, tf.int64)) - tf.gather(
        tf.cumsum(windows_per_sentence, exclusive=True), window_sentence)
    window_start = window_number * step
    window_end = tf.minimum(window_start + capacity, tf.gather(sentence_lengths, window_sentence))
    positions = tf.ragged.range(window_start, window_end)  # [windows, tokens], in the sentence
    window_of_entry = positions.value_rowids()
    token = positions.flat_values + tf.gather(sentence_starts, tf.gather(window_sentence,
                                                                          window_of_entry))

    # Max context: the shorter side, then the window's length, then the earlier window.
    start = tf.gather(window_start, window_of_entry)
    end = tf.gather(window_end, window_of_entry)
    context = tf.minimum(positions.flat_values - start, end - 1 - positions.flat_values)
    score = (context * (capacity + 1) + (end - start)) * 2**32 - window_of_entry
    best = tf.math.unsorted_segment_max(score, token, tf.size(flat_ids, tf.int64))
    predicts = tf.gather(is_first, token) & tf.equal(score, tf.gather(best, token))

    labels = tf.where(predicts, tf.gather(token_label, token), IGNORED_LABEL)
    word_index = tf.where(predicts, tf.gather(token_word, token), NO_WORD)
    packed = pack(positions.with_flat_values(tf.gather(flat_ids, token)), None, tokenizer.layout,
                  max_length=max_seq_length)
    packed["labels"] = _pack_like_tokens(positions.with_flat_values(labels), IGNORED_LABEL,
                                         max_seq_length)
    packed["word_index"] = _pack_like_tokens(positions.with_flat_values(word_index), NO_WORD,
                                             max_seq_length)
    packed["example_index"] = tf.gather(tf.cast(example_index, tf.int32), window_sentence)
    return packed


def word_predictions(logits, example_index, word_index, sentence_lengths):
    """One label id per word of every sentence, from the per-token logits of its windows.

    Each word takes the argmax of the logits at the sub-token that its window
    predicts from (`word_index` holds its index there). Raises `ValueError`
    unless every word is predicted exactly once, as the windows of
    `word_windows` for these sentences guarantee.

    Args:
        logits: `[windows, max_seq_length, labels]`, in the order of the windows.
        example_index: `[windows]`, the windows' sentence numbers, 0-based
            indices into `sentence_lengths`.
        word_index: `[windows, max_seq_length]`, as `word_windows` gives it.
        sentence_lengths: the number of words of each sentence.

    Returns:
        A list with one int numpy array of label ids per sentence.

    Example:
    >>> logits = np.eye(3)[[[0, 2, 1, 0], [0, 0, 1, 0]]]  # label ids 0 2 1 0 and 0 0 1 0
    >>> word_index = [[-1, 0, 1, -1], [-1, -1, 2, -1]]
    >>> [ids.tolist() for ids in word_predictions(logits, [0, 0], word_index, [3])]
    [[2, 1, 1]]
    """
    logits = np.asarray(logits)
    example_index = np.asarray(example_index).reshape(-1)
    word_index = np.asarray(word_index)
    lengths = np.asarray(sentence_lengths, np.int64).reshape(-1)
    if logits.ndim != 3 or word_index.shape != logits.shape[:2] or \
            example_index.shape != logits.shape[:1]:
        raise ValueError(f"logits [windows, seq, labels] {logits.shape}, word_index "
                         f"[windows, seq] {word_index.shape} and example_index [windows] "
                         f"{example_index.shape} do not match")
    if example_index.size and not 0 <= example_index.min() <= example_index.max() < lengths.size:
        raise ValueError(f"example_index runs from {example_index.min()} to "
                         f"{example_index.max()}, but there are {lengths.size} sentences")
    windows, positions = np.nonzero(word_index >= 0)
    sentence = example_index[windows]
    word = word_index[windows, positions]
    if np.any(word >= lengths[sentence]):
        bad = np.flatnonzero(word >= lengths[sentence])[0]
        raise ValueError(f"window {windows[bad]} predicts word {word[bad]} of sentence "
                         f"{sentence[bad]}, which has {lengths[sentence[bad]]} words")
    sentence_starts = np.concatenate([[0], np.cumsum(lengths)])
    slot = sentence_starts[sentence] + word
    counts = np.bincount(slot, minlength=sentence_starts[-1])
    if np.any(counts != 1):
        bad = np.flatnonzero(counts != 1)[0]
        bad_sentence = np.searchsorted(sentence_starts, bad, side="right") - 1
        raise ValueError(f"word {bad - sentence_starts[bad_sentence]} of sentence {bad_sentence} "
                         f"is predicted by {counts[bad]} windows, not exactly one: the windows "
                         "are not those word_windows made for these sentences, in order")
    predicted = np.empty(sentence_starts[-1], np.int64)
    predicted[slot] = np.argmax(logits[windows, positions], axis=-1)
    return np.split(predicted, sentence_starts[1:-1])


def _tokenize_words(tokenizer, words):
    """Sub-token ids `[words, None]` of each word on its own."""
    if isinstance(tokenizer, BytePairTokenizer):
        # As after a space, whatever the tokenizer's own add_prefix_space.
        words = tf.strings.join([" ", words])
    pieces = tokenizer.tokenize(words)
    return tf.RaggedTensor.from_row_splits(tf.cast(pieces.flat_values, tf.int32),
                                           tf.cast(pieces.row_splits, tf.int64))


def _at_least_one(pieces, unknown_id):
    """`pieces` with `[unknown_id]` in place of each empty row."""
    unknown = tf.RaggedTensor.from_tensor(tf.fill([pieces.nrows(), 1], unknown_id),
                                          row_splits_dtype=pieces.row_splits.dtype)
    with_unknown = tf.concat([pieces, unknown], axis=1)
    keep = tf.maximum(pieces.row_lengths(), 1)
    position = tf.ragged.range(with_unknown.row_lengths())
    return tf.ragged.boolean_mask(with_unknown, position < tf.expand_dims(keep, 1))


def _pack_like_tokens(values, fill, max_seq_length):
    """Per-token `values` of each window where `pack` puts one text's tokens, `fill` elsewhere.

    Every family puts one special token before a single text.
    """
    rows = values.nrows()
    start = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(fill, values.dtype)),
                                        row_splits_dtype=values.row_splits.dtype)
    return tf.concat([start, values], axis=1).to_tensor(default_value=fill,
                                                         shape=[rows, max_seq_length])
