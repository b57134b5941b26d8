"""Pretraining instances from a window of tokenized documents, in TensorFlow ops.

`build_instances` turns a window of documents (ragged int32 `[documents,
sentences, tokens]`) into packed instances, one objective at a time:

- `"nsp"` (BERT): Google's `create_instances_from_document`. A target length
  of `max_seq_length - 3` tokens (with probability `short_seq_prob` a random
  one in [2, that]) per document; sentences are gathered until they reach it;
  segment A is a random number of them, B the rest (label 0) or, with
  probability 0.5 and always for a one-sentence chunk, a run of sentences of
  another document of the window from a random start (label 1; the unused
  sentences go back into the document). The pair is cut to fit by removing
  tokens from the longer segment, from its front or back at random.
- `"sop"` (ALBERT): the same chunks; B is always A's continuation and the
  two are swapped with probability 0.5 (label 1 = swapped). A one-sentence
  chunk is cut into two at a random token, so segments are always
  consecutive text.
- `"full_sentences"` (RoBERTa): sentences packed up to `max_seq_length - 2`
  tokens, across document boundaries, with `document_separator_id` between
  documents; `"doc_sentences"`: the same within each document. A sentence
  longer than that is cut into pieces. No pair, label 0.
- `"electra"`: ELECTRA's `ExampleBuilder`: sentences gathered up to the
  target length (`max_seq_length`; 5% of the time a random one in
  [5, max_seq_length]); the first segment takes sentences while it stays
  under half the length, and the one that crosses half half of the time;
  10% of the instances have one segment only. Label 0. (ELECTRA's code may
  put a later short sentence back into the first segment; here the first
  segment is always a prefix, so both segments are consecutive text.)

The random document for NSP comes from the same window (documents next to
each other in the stream), which keeps memory bounded by the window.
All randomness is stateless, from the `seed` argument.
"""

import tensorflow as tf

from kerasbert.choices import OBJECTIVES

PAIR_OBJECTIVES = ("nsp", "sop", "electra")


def build_instances(documents, objective, layout, max_seq_length, seed, short_seq_prob=0.1,
                    document_separator_id=None):
    """Packed instances from a window of tokenized documents.

    Args:
        documents: ragged int32 `[documents, sentences, tokens]`.
        objective: one of `OBJECTIVES`.
        layout: the tokenizer's `SpecialTokenLayout` (`tokenizer.layout`).
        max_seq_length: length of every instance, special tokens included.
        seed: int tensor `[2]` for the stateless random ops.
        short_seq_prob: for `"nsp"` and `"sop"`, the chance of a shorter target.
        document_separator_id: for `"full_sentences"`, the token between
            documents (default: the layout's end token, as in RoBERTa).

    Returns:
        A dict of `token_ids`, `segment_ids`, `padding_mask` (int32
        `[instances, max_seq_length]`) and `next_sentence_labels` (int32
        `[instances]`).

    >>> from kerasbert.tokenizers import SpecialTokenLayout
    >>> documents = tf.ragged.constant([[[5, 6], [7, 8, 9]], [[10], [11, 12]]])
    >>> batch = build_instances(documents, "doc_sentences", SpecialTokenLayout(1, 2, 0), 8, [1, 2])
    >>> batch["token_ids"].numpy().tolist()
    [[1, 5, 6, 7, 8, 9, 2, 0], [1, 10, 11, 12, 2, 0, 0, 0]]
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    specials = layout.num_special_tokens(objective in PAIR_OBJECTIVES)
    if max_seq_length < specials + 2:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for text next to the "
                         f"{specials} special tokens of {objective!r}")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}")
    documents = _as_documents(documents)
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
    if objective == "full_sentences":
        separator = layout.end_id if document_separator_id is None else document_separator_id
        documents = _with_separators(documents, separator)
    window = _Window(documents)
    if objective in ("nsp", "sop"):
        ranges = _sentence_pairs(window, objective, max_seq_length - specials, short_seq_prob,
                                 seed)
    elif objective == "electra":
        ranges = _electra_pairs(window, max_seq_length, seed)
    else:
        ranges = _blocks(window, max_seq_length - specials,
                         per_document=objective == "doc_sentences")
    return _pack(window.tokens, ranges, layout, max_seq_length)


def _as_documents(documents):
    if not isinstance(documents, tf.RaggedTensor):
        documents = tf.ragged.constant(documents, dtype=tf.int32) if not tf.is_tensor(
            documents) else documents
    if not isinstance(documents, tf.RaggedTensor) or documents.ragged_rank != 2:
        raise ValueError("documents must be ragged int `[documents, sentences, tokens]`, got "
                         f"{getattr(documents, 'shape', documents)}")
    documents = tf.cast(documents, tf.int32)
    # Sentences without tokens take no part, nor documents without sentences.
    documents = tf.ragged.boolean_mask(documents, documents.row_lengths(axis=2) > 0)
    return tf.gather(documents, tf.where(documents.row_lengths() > 0)[:, 0])


def _with_separators(documents, separator):
    """Each document followed by a one-token sentence `[separator]`."""
    count = documents.nrows()
    separators = tf.RaggedTensor.from_uniform_row_length(
        tf.RaggedTensor.from_uniform_row_length(tf.fill([count], separator), 1), 1)
    return tf.concat([documents, separators], axis=1)


class _Window:
    """The documents' tokens laid end to end, and where each sentence and document is in them.

    Sentence arrays end with one empty sentence after the last, so that every gather of a
    done document's position stays in range.
    """

    def __init__(self, documents, starts=None, ends=None, document_of=None):
        self.documents = documents
        self.tokens = documents.flat_values
        if starts is None:
            lengths = tf.cast(documents.values.row_lengths(), tf.int32)
            ends = tf.cumsum(lengths)
            starts = ends - lengths
            document_of = tf.cast(documents.value_rowids(), tf.int32)
        self.sentence_count = tf.size(starts)
        self.count = tf.cast(documents.nrows(), tf.int32)
        sentences = tf.math.bincount(document_of, minlength=self.count, maxlength=self.count)
        self.document_ends = tf.cumsum(sentences)
        self.document_starts = self.document_ends - sentences
        # Token range of each sentence, in order, and its document.
        total = tf.size(self.tokens, tf.int32)
        self.starts = tf.concat([starts, [total]], axis=0)
        self.ends = tf.concat([ends, [total]], axis=0)
        self.document_of = tf.concat([document_of, [0]], axis=0)

    def real(self, values):
        """`values` (one per sentence) without the empty sentence at the end."""
        return values[:self.sentence_count]

    def split_long(self, limit):
        """The same window with sentences longer than `limit` tokens cut into pieces."""
        starts, ends = self.real(self.starts), self.real(self.ends)
        pieces = tf.maximum(1, (ends - starts + limit - 1) // limit)
        piece = tf.ragged.range(pieces).flat_values
        starts = tf.repeat(starts, pieces) + piece * limit
        ends = tf.minimum(starts + limit, tf.repeat(ends, pieces))
        return _Window(self.documents, starts, ends,
                       tf.repeat(self.real(self.document_of), pieces))

    def as_one_stream(self):
        """The same sentences as if the window were one document (the others empty)."""
        return _Window(self.documents, self.real(self.starts), self.real(self.ends),
                       tf.zeros([self.sentence_count], tf.int32))

    def last_sentence(self, first):
        """The last sentence of the document of each sentence `first`."""
        return tf.gather(self.document_ends, tf.gather(self.document_of, first)) - 1

    def chunk_end(self, first, target):
        """The sentence at which sentences `first`.. reach `target` tokens (or the document's end)."""
        index = tf.searchsorted(self.ends, tf.gather(self.starts, first) + target, side="left")
        return tf.clip_by_value(index, first, tf.maximum(self.last_sentence(first), first))


def _uniform_int(seed, low, high):
    """A uniform integer in [low, high] for each element (high >= low)."""
    shape = tf.shape(low)
    draw = tf.random.stateless_uniform(shape, seed, dtype=tf.float32)
    return low + tf.minimum(tf.cast(draw * tf.cast(high - low + 1, tf.float32), tf.int32),
                            high - low)


def _chains(window, next_first):
    """Which sentences start an instance: the chain from each document's first sentence
    through `next_first` (the sentence after an instance that starts at each sentence) until it
    leaves the document. Found by pointer doubling, in log2(longest chain) vectorized steps."""
    count = window.sentence_count
    positions = tf.range(count)
    # Leaving the document leads to an end node (index `count`), which leads to itself.
    jump = tf.concat([tf.where(next_first > window.last_sentence(positions), count, next_first),
                      [count]], axis=0)
    reached = tf.tensor_scatter_nd_max(
        tf.zeros([count + 1], tf.int32), tf.expand_dims(window.document_starts, 1),
        tf.ones_like(window.document_starts))

    def condition(reached, jump):
        return tf.reduce_any(jump[:count] < count)

    def body(reached, jump):
        # After k steps `reached` holds the first 2**k sentences of every chain.
        reached = tf.tensor_scatter_nd_max(reached, tf.expand_dims(jump, 1), reached)
        return reached, tf.gather(jump, jump)

    reached, jump = tf.while_loop(condition, body, [reached, jump])
    reached = tf.tensor_scatter_nd_max(reached, tf.expand_dims(jump, 1), reached)
    return tf.cast(reached[:count], tf.bool)


def _chosen(window, next_first, fields, valid=None):
    """`fields` (one value per sentence) at the sentences that start a valid instance."""
    keep = _chains(window, next_first)
    if valid is not None:
        keep &= valid
    return [tf.boolean_mask(values, keep) for values in fields]


def _sentence_pairs(window, objective, max_tokens, short_seq_prob, seed):
    """Token ranges (a_start, a_end, b_start, b_end) and labels of NSP or SOP pairs.

    Every sentence gets the random draws of an instance that would start there; the chain of
    chunks from each document's start picks the instances (as Google's loop would, sentence
    after sentence, with unused sentences going back into the document)."""
    seeds = tf.random.experimental.stateless_split(seed, 8)
    short = tf.random.stateless_uniform([window.count], seeds[0]) < short_seq_prob
    targets = tf.where(short, _uniform_int(seeds[1], tf.fill([window.count], 2),
                                           tf.fill([window.count], max_tokens)), max_tokens)
    first = tf.range(window.sentence_count)
    document = window.real(window.document_of)
    target = tf.gather(targets, document)
    last = window.chunk_end(first, target)
    chunk = last - first + 1
    a_sentences = tf.where(chunk >= 2, _uniform_int(seeds[2], tf.ones_like(chunk), chunk - 1), 1)
    a_start = tf.gather(window.starts, first)
    a_end = tf.gather(window.ends, first + a_sentences - 1)
    continuation_end = tf.gather(window.ends, last)
    coin = tf.random.stateless_uniform(tf.shape(first), seeds[3]) < 0.5
    if objective == "nsp":
        has_other = window.count > 1
        random_next = ((chunk == 1) | coin) & has_other
        # Another document of the window, and a run of its sentences from a random start.
        other = (document + 1 + _uniform_int(seeds[4], tf.zeros_like(first), tf.fill(
            tf.shape(first), tf.maximum(window.count - 2, 0)))) % window.count
        other_first = _uniform_int(seeds[5], tf.gather(window.document_starts, other),
                                   tf.gather(window.document_ends, other) - 1)
        other_last = window.chunk_end(other_first, target - (a_end - a_start))
        b_start = tf.where(random_next, tf.gather(window.starts, other_first), a_end)
        b_end = tf.where(random_next, tf.gather(window.ends, other_last), continuation_end)
        next_first = tf.where(random_next, first + a_sentences, last + 1)
        # Without another document, a one-sentence chunk makes no pair.
        valid = (chunk >= 2) | has_other
        labels = tf.cast(random_next, tf.int32)
    else:
        # SOP: a one-sentence chunk is cut at a random token.
        one = chunk == 1
        cut = _uniform_int(seeds[4], a_start + 1, tf.maximum(a_end - 1, a_start + 1))
        middle = tf.where(one, cut, a_end)
        end = tf.where(one, a_end, continuation_end)
        valid = ~one | (a_end - a_start >= 2)
        a_start, a_end, b_start, b_end = (
            tf.where(coin, middle, a_start), tf.where(coin, end, middle),
            tf.where(coin, a_start, middle), tf.where(coin, middle, end))
        next_first = last + 1
        labels = tf.cast(coin, tf.int32)
    a_start, a_end, b_start, b_end, labels = _chosen(
        window, next_first, [a_start, a_end, b_start, b_end, labels], valid)
    a_start, a_end, b_start, b_end = _truncate_pair(a_start, a_end, b_start, b_end, max_tokens,
                                                    seeds[6])
    return a_start, a_end, b_start, b_end, labels


def _truncate_pair(a_start, a_end, b_start, b_end, max_tokens, seed):
    """Google's `truncate_seq_pair`: tokens leave the longer segment (B on a tie), each from
    its front or back with probability 0.5, until the pair fits in `max_tokens`."""
    length_a, length_b = a_end - a_start, b_end - b_start
    shorter = tf.minimum(length_a, length_b)
    # The shorter segment keeps everything if the longer one can shrink to the rest; otherwise
    # both end at half, A keeping the odd token (B goes first on every tie).
    both_long = 2 * shorter > max_tokens
    keep_shorter = tf.where(both_long, tf.where(length_a <= length_b, (max_tokens + 1) // 2,
                                                max_tokens // 2), shorter)
    keep_longer = max_tokens - keep_shorter
    a_is_longer = length_a > length_b
    keep_a = tf.where(a_is_longer, keep_longer, keep_shorter)
    keep_b = tf.where(a_is_longer, keep_shorter, keep_longer)
    fits = length_a + length_b <= max_tokens
    keep_a = tf.where(fits, length_a, tf.minimum(keep_a, length_a))
    keep_b = tf.where(fits, length_b, tf.minimum(keep_b, length_b))
    seed_a, seed_b = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    front_a = _binomial_half(seed_a, length_a - keep_a)
    front_b = _binomial_half(seed_b, length_b - keep_b)
    return (a_start + front_a, a_start + front_a + keep_a,
            b_start + front_b, b_start + front_b + keep_b)


def _binomial_half(seed, counts):
    """How many of `counts` fair coins come up heads, for each element."""
    return tf.cast(tf.random.stateless_binomial(
        tf.shape(counts), seed, tf.cast(counts, tf.float32), 0.5, output_dtype=tf.int32),
        tf.int32)


def _electra_pairs(window, max_seq_length, seed):
    """Token ranges and labels (0) of ELECTRA's one- or two-segment instances."""
    seeds = tf.random.experimental.stateless_split(seed, 4)
    first = tf.range(window.sentence_count)
    random_length = tf.random.stateless_uniform(tf.shape(first), seeds[0]) < 0.05
    target = tf.where(random_length, _uniform_int(
        seeds[1], tf.fill(tf.shape(first), 5), tf.fill(tf.shape(first), max_seq_length)),
        max_seq_length)
    last = window.chunk_end(first, target)
    one_segment = tf.random.stateless_uniform(tf.shape(first), seeds[2]) < 0.1
    first_target = tf.where(one_segment, 100_000, (target - 3) // 2)
    first, last, first_target = _chosen(window, last + 1, [first, last, first_target])
    # The chunks cover every sentence once: each sentence's chunk, and its place in it.
    starts, ends = window.real(window.starts), window.real(window.ends)
    sentence = tf.range(window.sentence_count)
    chunk_of = tf.searchsorted(first, sentence, side="right") - 1
    chunk_start = tf.gather(first, chunk_of)
    before = starts - tf.gather(starts, chunk_start)
    chunk_target = tf.gather(first_target, chunk_of)
    coin = tf.random.stateless_uniform(tf.shape(sentence), seeds[3]) < 0.5
    # A sentence joins the first segment if it is the chunk's first, keeps the segment under
    # its target, or, half of the time, is the one that crosses it.
    joins = ((sentence == chunk_start) | (before + ends - starts < chunk_target)
             | ((before < chunk_target) & coin))
    stops = tf.where(joins, window.sentence_count + 1, sentence)
    second = tf.minimum(tf.math.unsorted_segment_min(stops, chunk_of, tf.size(first)), last + 1)
    a_start = tf.gather(window.starts, first)
    a_end = tf.gather(window.ends, second - 1)
    chunk_end = tf.gather(window.ends, last)
    b_start = tf.where(second <= last, a_end, chunk_end)
    # ELECTRA's cut: first[:max_length - 2], second[:max(0, max_length - len(first) - 3)].
    a_end = tf.minimum(a_end, a_start + max_seq_length - 2)
    b_end = tf.minimum(chunk_end, b_start + tf.maximum(0, max_seq_length - (a_end - a_start) - 3))
    return a_start, a_end, b_start, b_end, tf.zeros_like(first)


def _blocks(window, room, per_document):
    """Token ranges of RoBERTa blocks: whole sentences (or pieces) up to `room` tokens."""
    window = window.split_long(room)
    if not per_document:
        window = window.as_one_stream()
    first = tf.range(window.sentence_count)
    start = tf.gather(window.starts, first)
    index = tf.searchsorted(window.ends, start + room, side="right") - 1
    last = tf.clip_by_value(index, first, tf.maximum(window.last_sentence(first), first))
    start, end = _chosen(window, last + 1, [start, tf.gather(window.ends, last)])
    return start, end, end, end, tf.zeros_like(start)


def _pack(tokens, ranges, layout, max_seq_length):
    """`[start] A [end]`, or `[start] A [end] * separators B [end]` where B is not empty."""
    a_start, a_end, b_start, b_end, labels = ranges
    count = tf.size(a_start)
    has_b = tf.cast(b_end > b_start, tf.int32)
    middle = tf.where(has_b > 0, layout.pair_separators, 1)
    first = tf.concat([
        tf.fill([count, 1], layout.start_id),
        tf.gather(tokens, tf.ragged.range(a_start, a_end)),
        _repeated(layout.end_id, middle)], axis=1)
    second = tf.concat([
        tf.gather(tokens, tf.ragged.range(b_start, b_end)),
        _repeated(layout.end_id, has_b)], axis=1)
    token_ids = tf.concat([first, second], axis=1)
    segment_ids = tf.concat([tf.zeros_like(first),
                             tf.ones_like(second) * layout.second_segment_id], axis=1)
    shape = [None, max_seq_length]
    return {
        "token_ids": token_ids.to_tensor(layout.pad_id, shape=shape),
        "segment_ids": segment_ids.to_tensor(0, shape=shape),
        "padding_mask": tf.ones_like(token_ids).to_tensor(0, shape=shape),
        "next_sentence_labels": labels,
    }


def _repeated(token_id, counts):
    """Ragged rows of `counts` copies of `token_id`."""
    return tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(counts)], token_id),
                                            tf.cast(counts, tf.int64))
