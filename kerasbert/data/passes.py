"""Passes over an in-memory set of examples in an order that depends only on a seed and the pass.

A training run that is stopped and restarted restores its `tf.data` iterator from a checkpoint
and must then see the same batches as a run that was never stopped. TensorFlow's
`Dataset.shuffle(reshuffle_each_iteration=True)` inside `repeat()` draws each pass's seeds from
a generator that the passes share, and an iterator restored in a new process does not always
give the generator back the state it had: measured with TensorFlow 2.21, a pipeline
`shuffle -> batch -> prefetch -> repeat` restored in the middle of its first pass finished that
pass right, then played the order of the uninterrupted run's fourth pass as its second.

`example_passes` avoids that state: with several passes, pass k is the permutation
`tf.random.experimental.index_shuffle` makes from `seed` with `k` folded in, a pure function, so the
iterator's checkpoint holds nothing but positions. A single pass (`epochs=1`) keeps
TensorFlow's reshuffling, so `model.fit(dataset, epochs=N)` still sees a new order every epoch.
"""

import tensorflow as tf

# Second word of the seed the pass numbers are folded into, so these permutations share no seed
# with other stateless uses of the same user seed.
_SALT = 0x5EED0A55


def example_passes(count, make_pass, *, shuffle=False, seed=0, epochs=1):
    """`make_pass(indices)` for each of `epochs` passes over `count` examples (None: forever),
    concatenated; `indices` is a `tf.data.Dataset` of int64 example indices in the pass's order.

    Without `shuffle`, every pass is in order. With `shuffle` and `epochs=1`, the one pass is in
    a random order that TensorFlow draws again each time the dataset is iterated
    (`Dataset.shuffle(count, seed, reshuffle_each_iteration=True)`). With `shuffle` and several
    passes (or None), pass k is `index_shuffle` of `(seed, k)`: the same for the same seed in any
    process, so an iterator restored from a checkpoint goes on as an uninterrupted one would
    (see the module docstring). `make_pass` sees one pass at a time, so batches never mix passes.

    >>> passes = example_passes(4, lambda indices: indices.batch(3), shuffle=True, seed=1,
    ...                         epochs=2)
    >>> batches = [batch.numpy().tolist() for batch in passes]
    >>> [len(batch) for batch in batches], sorted(batches[0] + batches[1])
    ([3, 1, 3, 1], [0, 1, 2, 3])
    >>> batches == [batch.numpy().tolist() for batch in passes]  # the same passes every time
    True
    """
    if count < 1:
        raise ValueError(f"example_passes needs at least one example, got {count}")
    if epochs is not None and epochs < 1:
        raise ValueError(f"epochs must be at least 1 (or None: forever), got {epochs}")
    indices = tf.data.Dataset.range(count)
    if not shuffle:
        return make_pass(indices).repeat(epochs)
    if epochs == 1:
        return make_pass(indices.shuffle(count, seed=seed, reshuffle_each_iteration=True))
    numbers = tf.data.Dataset.counter() if epochs is None else tf.data.Dataset.range(epochs)
    return numbers.flat_map(lambda number: make_pass(_permuted(count, seed, number)))


def _permuted(count, seed, number):
    """The indices 0..count-1 in the order of pass `number` (a scalar int64 tensor)."""
    key = tf.random.experimental.stateless_fold_in(tf.constant([seed, _SALT], tf.int64), number)
    last = tf.constant(count - 1, tf.int64)
    return tf.data.Dataset.range(count).map(
        lambda index: tf.random.experimental.index_shuffle(index, key, last))


def batches_of(columns, batch_size, drop_remainder=False):
    """A `make_pass` for `example_passes`: batches of the rows of `columns` (a dict of equally
    long arrays, lists or ragged tensors, one row per example) that a pass's indices pick, as
    `Dataset.from_tensor_slices(columns).batch(batch_size)` gives them in order.

    >>> make_pass = batches_of({"id": [10, 11, 12]}, batch_size=2)
    >>> [batch["id"].numpy().tolist() for batch in example_passes(3, make_pass)]
    [[10, 11], [12]]
    """
    rows = rows_of(columns)

    def make_pass(indices):
        return indices.batch(batch_size, drop_remainder=drop_remainder).map(rows)
    return make_pass


def rows_of(columns):
    """A function from a vector of example indices to those rows of `columns` (a dict of
    equally long arrays, lists or ragged tensors), as a dict of tensors.

    >>> rows_of({"id": [10, 11, 12]})(tf.constant([2, 0]))["id"].numpy().tolist()
    [12, 10]
    """
    tensors = {name: value if isinstance(value, (tf.Tensor, tf.RaggedTensor)) else
               tf.constant(value) for name, value in columns.items()}
    return lambda indices: {name: tf.gather(value, indices) for name, value in tensors.items()}
