"""Exact full attention computed a chunk of query rows at a time, so that a long sequence's
scores are never held whole (inference of long-context models)."""

import tensorflow as tf

# Models that take more positions than this run their full-attention layers' inference in
# chunks of this many query rows: at 8,192 tokens and 12 heads, float32 scores of one chunk
# take 400 MB instead of 3.2 GB for the whole matrix.
QUERY_CHUNK = 1024


def query_chunked_attention(query, key, value, bias, chunk):
    """Softmax attention of `query` (already scaled) against `key` and `value`, `chunk` query
    rows at a time, one chunk after another: the scores held at once are
    `[batch, heads, chunk, keys]`. Each row's softmax sees every key, so the result is that of
    attention over the whole score matrix.

    `query` `[batch, heads, queries, depth]`; `key`, `value` `[batch, heads, keys, depth]`;
    `bias`: additive float32 bias `[batch, 1, 1, keys]` (padding). Softmax in float32. Returns
    the context `[batch, heads, queries, depth]`.

    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(1, 2, 5, 4)).astype("float32")
    >>> tuple(query_chunked_attention(x, x, x, np.zeros((1, 1, 1, 5), "float32"), 2).shape)
    (1, 2, 5, 4)
    """
    batch, heads = tf.shape(query)[0], tf.shape(query)[1]
    length, depth = tf.shape(query)[2], query.shape[-1]
    # No query rows (length 0): one chunk of one padded row, cut off below.
    size = tf.maximum(tf.minimum(length, chunk), 1)
    count = tf.maximum((length + size - 1) // size, 1)
    padded = tf.pad(query, [[0, 0], [0, 0], [0, count * size - length], [0, 0]])
    chunks = tf.transpose(tf.reshape(padded, [batch, heads, count, size, depth]),
                          [2, 0, 1, 3, 4])

    def attend(rows):
        scores = tf.cast(tf.matmul(rows, key, transpose_b=True), tf.float32) + bias
        return tf.matmul(tf.cast(tf.nn.softmax(scores, axis=-1), value.dtype), value)

    # One chunk at a time (parallel_iterations=1): in flight together, chunks would hold as
    # much memory as the whole matrix.
    contexts = tf.map_fn(attend, chunks, parallel_iterations=1,
                         fn_output_signature=tf.TensorSpec([None, None, None, depth],
                                                           value.dtype))
    context = tf.reshape(tf.transpose(contexts, [1, 2, 0, 3, 4]),
                         [batch, heads, count * size, depth])
    return context[:, :, :length]
