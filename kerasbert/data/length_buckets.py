"""Length-bucketed batches: pad each batch to a short bucket length, not to `max_seq_length`.

Real text is short (GLUE's CoLA averages about 11 word pieces, SST-2 about 25), so padding every
batch to `max_seq_length` spends most of the model's work on padding. Here each batch is padded
to the smallest of `bucket_lengths(max_seq_length)` that holds its longest example, and XLA
compiles at most once per bucket (it compiles once per shape; free lengths would recompile all
the time). In training, a pass's examples are also grouped by length within windows of
`WINDOW_BATCHES` batches, stratified by label, so that batches are nearly uniform in length and
each still holds the labels in their window's proportions.

    bucket_lengths(max_seq_length)       16, 32, 64, 128, 256, 384, 512 below it, then itself
    length_grouped(lengths, batch_size)  a `make_pass` for `kerasbert.data.passes.example_passes`
    score_strata(scores)                 regression scores as strata (their quintiles)
    trim_to_bucket(batch, buckets)       cut a batch's padded tensors to their bucket

Order. In training (`shuffle=True`), a pass's order is the random order `example_passes` makes;
each window of `window_batches * batch_size` consecutive examples is grouped by length and cut
into batches, and the batches of the window are played in an order drawn from `seed` and the
window's first example: random, the same for the same seed, and a pure function of the pass (no
generator state), so a checkpointed iterator resumes exactly. Grouping with `strata` (label ids):
each stratum's examples in the window are sorted by length (stably), each example's place in
its stratum becomes a quantile, and the window is cut in the order of those quantiles, so batch
j of a window holds roughly the j-th slice by length of every label, in the window's label
proportions. Without `strata`, the window is simply sorted by length. Without `shuffle`
(evaluation and prediction), batches hold consecutive examples in the examples' order, each
padded to its own bucket: `model.predict` on such a dataset gives rows in the examples' order, as
with fixed padding (`example_index` in each batch still says which example each row is).

Since every window but the last holds a whole number of batches, a pass has as many batches
as without buckets, and the batches as many examples.
"""

import numpy as np
import tensorflow as tf

BUCKETS = (16, 32, 64, 128, 256, 384, 512)
# Windows of this many batches are grouped by length in training. Sorting windows of 100
# batches by length alone broke learning on the shipped gloss task (the distillation proof's
# teacher reached 0.29 dev accuracy against about 0.41 with fixed padding): a gloss's length says
# much about its label, so a length-sorted batch is far from a random sample of the labels.
# Stratified by label, windows of 10, 25 and 100 batches all kept the fine-tuning proof's 3-seed
# mean dev accuracy within 1 point of fixed padding (-0.35, +0.65, +0.67); 25 is the largest
# whose every seed stays within 1.5 points below it (100 lost 2.5 on one seed); docs/finetuning.md,
# `python -m tests.proofs.length_buckets select`.
WINDOW_BATCHES = 25
# Quantile bins of regression scores used as strata (`score_strata`).
SCORE_STRATA = 5
# Second word of the seed of the batch orders (no seed shared with other uses of the user seed).
_SALT = 0x0B0C4E75


def bucket_lengths(max_seq_length):
    """The bucket lengths of batches of at most `max_seq_length` tokens: those of `BUCKETS`
    below it, then `max_seq_length` itself.

    >>> bucket_lengths(128), bucket_lengths(100), bucket_lengths(12)
    ((16, 32, 64, 128), (16, 32, 64, 100), (12,))
    """
    if max_seq_length < 1:
        raise ValueError(f"max_seq_length must be at least 1, got {max_seq_length}")
    return tuple(length for length in BUCKETS if length < max_seq_length) + (max_seq_length,)


def bucket_of(length, buckets):
    """The smallest of `buckets` (ascending) that is at least `length` (a scalar tensor or int).

    >>> int(bucket_of(17, (16, 32, 64)))
    32
    """
    buckets = tf.constant(buckets, tf.int32)
    position = tf.searchsorted(buckets, tf.reshape(tf.cast(length, tf.int32), [1]), side="left")
    return tf.gather(buckets, tf.minimum(position[0], tf.size(buckets) - 1))


def length_grouped(lengths, batch_size, *, strata=None, shuffle=False, seed=0,
                   drop_remainder=False, window_batches=WINDOW_BATCHES):
    """A `make_pass` for `kerasbert.data.passes.example_passes`: batches (int64 example indices)
    of a pass's examples grouped by their `lengths` (one per example) within each stratum of
    `strata` (non-negative int ids, one per example, such as label ids; None: one stratum), in
    the order the module docstring describes. Without `shuffle`, batches keep the examples'
    order.

    >>> from kerasbert.data.passes import example_passes
    >>> make_pass = length_grouped([5, 1, 4, 2, 3], batch_size=2)
    >>> [batch.numpy().tolist() for batch in example_passes(5, make_pass)]
    [[0, 1], [2, 3], [4]]
    >>> make_pass = length_grouped([9, 1, 8, 2, 7, 3], batch_size=2, strata=[0, 1, 0, 1, 0, 1],
    ...                            shuffle=True)
    >>> sorted(sorted(batch.numpy().tolist()) for batch in example_passes(6, make_pass))
    [[0, 5], [1, 4], [2, 3]]
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if window_batches < 1:
        raise ValueError(f"window_batches must be at least 1, got {window_batches}")
    lengths = np.asarray(lengths)
    strata = np.zeros(lengths.shape, np.int64) if strata is None else np.asarray(strata)
    if strata.shape != lengths.shape or not np.issubdtype(strata.dtype, np.integer):
        raise ValueError(f"strata must be integer ids, one per example: got {strata.dtype} "
                         f"{list(strata.shape)} for {list(lengths.shape)} lengths")
    if strata.size and strata.min() < 0:
        raise ValueError(f"strata must be non-negative, got {strata.min()}")
    if not shuffle:
        return lambda indices: indices.batch(batch_size, drop_remainder=drop_remainder)
    lengths, strata = tf.constant(lengths, tf.int64), tf.constant(strata, tf.int64)
    window = window_batches * batch_size
    key = tf.constant([seed, _SALT], tf.int64)

    def grouped(indices):
        """`indices` in the order of their length quantile within their stratum."""
        window_lengths, window_strata = tf.gather(lengths, indices), tf.gather(strata, indices)
        by_stratum = tf.argsort(window_strata * (tf.reduce_max(window_lengths) + 1)
                                + window_lengths, stable=True)
        sorted_strata = tf.gather(window_strata, by_stratum)
        counts = tf.math.bincount(sorted_strata, dtype=tf.int64)
        rank = (tf.range(tf.size(indices, out_type=tf.int64))
                - tf.gather(tf.cumsum(counts, exclusive=True), sorted_strata))
        quantile = ((tf.cast(rank, tf.float64) + 0.5)
                    / tf.cast(tf.gather(counts, sorted_strata), tf.float64))
        return tf.gather(indices, tf.gather(by_stratum, tf.argsort(quantile, stable=True)))

    def window_batches_of(indices):
        ordered = grouped(indices)
        count = tf.size(ordered, out_type=tf.int64)
        usable = count // batch_size * batch_size if drop_remainder else count
        starts = tf.range(0, usable, batch_size, dtype=tf.int64)
        batches = tf.size(starts, out_type=tf.int64)
        # index_shuffle refuses an empty index vector: shuffle at least one index, keep none
        # when the window makes no batch (a short last window with `drop_remainder`).
        order = tf.random.experimental.index_shuffle(
            tf.range(tf.maximum(batches, 1)),
            tf.random.experimental.stateless_fold_in(key, indices[0]),
            tf.maximum(batches - 1, 0))[:batches]
        starts = tf.gather(starts, order)
        shape = [batch_size if drop_remainder else None]
        return tf.data.Dataset.from_tensor_slices(starts).map(lambda start: tf.ensure_shape(
            ordered[start:tf.minimum(start + batch_size, count)], shape))

    def make_pass(indices):
        return indices.batch(window).flat_map(window_batches_of)
    return make_pass


def score_strata(scores, bins=SCORE_STRATA):
    """Strata for `length_grouped` from regression `scores`: each score's quantile bin (0 to
    `bins - 1`), so that length-grouped batches keep low and high scores mixed.

    >>> score_strata([0.0, 5.0, 2.5, 1.0, 4.0], bins=5).tolist()
    [0, 4, 2, 1, 3]
    """
    scores = np.asarray(scores, np.float64)
    edges = np.quantile(scores, np.arange(1, bins) / bins)
    return np.searchsorted(edges, scores, side="right").astype(np.int64)


def trim_to_bucket(batch, buckets, padded=("token_ids", "segment_ids", "padding_mask")):
    """`batch` with its `padded` tensors (`[..., max_seq_length]`: `[batch, max_seq_length]`,
    or `[batch, choices, max_seq_length]` for multiple choice; padding at the end as
    `padding_mask` says) cut on their last axis to the bucket of the longest sequence.

    >>> batch = {"token_ids": tf.ones([2, 8], tf.int32), "segment_ids": tf.zeros([2, 8], tf.int32),
    ...          "padding_mask": tf.constant([[1] * 3 + [0] * 5, [1] * 5 + [0] * 3])}
    >>> trim_to_bucket(batch, (4, 6, 8))["token_ids"].shape.as_list()
    [2, 6]
    """
    mask = batch["padding_mask"]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1))
    length = bucket_of(longest, buckets)
    return {name: value[..., :length] if name in padded else value
            for name, value in batch.items()}


def packed_lengths(tokenizer, text_a, text_b=None, max_seq_length=128, chunk=4096, **options):
    """The number of tokens of each example as `tokenizer` packs it (truncated to
    `max_seq_length`): int32 numpy array, computed `chunk` examples at a time.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> packed_lengths(tokenizer, ["a file", "a"], max_seq_length=8).tolist()
    [4, 3]
    """
    lengths = []
    for start in range(0, len(text_a), chunk):
        pair = None if text_b is None else tf.constant(text_b[start:start + chunk])
        packed = tokenizer(tf.constant(text_a[start:start + chunk]), pair,
                           max_length=max_seq_length, **options)
        lengths.append(tf.reduce_sum(tf.cast(packed["padding_mask"], tf.int32), axis=1).numpy())
    return np.concatenate(lengths).astype(np.int32)


def in_example_order(outputs, example_index):
    """`outputs` (an array, or a dict of arrays, one row per example in batch order) put back in
    the examples' order: row `i` of the result is the output of example `i`, given each row's
    `example_index`.

    >>> in_example_order(np.array([[0.5], [0.1], [0.9]]), [2, 0, 1]).tolist()
    [[0.1], [0.9], [0.5]]
    """
    example_index = np.asarray(example_index)
    if isinstance(outputs, dict):
        return {name: in_example_order(value, example_index) for name, value in outputs.items()}
    outputs = np.asarray(outputs)
    if sorted(example_index.tolist()) != list(range(len(outputs))):
        raise ValueError(f"example_index must be a permutation of 0..{len(outputs) - 1}")
    ordered = np.empty_like(outputs)
    ordered[example_index] = outputs
    return ordered
