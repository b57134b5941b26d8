"""Masked-language-model masking of packed pretraining instances, in the TensorFlow graph.

`MaskedLmMasker` turns a batch of packed instances (`token_ids`, `segment_ids`,
`padding_mask`) into masked-LM training inputs as Google's BERT
`create_pretraining_data.py` does: it picks about `masked_lm_prob` of each row's
tokens (never special tokens or padding), replaces 80% of them by the mask token,
10% by a random token and keeps 10%, and adds the `masked_lm_positions`,
`masked_lm_ids` and `masked_lm_weights` the pretraining loss reads. It can mask
whole words (WordPiece `##` continuations, SentencePiece `▁` and byte-level BPE
`Ġ` word starts) and ALBERT's n-grams of up to `max_ngram` words.

All of it is vectorized TensorFlow with stateless random ops: the result is a
function of the instance and a seed, so it runs inside `tf.function` and
`tf.data.Dataset.map`. Masking in the input pipeline with a different seed each
time a sample is read gives RoBERTa's dynamic masking; masking once and storing
the result gives BERT's static masking.
"""

import collections.abc
import numbers

import numpy as np
import tensorflow as tf

# The features the masker reads; every other feature passes through unchanged.
TOKEN_IDS, PADDING_MASK = "token_ids", "padding_mask"
MASKED_LM_POSITIONS, MASKED_LM_IDS, MASKED_LM_WEIGHTS = (
    "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def word_start_flags(tokenizer):
    """For each token id of `tokenizer`'s vocabulary, whether the token begins a word.

    WordPiece: tokens without the `##` continuation prefix; SentencePiece:
    tokens starting with `▁`; byte-level BPE: tokens starting with `Ġ`. Special
    tokens count as word starts. (In a packed instance the masker also treats
    the first token of each segment as a word start, whatever the token.)

    >>> from kerasbert.tokenizers import WordPieceTokenizer
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "qu", "##ick"])
    >>> word_start_flags(tokenizer)
    [True, True, True, True, True, True, False]
    """
    from kerasbert.tokenizers import BytePairTokenizer, SentencePieceTokenizer, WordPieceTokenizer

    if isinstance(tokenizer, WordPieceTokenizer):
        flags = [not token.startswith("##") for token in tokenizer.vocabulary]
    elif isinstance(tokenizer, SentencePieceTokenizer):
        flags = [token.startswith("\u2581") for token in tokenizer.vocabulary]
    elif isinstance(tokenizer, BytePairTokenizer):
        flags = [token.startswith("\u0120") for token in tokenizer.vocabulary]
    else:
        raise TypeError(f"word_start_flags: tokenizer must be a WordPieceTokenizer, "
                        f"SentencePieceTokenizer or BytePairTokenizer, got {type(tokenizer).__name__}")
    for token_id in tokenizer.special_token_ids:
        flags[token_id] = True
    return flags


def ngram_span_starts(num_rows, num_words, max_ngram, seed):
    """Cut rows of `num_words` words into consecutive spans of 1..`max_ngram` words.

    Span lengths are drawn independently with P(length = k) proportional to
    1/k (ALBERT's n-gram masking) and laid end to end from word 0; the last
    span of a row is cut short at the row's end. Returns a bool tensor
    `[num_rows, num_words]`, True at the first word of each span.

    Args:
        num_rows, num_words: the shape (Python ints or scalar int tensors).
        max_ngram: the longest span, in words (a Python int >= 1).
        seed: a stateless random seed, int32/int64 shape `[2]`.

    >>> starts = ngram_span_starts(2, 8, 3, seed=[1, 2])
    >>> starts.shape, bool(tf.reduce_all(starts[:, 0]))
    (TensorShape([2, 8]), True)
    >>> ngram_span_starts(1, 4, 1, seed=[1, 2]).numpy().tolist()
    [[True, True, True, True]]
    """
    max_ngram = _check_int("max_ngram", max_ngram, minimum=1)
    probabilities = 1.0 / np.arange(1, max_ngram + 1)
    thresholds = tf.constant(np.cumsum(probabilities / probabilities.sum())[:-1], tf.float32)
    uniform = tf.random.stateless_uniform([num_rows, num_words, 1], seed)
    lengths = 1 + tf.reduce_sum(tf.cast(uniform >= thresholds, tf.int32), axis=-1)
    starts = tf.cumsum(lengths, axis=1, exclusive=True)
    # Count the spans starting at each word of each row; those starting at or after the
    # row's end land in an extra column per row, then dropped.
    width = num_words + 1
    cells = tf.minimum(starts, num_words) + tf.range(num_rows)[:, tf.newaxis] * width
    flags = tf.math.unsorted_segment_sum(tf.ones_like(cells), cells, num_rows * width)
    flags = tf.reshape(flags, tf.stack([num_rows, width]))
    return flags[:, :num_words] > 0


class MaskedLmMasker:
    """Masks batches of packed instances for masked-language-model pretraining.

    Call it with a features dict and a stateless seed (int32/int64 shape `[2]`).
    `features["token_ids"]` and `features["padding_mask"]` (1 real token, 0
    padding) are int `[batch, seq]` (or `[seq]`, one unbatched instance); other
    features pass through unchanged. It returns the dict with `token_ids` (int32)
    masked and three more features of width `max_predictions_per_seq`:
    `masked_lm_positions` (int32, ascending, 0-padded), `masked_lm_ids` (int32,
    the original ids there, 0-padded) and `masked_lm_weights` (float32, 1.0 for
    a prediction, 0.0 for padding).

    Selection, per row: the candidates are the real tokens that are not special
    tokens. The budget is `min(max_predictions_per_seq, max(1, round(n *
    masked_lm_prob)))` tokens with `n` the row's real tokens, special tokens
    included (Google's rule; Python 3 rounding, half to even), and at most the
    number of candidates. The candidates form units: single tokens, or with
    `whole_word` whole words (a word-start token and the continuation tokens
    after it; a segment's first token always starts a word), or with
    `max_ngram` > 1 spans of 1..`max_ngram` consecutive words of one segment,
    with lengths drawn with probability proportional to 1/length (see
    `ngram_span_starts`). The units are visited in a random order, and each is
    taken whole if it fits in what is left of the budget, skipped otherwise
    (Google's rule), so whole words and spans can leave a few budget tokens
    unused, but only when no unit left over is small enough to fit.

    Each selected token independently becomes the mask token with probability
    `mask_token_rate`, a token drawn uniformly from the vocabulary's non-special
    ids with probability `random_token_rate` (possibly the original token), and
    stays as it is otherwise.

    Args:
        vocabulary_size: the number of token ids.
        mask_token_id: the id of the mask token.
        special_token_ids: ids never masked nor drawn as random tokens.
        masked_lm_prob: the fraction of tokens to predict, in (0, 1].
        max_predictions_per_seq: the most predictions in one row.
        mask_token_rate, random_token_rate: see above; their sum is at most 1.
        word_starts: for each id, whether the token begins a word
            (`word_start_flags`); needed for `whole_word` and `max_ngram` > 1.
        whole_word: mask whole words only.
        max_ngram: mask spans of up to this many words (ALBERT: 3); > 1
            implies whole words.

    Dynamic masking in `tf.data`, a new mask each time an element is read: give
    each element its own seed, e.g. from its index after `repeat`:

        dataset = instances.repeat().batch(256).enumerate().map(
            lambda index, batch: masker(batch, tf.stack([tf.constant(7, tf.int64), index])))

    (or zip with `tf.data.Dataset.random(seed).batch(2)`). For static masking,
    run the same once over the data and write the result out.

    Example:
    >>> from kerasbert.tokenizers import WordPieceTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "qu", "##ick", "fox", "runs"]
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> masker = MaskedLmMasker.for_tokenizer(tokenizer, masked_lm_prob=0.3,
    ...                                       max_predictions_per_seq=4, whole_word=True)
    >>> batch = tokenizer(["the quick fox runs"], max_length=10)
    >>> masked = masker(batch, seed=[3, 0])
    >>> masked["masked_lm_weights"].numpy().tolist()
    [[1.0, 1.0, 0.0, 0.0]]
    >>> masked["masked_lm_positions"].numpy().tolist(), masked["masked_lm_ids"].numpy().tolist()
    ([[2, 3, 0, 0]], [[6, 7, 0, 0]])
    >>> masked["token_ids"].numpy().tolist()
    [[2, 5, 4, 4, 8, 9, 3, 0, 0, 0]]
    """

    def __init__(self, vocabulary_size, mask_token_id, special_token_ids, *, masked_lm_prob=0.15,
                 max_predictions_per_seq=20, mask_token_rate=0.8, random_token_rate=0.1,
                 word_starts=None, whole_word=False, max_ngram=1):
        self.vocabulary_size = _check_int("vocabulary_size", vocabulary_size, minimum=1)
        self.mask_token_id = _check_token_id("mask_token_id", mask_token_id, self.vocabulary_size)
        self.special_token_ids = sorted({_check_token_id("special_token_ids", token_id,
                                                         self.vocabulary_size)
                                         for token_id in special_token_ids})
        if not (isinstance(masked_lm_prob, numbers.Real) and 0.0 < masked_lm_prob <= 1.0):
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob!r}")
        self.masked_lm_prob = float(masked_lm_prob)
        self.max_predictions_per_seq = _check_int("max_predictions_per_seq",
                                                  max_predictions_per_seq, minimum=1)
        for name, rate in (("mask_token_rate", mask_token_rate),
                           ("random_token_rate", random_token_rate)):
            if not (isinstance(rate, numbers.Real) and 0.0 <= rate <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {rate!r}")
        if mask_token_rate + random_token_rate > 1.0 + 1e-9:
            raise ValueError(f"mask_token_rate + random_token_rate must be at most 1, got "
                             f"{mask_token_rate} + {random_token_rate}")
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)
        self.max_ngram = _check_int("max_ngram", max_ngram, minimum=1)
        self.whole_word = bool(whole_word)
        if word_starts is not None:
            word_starts = [bool(flag) for flag in word_starts]
            if len(word_starts) != self.vocabulary_size:
                raise ValueError(f"word_starts must have one flag per token id: "
                                 f"{self.vocabulary_size} (vocabulary_size), got {len(word_starts)}")
        elif self.whole_word or self.max_ngram > 1:
            option = "whole_word=True" if self.whole_word else f"max_ngram={self.max_ngram}"
            raise ValueError(f"{option} needs word_starts (e.g. word_start_flags(tokenizer))")
        self.word_starts = word_starts

        is_special = np.zeros(self.vocabulary_size, bool)
        is_special[self.special_token_ids] = True
        self._is_special = tf.constant(is_special)
        self._non_special_ids = tf.constant(np.flatnonzero(~is_special), tf.int32)
        if self.random_token_rate > 0 and not self._non_special_ids.shape[0]:
            raise ValueError("random_token_rate > 0 needs non-special token ids, but every id "
                             "is in special_token_ids")
        self._word_starts = None if word_starts is None else tf.constant(word_starts)

    @classmethod
    def for_tokenizer(cls, tokenizer, **kwargs):
        """A masker for `tokenizer`'s vocabulary, mask token, special tokens and word starts.

        Keyword arguments are passed on to the constructor.

        >>> from kerasbert.tokenizers import WordPieceTokenizer
        >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
        >>> masker = MaskedLmMasker.for_tokenizer(tokenizer, max_predictions_per_seq=5)
        >>> masker.vocabulary_size, masker.mask_token_id, masker.special_token_ids
        (6, 4, [0, 1, 2, 3, 4])
        """
        kwargs.setdefault("word_starts", word_start_flags(tokenizer))
        return cls(len(tokenizer.vocabulary), tokenizer.mask_token_id, tokenizer.special_token_ids,
                   **kwargs)

    def __call__(self, features, seed):
        """The masked features (see the class docstring); `seed` is int32/int64 `[2]`."""
        token_ids, padding_mask, unbatched = self._read_features(features)
        span_seed, order_seed, action_seed, random_token_seed = tf.unstack(
            tf.random.experimental.stateless_split(self._check_seed(seed), 4))
        candidates = self._candidates(token_ids, padding_mask)
        unit_starts = self._unit_starts(token_ids, candidates, span_seed)
        chosen = _select_units(unit_starts, candidates, self._budget(padding_mask, candidates),
                               order_seed, self.max_predictions_per_seq,
                               single_token_units=not self._masks_words())

        action = tf.random.stateless_uniform(tf.shape(token_ids), action_seed)
        masked_ids = tf.where(chosen & (action < self.mask_token_rate), self.mask_token_id,
                              token_ids)
        if self.random_token_rate > 0:
            random_tokens = tf.gather(self._non_special_ids, tf.random.stateless_uniform(
                tf.shape(token_ids), random_token_seed, minval=0,
                maxval=int(self._non_special_ids.shape[0]), dtype=tf.int32))
            replace = chosen & (action >= self.mask_token_rate) & (
                action < self.mask_token_rate + self.random_token_rate)
            masked_ids = tf.where(replace, random_tokens, masked_ids)

        positions, weights = _sorted_positions(chosen, self.max_predictions_per_seq)
        labels = tf.gather(token_ids, positions, batch_dims=1) * tf.cast(weights, tf.int32)
        outputs = {TOKEN_IDS: masked_ids, MASKED_LM_POSITIONS: positions, MASKED_LM_IDS: labels,
                   MASKED_LM_WEIGHTS: tf.cast(weights, tf.float32)}
        if unbatched:
            outputs = {name: tf.squeeze(value, 0) for name, value in outputs.items()}
        return {**features, **outputs}

    def unit_starts(self, features, seed):
        """Where `__call__(features, seed)` begins its masking units: bool, like `token_ids`.

        True at the first token of each unit (token, whole word or n-gram span)
        it chooses from; a unit runs to the next start, special token or padding.

        >>> masker = MaskedLmMasker(10, 4, [0, 2, 3, 4])
        >>> features = {"token_ids": [2, 5, 6, 3, 0], "padding_mask": [1, 1, 1, 1, 0]}
        >>> masker.unit_starts(features, seed=[0, 1]).numpy().tolist()
        [False, True, True, False, False]
        """
        token_ids, padding_mask, unbatched = self._read_features(features)
        span_seed = tf.random.experimental.stateless_split(self._check_seed(seed), 4)[0]
        starts = self._unit_starts(token_ids, self._candidates(token_ids, padding_mask), span_seed)
        return tf.squeeze(starts, 0) if unbatched else starts

    # --- steps ---

    def _read_features(self, features):
        if not isinstance(features, collections.abc.Mapping):
            raise TypeError(f"features must be a dict of tensors, got {type(features).__name__}")
        for name in (TOKEN_IDS, PADDING_MASK):
            if name not in features:
                raise KeyError(f"features lack {name!r}; they have {sorted(features)}")
        token_ids = tf.cast(features[TOKEN_IDS], tf.int32)
        padding_mask = tf.cast(features[PADDING_MASK], tf.int32)
        rank = token_ids.shape.rank
        if rank not in (1, 2):
            raise ValueError(f"features[{TOKEN_IDS!r}] must be [batch, seq] or [seq], "
                             f"got shape {token_ids.shape}")
        if not padding_mask.shape.is_compatible_with(token_ids.shape):
            raise ValueError(f"features[{PADDING_MASK!r}] has shape {padding_mask.shape}, "
                             f"features[{TOKEN_IDS!r}] {token_ids.shape}; they must be equal")
        if rank == 1:
            return token_ids[tf.newaxis], padding_mask[tf.newaxis], True
        return token_ids, padding_mask, False

    @staticmethod
    def _check_seed(seed):
        seed = tf.convert_to_tensor(seed)
        if seed.dtype not in (tf.int32, tf.int64) or not seed.shape.is_compatible_with([2]):
            raise ValueError(f"seed must be int32 or int64 of shape [2], got {seed.dtype.name} "
                             f"{seed.shape}")
        return seed

    def _candidates(self, token_ids, padding_mask):
        return (padding_mask > 0) & ~tf.gather(self._is_special, token_ids)

    def _masks_words(self):
        return self.whole_word or self.max_ngram > 1

    def _unit_starts(self, token_ids, candidates, seed):
        if not self._masks_words():
            return candidates
        # A candidate after a non-candidate (or at position 0) begins a segment, and a word.
        previous_is_candidate = tf.pad(candidates[:, :-1], [[0, 0], [1, 0]])
        segment_starts = candidates & ~previous_is_candidate
        word_starts = candidates & (tf.gather(self._word_starts, token_ids) | segment_starts)
        if self.max_ngram == 1:
            return word_starts
        word_index = tf.maximum(tf.cumsum(tf.cast(word_starts, tf.int32), axis=1) - 1, 0)
        shape = tf.shape(token_ids)
        span_starts = ngram_span_starts(shape[0], shape[1], self.max_ngram, seed)
        return word_starts & (tf.gather(span_starts, word_index, batch_dims=1) | segment_starts)

    def _budget(self, padding_mask, candidates):
        num_real = tf.cast(tf.reduce_sum(padding_mask, axis=1), tf.float64)
        budget = tf.cast(tf.round(num_real * self.masked_lm_prob), tf.int32)
        budget = tf.clip_by_value(budget, 1, self.max_predictions_per_seq)
        return tf.minimum(budget, tf.reduce_sum(tf.cast(candidates, tf.int32), axis=1))


def _select_units(unit_starts, candidates, budget, seed, max_predictions, single_token_units):
    """The candidate tokens of the units taken under Google's budget rule: bool `[batch, seq]`.

    Each unit slot gets a distinct random key; units are visited in descending
    key order. A unit has at least one token, so the units taken before the
    first one that overflows the budget are among the first `max_predictions`
    visited: only those are sorted. With `single_token_units` that is all;
    otherwise the later units that fit what is left are taken one a row per
    step (`_fill_remaining_budget`).
    """
    shape = tf.shape(unit_starts)
    batch, length = shape[0], shape[1]
    unit_index = tf.cumsum(tf.cast(unit_starts, tf.int32), axis=1) - 1
    num_units = tf.reduce_sum(tf.cast(unit_starts, tf.int32), axis=1)
    # Tokens per unit slot [batch, seq]; non-candidates go to an extra, dropped segment.
    segment = tf.where(candidates, tf.range(batch)[:, tf.newaxis] * length + unit_index,
                       batch * length)
    unit_sizes = tf.reshape(tf.math.unsorted_segment_sum(
        tf.cast(candidates, tf.int32), segment, batch * length + 1)[:-1], shape)

    # Distinct random keys: a random number, then the slot index to break ties; -1 for no unit.
    slots = tf.range(length, dtype=tf.int64)[tf.newaxis]
    length64 = tf.cast(length, tf.int64)
    keys = tf.random.stateless_uniform(shape, seed, minval=0, maxval=(2 ** 62) // length64,
                                       dtype=tf.int64) * length64 + slots
    valid = slots < tf.cast(num_units[:, tf.newaxis], tf.int64)
    keys = tf.where(valid, keys, -1)

    visited = tf.math.top_k(keys, k=tf.minimum(max_predictions + 1, length), sorted=True)
    visited_sizes = tf.gather(unit_sizes, visited.indices, batch_dims=1)
    fits = (tf.cumsum(visited_sizes, axis=1) <= budget[:, tf.newaxis]) & (visited_sizes > 0)
    # The taken prefix of the visiting order is the units with keys >= the last one's key.
    num_taken = tf.reduce_sum(tf.cast(fits, tf.int32), axis=1)
    no_key = tf.int64.max
    padded_keys = tf.concat([tf.fill([batch, 1], no_key), visited.values], axis=1)
    last_taken_key = tf.gather(padded_keys, num_taken, batch_dims=1)
    taken = valid & (keys >= last_taken_key[:, tf.newaxis])
    if not single_token_units:
        remaining = budget - tf.reduce_sum(tf.where(fits, visited_sizes, 0), axis=1)
        taken = _fill_remaining_budget(taken, keys, unit_sizes, remaining, last_taken_key,
                                       max_predictions)
    return candidates & tf.gather(taken, tf.maximum(unit_index, 0), batch_dims=1)


def _fill_remaining_budget(taken, keys, unit_sizes, remaining, last_key, max_predictions):
    """Continue Google's loop after the first unit that overflows: take each later unit that fits.

    `last_key` is the key of the last unit taken so far; units with smaller
    keys come later in the visiting order. The units skipped on the way cannot
    fit later, as what is left of the budget only shrinks.
    """

    def next_fitting(last_key, remaining):
        fits = (keys < last_key[:, tf.newaxis]) & (keys >= 0) & (
            unit_sizes <= remaining[:, tf.newaxis])
        return tf.reduce_max(tf.where(fits, keys, -1), axis=1)

    def step(taken, remaining, next_key):
        picked = tf.equal(keys, next_key[:, tf.newaxis]) & (next_key[:, tf.newaxis] >= 0)
        remaining -= tf.reduce_sum(tf.where(picked, unit_sizes, 0), axis=1)
        return taken | picked, remaining, next_fitting(next_key, remaining)

    taken, _, _ = tf.while_loop(
        lambda taken, remaining, next_key: tf.reduce_any(next_key >= 0), step,
        (taken, remaining, next_fitting(last_key, remaining)), maximum_iterations=max_predictions)
    return taken


def _sorted_positions(chosen, width):
    """Ascending positions of the True entries of each row, 0-padded to `width`, and their weights."""
    length = tf.shape(chosen)[1]
    # Score = length - position for chosen tokens, 0 otherwise; the top scores are the
    # chosen positions in ascending order. Pad so that top_k always has `width` entries.
    scores = tf.where(chosen, length - tf.range(length)[tf.newaxis], 0)
    scores = tf.pad(scores, [[0, 0], [0, tf.maximum(0, width - length)]])
    top = tf.math.top_k(scores, k=width, sorted=True).values
    weights = top > 0
    positions = tf.where(weights, length - top, 0)
    return positions, weights


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_token_id(name, value, vocabulary_size):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or not 0 <= value < vocabulary_size:
        raise ValueError(f"{name}: {value!r} is not a token id in [0, {vocabulary_size})")
    return int(value)
