"""The sequence lengths the raw-text signatures pad a batch to: its longest row, rounded up.

A batch of texts is padded to the smallest of `BUCKETS` (capped at `max_seq_length`, which
is always the last bucket) that holds its longest packed row, rather than to
`max_seq_length`: a 21-token sentence runs at 32 tokens, not 128. A short fixed list keeps
the number of distinct shapes a server or interpreter sees small.
"""

import numpy as np
import tensorflow as tf

BUCKETS = (16, 32, 64, 128, 256, 384, 512)


def bucket_lengths(max_seq_length):
    """The lengths a batch may be padded to: `BUCKETS` below `max_seq_length`, then it.

    >>> bucket_lengths(128)
    (16, 32, 64, 128)
    >>> bucket_lengths(48)
    (16, 32, 48)
    """
    return tuple(length for length in BUCKETS if length < max_seq_length) + (max_seq_length,)


def bucket_width(longest, max_seq_length):
    """The bucket (int32 scalar tensor) a batch whose longest row is `longest` is padded to.

    Built from TFLite builtin ops only (comparison, select, reduce-min).

    >>> int(bucket_width(tf.constant(23), 128)), int(bucket_width(tf.constant(200), 128))
    (32, 128)
    """
    buckets = tf.constant(bucket_lengths(max_seq_length), tf.int32)
    fitting = tf.where(buckets >= tf.cast(longest, tf.int32), buckets, max_seq_length)
    return tf.reduce_min(fitting)


def expected_width(padding_mask, max_seq_length):
    """`bucket_width` in numpy, from a packed batch's `padding_mask` (`[batch, ..., seq]`).

    >>> expected_width(np.array([[1, 1, 1, 0], [1, 1, 0, 0]]), 64)
    16
    """
    longest = int(np.max(np.sum(np.asarray(padding_mask), axis=-1), initial=0))
    return min(length for length in bucket_lengths(max_seq_length) if length >= min(
        longest, max_seq_length))
