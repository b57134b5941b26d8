"""Turn what users pass as text into a 1-D `tf.string` tensor, or fail naming what is wrong."""

import numpy as np
import tensorflow as tf


def to_text_tensor(texts, argument="texts"):
    """`texts` (a str, a list of str, a numpy array or a string tensor) as a 1-D tf.string tensor.

    Raises `TypeError` for `None`, non-string elements and non-string tensors
    (naming the argument and the element index), `ValueError` for invalid
    UTF-8 (naming the index), checked eagerly where the values are known and
    with an in-graph assertion otherwise.
    """
    if texts is None:
        raise TypeError(f"{argument} is None; expected a string or a list of strings")
    if isinstance(texts, (str, bytes)):
        texts = [texts]
    if isinstance(texts, (list, tuple)):
        for index, text in enumerate(texts):
            if not isinstance(text, (str, bytes)):
                raise TypeError(f"{argument}[{index}] is {type(text).__name__} ({text!r}); "
                                "expected str")
        texts = tf.constant([t if isinstance(t, bytes) else t.encode("utf-8") for t in texts],
                            dtype=tf.string, shape=[len(texts)])
    elif isinstance(texts, np.ndarray):
        if texts.dtype.kind not in "USO":
            raise TypeError(f"{argument} is a numpy array of {texts.dtype}; expected strings")
        return to_text_tensor(texts.reshape(-1).tolist() if texts.ndim else [texts.item()], argument)
    if isinstance(texts, tf.RaggedTensor) or not tf.is_tensor(texts):
        raise TypeError(f"{argument} is {type(texts).__name__}; expected a string or a list of strings")
    if texts.dtype != tf.string:
        raise TypeError(f"{argument} is a {texts.dtype.name} tensor; expected tf.string")
    if texts.shape.rank == 0:
        texts = tf.reshape(texts, [1])
    elif texts.shape.rank != 1:
        raise ValueError(f"{argument} must be a scalar or 1-D string tensor, got shape {texts.shape}")
    return _checked_utf8(texts, argument)


def _checked_utf8(texts, argument):
    # Only texts with a byte above 0x7F can be invalid: ASCII texts (most) skip the transcoding.
    suspect = tf.logical_not(tf.strings.regex_full_match(texts, r"[\x00-\x7f]*"))
    suspects = tf.boolean_mask(texts, suspect)
    repaired = tf.strings.unicode_transcode(suspects, "UTF-8", "UTF-8", errors="replace",
                                            replacement_char=0xFFFD)
    invalid = tf.scatter_nd(tf.where(suspect), tf.not_equal(repaired, suspects),
                            tf.shape(texts, out_type=tf.int64))
    if tf.executing_eagerly():
        bad = np.flatnonzero(invalid.numpy())
        if bad.size:
            raise ValueError(f"{argument}[{bad[0]}] is not valid UTF-8: {texts.numpy()[bad[0]]!r}")
        return texts
    first_bad = tf.argmax(tf.concat([tf.cast(invalid, tf.int32), [0]], axis=0))  # 0 if empty
    check = tf.debugging.Assert(
        tf.logical_not(tf.reduce_any(invalid)),
        [f"{argument} holds text that is not valid UTF-8, first at index", first_bad])
    with tf.control_dependencies([check]):
        return tf.identity(texts)
