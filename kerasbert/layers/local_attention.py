"""Sliding-window attention computed in blocks, so its cost and memory grow linearly with length."""

import numpy as np
import tensorflow as tf

NEGATIVE = -1e9  # the additive bias that gives a key zero weight


def window_bias(query_positions, key_length, half_window):
    """Additive float32 bias `[1 or batch, 1, queries, keys]`: 0 where
    `|query position - key position| <= half_window`, `NEGATIVE` elsewhere (the dense form,
    for a few query rows attending to the whole sequence)."""
    # (expand_dims, not [..., None]: TFLite's builtin StridedSlice takes no new axes)
    query_positions = tf.cast(query_positions, tf.int32)
    if query_positions.shape.rank == 1:
        query_positions = tf.expand_dims(query_positions, 0)
    distance = tf.abs(tf.expand_dims(query_positions, 2) - tf.reshape(tf.range(key_length),
                                                                      [1, 1, -1]))
    return tf.expand_dims(tf.where(distance <= half_window, 0.0, NEGATIVE), 1)


def sees_a_token(bias):
    """1.0 for the query rows of an additive `bias` `[..., keys]` that leave some key visible,
    else 0.0 (`[..., 1]`). A padding position with no token in its window then attends to
    nothing instead of averaging masked keys, so its output does not depend on how far the
    padding reaches (the length the batch is padded to)."""
    return tf.cast(tf.reduce_max(bias, axis=-1, keepdims=True) > NEGATIVE / 2, tf.float32)


def _blocks(x, block, count):
    """`x` `[batch, heads, count * block + 2 * block, depth]` as the three neighbouring blocks of
    each block: `[batch, heads, count, 3 * block, depth]`."""
    views = [x[:, :, shift * block:shift * block + count * block] for shift in range(3)]
    shape = tf.concat([tf.shape(x)[:2], [count, block], tf.shape(x)[3:]], axis=0)
    return tf.concat([tf.reshape(view, shape) for view in views], axis=3)


def local_attention(query, key, value, padding_mask, half_window, dropout=None):
    """Attention where each position sees the keys at most `half_window` positions away.

    `query` (already scaled), `key`, `value`: `[batch, heads, seq, depth]`; `padding_mask`
    `[batch, seq]` (1 for tokens). The sequence is cut into blocks of `half_window`
    positions; a block's queries attend to the keys of its own block and its two
    neighbours, which hold every key within the window. Scores are `[.., 3 * half_window]`
    per query instead of `[.., seq]`: time and memory are linear in the sequence length,
    and the result equals full attention under a `|i - j| <= half_window` mask (keys outside
    the sequence and padding keys get zero weight; a query with no token in its window, a
    padding position, attends to nothing). Softmax in float32; `dropout` (a callable)
    is applied to the attention weights. Returns the context `[batch, heads, seq, depth]`.

    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(1, 1, 5, 4)).astype("float32")
    >>> tuple(local_attention(x, x, x, np.ones((1, 5), "int32"), 1).shape)
    (1, 1, 5, 4)
    """
    block = max(int(half_window), 1)
    batch, heads, length = tf.shape(query)[0], tf.shape(query)[1], tf.shape(query)[2]
    count = (length + block - 1) // block
    padded = count * block
    depth = query.shape[-1]

    def pad(x, before, after):
        return tf.pad(x, [[0, 0], [0, 0], [before, after], [0, 0]])

    queries = tf.reshape(pad(query, 0, padded - length), [batch, heads * count, block, depth])
    keys = tf.reshape(_blocks(pad(key, block, padded - length + block), block, count),
                      [batch, heads * count, 3 * block, depth])
    values = tf.reshape(_blocks(pad(value, block, padded - length + block), block, count),
                        [batch, heads * count, 3 * block, depth])
    keep = tf.pad(tf.cast(padding_mask, tf.float32), [[0, 0], [block, padded - length + block]])
    keep = tf.squeeze(_blocks(tf.reshape(keep, [batch, 1, -1, 1]), block, count),
                      [1, 4])  # [batch, count, 3 * block]
    offsets = np.arange(3 * block)[None, :] - block - np.arange(block)[:, None]
    within = np.where(np.abs(offsets) <= half_window, 0.0, NEGATIVE).astype("float32")
    bias = (tf.expand_dims(tf.expand_dims(1.0 - keep, 1), 3) * NEGATIVE
            + within)  # [batch, 1, count, block, 3 * block]
    bias = tf.reshape(tf.tile(bias, [1, heads, 1, 1, 1]), [batch, heads * count, block,
                                                           3 * block])

    scores = tf.cast(tf.matmul(queries, keys, transpose_b=True), tf.float32) + bias
    probs = tf.cast(tf.nn.softmax(scores, axis=-1) * sees_a_token(bias), value.dtype)
    if dropout is not None:
        probs = dropout(probs)
    context = tf.reshape(tf.matmul(probs, values), [batch, heads, padded, depth])
    return context[:, :, :length]
