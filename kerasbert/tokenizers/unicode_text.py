"""Unicode text operations that the tokenizers share."""

import tensorflow as tf


def lowercase_per_character(texts):
    """Lower-case each character on its own, as Rust's `char::to_lowercase` (Hugging Face) does.

    `tf.strings.lower` uses ICU's context-aware lower-casing, which turns a
    word-final capital sigma into ς where Hugging Face gives σ; and it stops at
    a NUL character, so the parts between NULs are lowered separately.

    Example:
    >>> import tensorflow as tf
    >>> lowercase_per_character(tf.constant(["ΟΔΟΣ İ ÀB", "a\\x00B"])).numpy().tolist()
    [b'\\xce\\xbf\\xce\\xb4\\xce\\xbf\\xcf\\x83 i\\xcc\\x87 \\xc3\\xa0b', b'a\\x00b']
    """
    texts = tf.strings.regex_replace(texts, "Σ", "σ")
    parts = tf.strings.split(texts, sep="\x00")
    # reduce_join cannot take a NUL separator: end each part with one, then drop the last.
    lowered = tf.strings.join([tf.strings.lower(parts.flat_values, encoding="utf-8"), "\x00"])
    joined = tf.strings.reduce_join(parts.with_flat_values(lowered), axis=-1)
    return tf.strings.substr(joined, tf.zeros_like(tf.strings.length(joined)),
                             tf.strings.length(joined) - 1)
