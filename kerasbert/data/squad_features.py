"""SQuAD examples -> windows of their contexts (features) -> `tf.data` batches.

A context longer than the room left next to the question is cut into windows of context tokens,
as Google's BERT `run_squad.py` does: `doc_stride` is the *step* from one window's start to the
next (Hugging Face's `stride` is the overlap instead), the last window ends at the last token, and
a token seen by several windows may only be predicted by the window where it has the most
context: the largest `min(tokens left of it, tokens right of it) + 0.01 * window length`, the
first such window on a tie.

Contexts are tokenized whole, with character offsets (`Tokenizer.tokenize_with_offsets`), so every
token knows its span in the original context: answers map to tokens by character overlap, and
predicted tokens map back to the exact context substring (`kerasbert.data.squad_decoding`).
Questions lose leading whitespace (as in Hugging Face's `run_qa.py`; it would only add a token for
byte-level BPE) and are cut to `max_query_length` tokens.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from kerasbert.data.length_buckets import bucket_lengths, trim_to_bucket
from kerasbert.data.passes import batches_of, example_passes
from kerasbert.data.task_errors import TaskDataError
from kerasbert.tokenizers.packing import pack

# Texts tokenized per call: bounds the size of the ragged tensors built at once.
_TOKENIZE_CHUNK = 512


@dataclasses.dataclass(frozen=True, eq=False)
class SquadFeature:
    """One window of one example's context, packed after its question.

    The packed sequence is `[CLS] question [SEP] window [SEP]` in the
    tokenizer's family layout (RoBERTa: `<s> question </s></s> window </s>`),
    so window token `i` sits at position `context_offset + i`.

    Attributes:
        example_index: position of the example in the list given to `squad_windows`.
        feature_index: position of this feature in the list `squad_windows` returns
            (the row of its logits in `decode_squad`).
        window_index: which window of its example (0, 1, ...).
        window_start: the context token this window starts at.
        question_ids, context_ids: int32 token ids of the (cut) question and of the window.
        char_starts, char_ends: int32 character span of each window token in the context.
        max_context: bool, per window token: this window may predict it.
        context_offset: packed position of the window's first token.
        start_position, end_position: packed positions of the first and last answer token,
            0 and 0 when the window does not hold the whole answer or there is none; None
            unless the features were made with `is_training=True`.
        layout: the tokenizer's `SpecialTokenLayout`; max_seq_length: the packed length.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> from kerasbert.data.squad import SquadAnswer, SquadExample
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> example = SquadExample("q", "What?", "Sorted list.", (SquadAnswer("list", 7),))
    >>> feature, = squad_windows([example], tokenizer, max_seq_length=16, max_query_length=4,
    ...                          is_training=True)
    >>> feature.context_offset, feature.start_position, feature.end_position
    (4, 5, 5)
    >>> feature.char_starts.tolist(), feature.char_ends.tolist(), feature.max_context.tolist()
    ([0, 7, 11], [6, 11, 12], [True, True, True])
    """

    example_index: int
    feature_index: int
    window_index: int
    window_start: int
    question_ids: np.ndarray
    context_ids: np.ndarray
    char_starts: np.ndarray
    char_ends: np.ndarray
    max_context: np.ndarray
    context_offset: int
    start_position: int | None
    end_position: int | None
    layout: object
    max_seq_length: int

    @property
    def window_length(self):
        """The number of context tokens in this window."""
        return len(self.context_ids)


def context_windows(num_tokens, capacity, doc_stride):
    """`(start, length)` of each window over `num_tokens` context tokens.

    Windows hold up to `capacity` tokens and start `doc_stride` tokens apart
    (less when the window was shorter), the last one ending at the last token;
    an empty context gets one empty window.

    >>> context_windows(10, 4, 3)
    [(0, 4), (3, 4), (6, 4)]
    >>> context_windows(3, 4, 3), context_windows(0, 4, 3)
    ([(0, 3)], [(0, 0)])
    """
    windows, start = [], 0
    while True:
        length = min(num_tokens - start, capacity)
        windows.append((start, length))
        if start + length >= num_tokens:
            return windows
        start += min(length, doc_stride)


def max_context_windows(windows, num_tokens):
    """For each context token, the index of the window where it has the most context.

    A token's score in a window is `min(left, right) + 0.01 * window length`
    (left / right: the window's tokens before / after it); the first window
    with the highest score wins.

    >>> max_context_windows([(0, 4), (3, 4), (6, 4)], 10).tolist()
    [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    """
    best_window = np.full([num_tokens], -1, np.int64)
    best_score = np.full([num_tokens], -np.inf)
    for index, (start, length) in enumerate(windows):
        offsets = np.arange(length)
        score = np.minimum(offsets, length - 1 - offsets) + 0.01 * length
        better = score > best_score[start:start + length]
        best_window[start:start + length][better] = index
        best_score[start:start + length][better] = score[better]
    return best_window


def answer_token_span(char_starts, char_ends, answer_start, answer_end):
    """Indices of the first and last token whose character span overlaps the answer's, or None.

    >>> answer_token_span([0, 4, 8], [3, 7, 11], 5, 9)
    (1, 2)
    >>> answer_token_span([0, 4], [3, 7], 3, 4) is None
    True
    """
    overlap = (np.maximum(char_starts, answer_start) < np.minimum(char_ends, answer_end))
    tokens = np.flatnonzero(overlap)
    if not len(tokens):
        return None
    return int(tokens[0]), int(tokens[-1])


def squad_windows(examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64,
                  is_training=False):
    """The windows (`SquadFeature`s) of every example, in example order.

    With `is_training`, each feature gets the packed positions of the first
    answer (`start_position`, `end_position`; 0 and 0 when the window does not
    hold all of it or the question is impossible); an answer that covers no
    token raises `TaskDataError` naming the question.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> from kerasbert.data.squad import SquadExample
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> example = SquadExample("q", "Why?", " ".join(["word"] * 20), is_impossible=True)
    >>> features = squad_windows([example], tokenizer, max_seq_length=12, doc_stride=4,
    ...                           max_query_length=2)
    >>> [(f.window_start, f.window_length) for f in features]
    [(0, 7), (4, 7), (8, 7), (12, 7), (16, 4)]
    """
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}")
    specials = tokenizer.layout.num_special_tokens(pair=True)
    if max_seq_length - max_query_length - specials < 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for context after a "
                         f"question of max_query_length={max_query_length} tokens and "
                         f"{specials} special tokens")
    contexts = list(dict.fromkeys(example.context for example in examples))
    tokenized = dict(zip(contexts, _tokenize_with_offsets(tokenizer, contexts)))
    questions = _tokenize(tokenizer, [example.question.lstrip() for example in examples])
    features = []
    for example_index, (example, question_ids) in enumerate(zip(examples, questions)):
        question_ids = question_ids[:max_query_length]
        ids, starts, ends = tokenized[example.context]
        answer = _answer_tokens(example, starts, ends) if is_training else None
        windows = context_windows(len(ids), max_seq_length - len(question_ids) - specials,
                                  doc_stride)
        best_window = max_context_windows(windows, len(ids))
        context_offset = 1 + len(question_ids) + tokenizer.layout.pair_separators
        for window_index, (start, length) in enumerate(windows):
            positions = None
            if is_training:
                positions = (0, 0)
                if answer is not None and start <= answer[0] and answer[1] < start + length:
                    positions = tuple(context_offset + token - start for token in answer)
            features.append(SquadFeature(
                example_index=example_index, feature_index=len(features),
                window_index=window_index, window_start=start, question_ids=question_ids,
                context_ids=ids[start:start + length], char_starts=starts[start:start + length],
                char_ends=ends[start:start + length],
                max_context=best_window[start:start + length] == window_index,
                context_offset=context_offset,
                start_position=None if positions is None else positions[0],
                end_position=None if positions is None else positions[1],
                layout=tokenizer.layout, max_seq_length=max_seq_length))
    return features


def squad_dataset(features, batch_size=32, shuffle=False, seed=0, *, drop_remainder=False,
                  epochs=1, length_buckets=False):
    """Batches of `features` (from `squad_windows`) per the fine-tuning batch contract.

    Each batch is a dict of int32 `token_ids`, `segment_ids`, `padding_mask`
    `[batch, max_seq_length]` (question and window packed in the tokenizer's
    layout, in the graph), `example_index` and `feature_index` `[batch]`, and,
    for features made with `is_training=True`, `start_positions` and
    `end_positions` `[batch]`. With `shuffle`, the order is reshuffled every
    pass, the same passes for the same `seed`. `epochs`: passes in the dataset
    (None: forever), each in an order made from `seed` and the pass alone
    (`kerasbert.data.passes`), so a checkpointed iterator resumes it.

    `length_buckets`: each batch is cut to the smallest of
    `kerasbert.data.length_buckets.bucket_lengths(max_seq_length)` that holds its longest
    window (same windows, same batches, less padding). For training: the logits of
    `model.predict` over such batches differ in length from batch to batch, so the evaluation
    datasets keep `max_seq_length`.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> from kerasbert.data.squad import SquadAnswer, SquadExample
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> example = SquadExample("q", "What?", "Sorted list.", (SquadAnswer("list", 7),))
    >>> features = squad_windows([example], tokenizer, max_seq_length=10, max_query_length=2,
    ...                           is_training=True)
    >>> batch = next(iter(squad_dataset(features)))
    >>> batch["segment_ids"].numpy().tolist(), batch["start_positions"].numpy().tolist()
    ([[0, 0, 0, 0, 1, 1, 1, 1, 0, 0]], [5])
    """
    if not features:
        raise ValueError("squad_dataset: no features to make a dataset of")
    layout, max_seq_length = features[0].layout, features[0].max_seq_length
    if any(f.layout != layout or f.max_seq_length != max_seq_length for f in features):
        raise ValueError("squad_dataset: the features come from different tokenizers or "
                         "max_seq_length values")
    columns = {
        "question_ids": _ragged([f.question_ids for f in features]),
        "context_ids": _ragged([f.context_ids for f in features]),
        "example_index": np.array([f.example_index for f in features], np.int32),
        "feature_index": np.array([f.feature_index for f in features], np.int32),
    }
    if features[0].start_position is not None:
        columns["start_positions"] = np.array([f.start_position for f in features], np.int32)
        columns["end_positions"] = np.array([f.end_position for f in features], np.int32)
    dataset = example_passes(len(features), batches_of(columns, batch_size, drop_remainder),
                             shuffle=shuffle, seed=seed, epochs=epochs)

    buckets = bucket_lengths(max_seq_length)

    def pack_batch(batch):
        packed = pack(batch["question_ids"], batch["context_ids"], layout,
                      max_length=max_seq_length)
        if length_buckets:
            packed = trim_to_bucket(packed, buckets)
        return {**packed, **{name: value for name, value in batch.items() if "ids" not in name}}

    return dataset.map(tf.autograph.experimental.do_not_convert(pack_batch),
                       num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True).prefetch(tf.data.AUTOTUNE)


def _answer_tokens(example, starts, ends):
    """Context token indices (first, last) of the example's first answer; None if impossible."""
    if example.is_impossible:
        return None
    answer = example.answers[0]
    span = answer_token_span(starts, ends, answer.start, answer.end)
    if span is None:
        raise TaskDataError(f"question {example.qas_id!r}: the answer {answer.text!r} covers no "
                            "token of the context")
    return span


def _tokenize(tokenizer, texts):
    """int32 token ids of each text, as a list of numpy arrays."""
    rows = []
    for first in range(0, len(texts), _TOKENIZE_CHUNK):
        rows += _split_rows(tokenizer.tokenize(texts[first:first + _TOKENIZE_CHUNK]))
    return rows


def _tokenize_with_offsets(tokenizer, texts):
    """(ids, char starts, char ends) int32 numpy arrays of each text."""
    rows = []
    for first in range(0, len(texts), _TOKENIZE_CHUNK):
        ragged = tokenizer.tokenize_with_offsets(texts[first:first + _TOKENIZE_CHUNK])
        rows += zip(*(_split_rows(values) for values in ragged))
    return rows


def _split_rows(ragged):
    values = ragged.flat_values.numpy().astype(np.int32)
    return np.split(values, ragged.row_splits.numpy()[1:-1])


def _ragged(rows):
    lengths = [len(row) for row in rows]
    values = np.concatenate(rows) if rows else np.zeros([0], np.int32)
    return tf.RaggedTensor.from_row_lengths(values.astype(np.int32), np.array(lengths, np.int64))
