"""The sequence lengths the raw-text signatures pad a batch to: its longest row, rounded up.

A batch of texts is padded to the smallest of fine-tuning's buckets
(`kerasbert.data.length_buckets.bucket_lengths`: 16, 32, 64, 128, 256, 384, 512 capped at
`max_seq_length`, which is always the last) that holds its longest packed row, rather than to
`max_seq_length`: a 21-token sentence runs at 32 tokens, not 128. A short fixed list keeps
the number of distinct shapes a server or interpreter sees small.
"""

import numpy as np
import tensorflow as tf

from kerasbert.data.length_buckets import bucket_lengths


def bucket_width(longest, max_seq_length):
    """The bucket (int32 scalar tensor) a batch whose longest row is `longest` is padded to.

    Built from TFLite builtin ops only (comparison, select, reduce-min).

    >>> int(bucket_width(tf.constant(23), 128)), int(bucket_width(tf.constant(200), 128))
    (32, 128)
    """
    buckets = tf.constant(bucket_lengths(max_seq_length), tf.int32)
    fitting = tf.where(buckets >= tf.cast(longest, tf.int32), buckets, max_seq_length)
    return tf.reduce_min(fitting)


def cut_to_bucket(packed, max_seq_length):
    """`packed` (int32 tensors by name, `[batch, max_seq_length]`, right-padded) cut to the
    `bucket_width` of its longest row: only padding is removed.

    >>> mask = tf.constant([[1, 1, 1, 0] + [0] * 60])
    >>> cut_to_bucket({"padding_mask": mask}, 64)["padding_mask"].shape.as_list()
    [1, 16]
    """
    longest = tf.reduce_max(tf.reduce_sum(packed["padding_mask"], axis=1))
    width = bucket_width(longest, max_seq_length)
    return {name: value[:, :width] for name, value in packed.items()}


def expected_width(padding_mask, max_seq_length):
    """`bucket_width` in numpy, from a packed batch's `padding_mask` (`[batch, ..., seq]`).

    >>> expected_width(np.array([[1, 1, 1, 0], [1, 1, 0, 0]]), 64)
    16
    """
    longest = int(np.max(np.sum(np.asarray(padding_mask), axis=-1), initial=0))
    return min(length for length in bucket_lengths(max_seq_length) if length >= min(
        longest, max_seq_length))
