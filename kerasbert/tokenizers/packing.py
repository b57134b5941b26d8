"""Pack token ids of one or two texts into `token_ids` / `segment_ids` / `padding_mask`."""

import dataclasses

import tensorflow as tf
import tensorflow_text as tf_text

TRUNCATIONS = ("longest_first", "round_robin", "only_second")
PADDINGS = ("max_length", "longest")


@dataclasses.dataclass(frozen=True)
class SpecialTokenLayout:
    """Where a family puts its special tokens around one or two segments.

    `[start] A [end]` for one text; `[start] A [end] * pair_separators B [end]`
    for two (BERT/ALBERT: 1 separator, RoBERTa: 2). Tokens of the second text
    and its closing token get `second_segment_id` (RoBERTa: 0, others: 1).

    Example:
    >>> import tensorflow as tf
    >>> bert = SpecialTokenLayout(start_id=2, end_id=3, pad_id=0)
    >>> packed = pack(tf.ragged.constant([[7, 8]]), tf.ragged.constant([[9]]), bert, max_length=7)
    >>> packed["token_ids"].numpy().tolist(), packed["segment_ids"].numpy().tolist()
    ([[2, 7, 8, 3, 9, 3, 0]], [[0, 0, 0, 0, 1, 1, 0]])
    """

    start_id: int
    end_id: int
    pad_id: int
    pair_separators: int = 1
    second_segment_id: int = 1

    def num_special_tokens(self, pair):
        return 2 + self.pair_separators if pair else 2


def pack(first, second, layout, max_length=None, truncation="longest_first", padding="max_length"):
    """Pack ragged int32 ids `first` (and `second`, or None) into the encoder's three inputs.

    With `max_length`, the segments are truncated to fit `max_length` with the
    special tokens: `longest_first` (the Hugging Face tokenizers' rule: the
    shorter text keeps what it can, two long texts split the room, the longer
    one taking the odd token), `round_robin` (one token from each text in
    turn, `tensorflow_text.RoundRobinTrimmer`) or `only_second`. Padding goes
    to `max_length` (`padding="max_length"`) or to the longest row.
    """
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    pair = second is not None
    if max_length is not None:
        budget = max_length - layout.num_special_tokens(pair)
        if budget < (2 if pair else 1):
            raise ValueError(f"max_length={max_length} leaves no room for text next to the "
                             f"{layout.num_special_tokens(pair)} special tokens")
        first, second = _truncate(first, second, budget, truncation)

    batch = first.nrows()
    start = tf.fill([batch, 1], layout.start_id)
    end = tf.fill([batch, 1], layout.end_id)
    pieces = [start, first, end]
    if pair:
        pieces += [end] * (layout.pair_separators - 1) + [second, end]
    pieces = [tf.RaggedTensor.from_tensor(p) if isinstance(p, tf.Tensor) else p for p in pieces]
    token_ids = tf.concat(pieces, axis=1)

    width = max_length if (max_length is not None and padding == "max_length") else None
    shape = [batch, width] if width is not None else None
    dense_ids = token_ids.to_tensor(default_value=layout.pad_id, shape=shape)
    # The mask and the segments follow from each row's lengths: no more ragged tensors to pad.
    position = tf.range(tf.shape(dense_ids, out_type=tf.int64)[1])[tf.newaxis, :]
    is_token = position < tf.cast(token_ids.row_lengths(), tf.int64)[:, tf.newaxis]
    if pair:
        second_start = tf.cast(first.row_lengths(), tf.int64) + 1 + layout.pair_separators
        is_second = tf.logical_and(is_token, position >= second_start[:, tf.newaxis])
        segment_ids = tf.cast(is_second, tf.int32) * layout.second_segment_id
    else:
        segment_ids = tf.zeros_like(dense_ids)
    return {"token_ids": dense_ids, "segment_ids": segment_ids,
            "padding_mask": tf.cast(is_token, tf.int32)}


def _truncate(first, second, budget, truncation):
    if second is None:
        return first[:, :budget], None
    if truncation == "round_robin":
        first, second = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim([first, second])
        return first, second
    length_a = tf.cast(first.row_lengths(), tf.int32)
    length_b = tf.cast(second.row_lengths(), tf.int32)
    if truncation == "only_second":
        room = budget - length_a
        tf.debugging.assert_non_negative(
            room, message=f"truncation='only_second': a first text alone exceeds the "
                          f"{budget} tokens available")
        return first, _keep_first(second, room)
    keep_a, keep_b = _longest_first_lengths(length_a, length_b, budget)
    return _keep_first(first, keep_a), _keep_first(second, keep_b)


def _longest_first_lengths(length_a, length_b, budget):
    """How many tokens each text keeps under `longest_first` (the `tokenizers` library's rule)."""
    shorter = tf.minimum(length_a, length_b)
    longer_target = tf.where(shorter > budget, shorter, tf.maximum(shorter, budget - shorter))
    both_long = shorter + longer_target > budget
    shorter_target = tf.where(both_long, budget // 2, shorter)
    longer_target = tf.where(both_long, budget // 2 + budget % 2, longer_target)
    a_is_longer = length_a > length_b
    keep_a = tf.where(a_is_longer, longer_target, shorter_target)
    keep_b = tf.where(a_is_longer, shorter_target, longer_target)
    fits = length_a + length_b <= budget
    return (tf.where(fits, length_a, tf.minimum(length_a, keep_a)),
            tf.where(fits, length_b, tf.minimum(length_b, keep_b)))


def _keep_first(ids, counts):
    positions = tf.ragged.range(tf.cast(ids.row_lengths(), tf.int32))
    return tf.ragged.boolean_mask(ids, positions < tf.expand_dims(counts, 1))
