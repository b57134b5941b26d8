"""Character offsets of WordPiece tokens from tensorflow-text's fast kernels, in ops TFLite runs.

`FastBertNormalizer.normalize_with_offsets` maps every byte of the normalized text back to a
byte of the original text, and `FastWordpieceTokenizer.tokenize_with_offsets` gives each token
its bytes in the normalized text. A token starts at the original character holding its first
byte and ends after the character holding its last byte: the offsets Hugging Face's
`offset_mapping` gives (in code points). The original characters are found from the original
bytes (`ByteSplitter`): a byte that is not a UTF-8 continuation byte (10xxxxxx) starts one.

Everything works on the flat values and row splits of the kernels' outputs, with no ragged ops,
so that `kerasbert.export.text_tflite_answers` can convert it to TFLite builtin ops (plus the
three kernels, which have TFLite kernels).
"""

import tensorflow as tf
import tensorflow_text as tf_text


def fast_tokens_with_offsets(normalizer, wordpiece, texts):
    """Every token of every text of `texts` (1-D tf.string) one after the other.

    Args:
        normalizer: a `tensorflow_text.FastBertNormalizer`.
        wordpiece: a `tensorflow_text.FastWordpieceTokenizer` that splits words itself
            (`no_pretokenization=False`) and returns int32 ids.
        texts: 1-D tf.string.

    Returns:
        A dict of int32 tensors: `ids`; `splits` (where each text's tokens start, `[batch + 1]`,
        as a ragged tensor's row splits); per token `row` (its text), `char_start`, `char_end`
        (code points, end exclusive), `byte_start`, `byte_end` (UTF-8 bytes) into the original
        text, and `normalized_bytes` (how many bytes of the normalized text it spans).

    Example:
    >>> import kerasbert
    >>> tokenizer = kerasbert.tokenizers.WordPieceTokenizer(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "##s", "."])
    >>> tokens = fast_tokens_with_offsets(*tokenizer.fast_kernels(), tf.constant(["Cafés."]))
    >>> [tokens[name].numpy().tolist() for name in ("ids", "char_start", "char_end", "byte_end")]
    [[5, 6, 7], [0, 4, 5], [4, 5, 6], [5, 6, 7]]
    """
    normalized, byte_map = normalizer.normalize_with_offsets(texts)
    pieces, starts, ends = wordpiece.tokenize_with_offsets(normalized)
    splits = tf.cast(pieces.row_splits, tf.int32)
    row = row_of(tf.size(pieces.flat_values), splits)
    map_values = tf.cast(byte_map.flat_values, tf.int32)
    map_base = tf.gather(tf.cast(byte_map.row_splits, tf.int32), row)
    normalized_start = tf.cast(starts.flat_values, tf.int32)
    normalized_end = tf.cast(ends.flat_values, tf.int32)
    byte_start = tf.gather(map_values, map_base + normalized_start)
    last_byte = tf.gather(map_values, map_base + normalized_end - 1)

    original = tf_text.ByteSplitter().split(texts)
    values = tf.cast(original.flat_values, tf.int32)
    starts_character = (values < 0x80) | (values >= 0xC0)
    # The character of every byte of the batch, counted from the batch's first character,
    # and where each character starts (with the end of the batch after the last).
    character = tf.cumsum(tf.cast(starts_character, tf.int32)) - 1
    character_byte = tf.concat([tf.cast(tf.reshape(tf.where(starts_character), [-1]), tf.int32),
                                tf.size(values, out_type=tf.int32)[tf.newaxis]], 0)
    text_base = tf.gather(tf.cast(original.row_splits, tf.int32), row)
    first_character = tf.gather(character, text_base)
    start_character = tf.gather(character, text_base + byte_start)
    end_character = tf.gather(character, text_base + last_byte) + 1
    return {"ids": pieces.flat_values, "splits": splits, "row": row,
            "char_start": start_character - first_character,
            "char_end": end_character - first_character,
            "byte_start": tf.gather(character_byte, start_character) - text_base,
            "byte_end": tf.gather(character_byte, end_character) - text_base,
            "normalized_bytes": normalized_end - normalized_start}


def row_of(count, splits):
    """The row of each of `count` flat values under row `splits` (int32), without ragged ops:
    a mark where each row but the first starts (several at one place for empty rows), summed.

    >>> row_of(5, tf.constant([0, 2, 2, 5, 5])).numpy().tolist()
    [0, 0, 2, 2, 2]
    """
    starts = splits[1:-1]
    marks = tf.math.unsorted_segment_sum(tf.ones_like(starts), starts, count + 1)
    return tf.cumsum(marks)[:count]
