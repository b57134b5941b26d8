"""Feature-based use of an encoder (the BERT paper's section 5.3): the hidden states of chosen
layers for every token or word of raw text, combined or kept apart, streamed in batches.

Layers are indexed as the encoder's `hidden_states` (and Hugging Face's `output_hidden_states`)
are: 0 is the embedding output, `k` the output of the k-th transformer layer applied, and negative
indices count back from the last layer (-1). Negative indices mean what they mean in Google's
`extract_features.py`; Google's non-negative index `i` (which counts transformer layers only, so
its script cannot reach the embedding output) is `i + 1` here.

Words are the whitespace-separated pieces of a text (what CoNLL-style pre-tokenized input holds),
the same for every tokenizer. A sub-token belongs to the word that holds the first non-whitespace
character of its span (`Tokenizer.tokenize_with_offsets`); special tokens, padding and tokens of
whitespace alone belong to none.
"""

import itertools
import json
import re

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from kerasbert.atomic_files import atomic_output
from kerasbert.models.encoder import INPUT_NAMES
from kerasbert.models.tasks import encoder_of
from kerasbert.tokenizers.packing import SpecialTokenLayout, pack

from kerasbert.choices import FEATURE_COMBINATIONS as COMBINATIONS
from kerasbert.choices import WORD_POOLINGS

WORD_IDS = "word_ids"
NO_WORD = -1
# Token places within a text are below this (packing marks a token's text and place in one int32).
_COLUMN = 2**24


@keras.saving.register_keras_serializable(package="kerasbert")
class LayerCombination(keras.layers.Layer):
    """Combine hidden states `[batch, seq, hidden]` of several layers into one tensor.

    `combine="concat"`: `[batch, seq, layers * hidden]`, in the order given;
    `"sum"` and `"mean"`: `[batch, seq, hidden]`; `None`: the layers stacked
    apart, `[batch, seq, layers, hidden]`.

    Example:
    >>> import numpy as np
    >>> states = [np.full((1, 2, 3), value, "float32") for value in (1.0, 5.0)]
    >>> LayerCombination("mean")(states).numpy()[0, 0].tolist()
    [3.0, 3.0, 3.0]
    >>> tuple(LayerCombination("concat")(states).shape), tuple(LayerCombination(None)(states).shape)
    ((1, 2, 6), (1, 2, 2, 3))
    """

    def __init__(self, combine="concat", **kwargs):
        super().__init__(**kwargs)
        if combine is not None and combine not in COMBINATIONS:
            raise ValueError(f"combine must be one of {COMBINATIONS} or None, got {combine!r}")
        self.combine = combine

    def call(self, hidden_states):
        hidden_states = list(hidden_states)
        if self.combine == "concat":
            return ops.concatenate(hidden_states, axis=-1)
        stacked = ops.stack(hidden_states, axis=2)
        if self.combine == "sum":
            return ops.sum(stacked, axis=2)
        if self.combine == "mean":
            return ops.mean(stacked, axis=2)
        return stacked

    def compute_output_shape(self, input_shape):
        batch, seq, hidden = input_shape[0]
        if self.combine == "concat":
            return (batch, seq, None if hidden is None else hidden * len(input_shape))
        if self.combine is None:
            return (batch, seq, len(input_shape), hidden)
        return (batch, seq, hidden)

    def get_config(self):
        config = super().get_config()
        config.update({"combine": self.combine})
        return config


@keras.saving.register_keras_serializable(package="kerasbert")
class WordPooling(keras.layers.Layer):
    """Pool sub-token features into word features.

    Takes `features` `[batch, seq, ...]` and `word_ids` int `[batch, seq]`:
    the word (0, 1, ... in each row) each token belongs to, or -1 for none.
    Returns `[batch, seq, ...]` whose row `w` holds word `w`'s features: those
    of its first token (`"first"`, as the BERT paper's NER does) or the mean
    over its tokens (`"mean"`); rows past a text's last word are zeros.

    Example:
    >>> import numpy as np
    >>> features = np.array([[[0.0], [1.0], [3.0], [5.0]]], "float32")
    >>> word_ids = np.array([[-1, 0, 0, 1]], "int32")
    >>> WordPooling("mean")(features, word_ids).numpy()[0, :, 0].tolist()
    [2.0, 5.0, 0.0, 0.0]
    >>> WordPooling("first")(features, word_ids).numpy()[0, :, 0].tolist()
    [1.0, 5.0, 0.0, 0.0]
    """

    def __init__(self, pooling="first", **kwargs):
        super().__init__(**kwargs)
        if pooling not in WORD_POOLINGS:
            raise ValueError(f"word pooling must be one of {WORD_POOLINGS}, got {pooling!r}")
        self.pooling = pooling

    def call(self, features, word_ids):
        shape = ops.shape(features)
        flat = ops.reshape(features, (shape[0], shape[1], -1))
        word_ids = ops.cast(word_ids, "int32")
        # members[b, w, t]: token t belongs to word w (a text has at most seq words).
        slots = ops.arange(ops.shape(word_ids)[1], dtype="int32")
        members = ops.equal(ops.expand_dims(word_ids, 1), slots[None, :, None])
        counts = ops.sum(ops.cast(members, flat.dtype), axis=-1, keepdims=True)
        if self.pooling == "mean":
            pooled = ops.matmul(ops.cast(members, flat.dtype), flat) / ops.maximum(counts, 1)
        else:
            first = ops.argmax(ops.cast(members, "int32"), axis=-1)  # the first member, or 0
            pooled = ops.take_along_axis(flat, ops.expand_dims(first, -1), axis=1)
            pooled = pooled * ops.minimum(counts, 1)
        return ops.reshape(pooled, shape)

    def compute_output_shape(self, features_shape, word_ids_shape=None):
        return features_shape

    def get_config(self):
        config = super().get_config()
        config.update({"pooling": self.pooling})
        return config


def feature_extractor(encoder, layers=(-1, -2, -3, -4), combine="concat", word_pooling=None,
                      name=None):
    """A functional `keras.Model` giving the hidden states of `layers` of `encoder`, combined.

    `encoder` is an `Encoder` or a kerasbert model that holds one (pretraining,
    task). The extractor calls the encoder's own layers, so it shares their
    weights: later changes to the encoder's weights show in its features. It
    computes no layer deeper than the deepest one asked for.

    Inputs: the encoder's `token_ids`, `segment_ids`, `padding_mask` and, with
    `word_pooling`, `word_ids` (see `WordPooling`; `extract_features` makes
    them from raw text). Output: `{"features": ...}`, `[batch, seq, ...]` as
    `LayerCombination` gives it for `combine` ("concat", "sum", "mean" or
    None for `[batch, seq, len(layers), hidden]`); with `word_pooling`
    ("first" or "mean"), row `w` of a text is its word `w`.

    `layers` index the hidden states: 0 the embedding output, `k` the k-th
    transformer layer, -1 the last (see the module docstring).

    Example:
    >>> import numpy as np
    >>> import kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=2)
    >>> extractor = feature_extractor(encoder, layers=(-1, -2), combine="concat")
    >>> ids = np.array([[2, 7, 9, 3]], dtype="int32")
    >>> features = extractor({"token_ids": ids, "segment_ids": 0 * ids,
    ...                       "padding_mask": np.ones_like(ids)})["features"]
    >>> tuple(features.shape)
    (1, 4, 256)
    """
    combination = LayerCombination(combine, name="layer_combination")
    pooling = None if word_pooling is None else WordPooling(word_pooling, name="word_pooling")
    encoder = encoder_of(encoder)
    positions = hidden_state_positions(layers, len(encoder.config.layer_schedule))

    inputs = {input_name: keras.Input(shape=(None,), dtype="int32", name=input_name)
              for input_name in INPUT_NAMES}
    hidden = encoder.embeddings(inputs["token_ids"], inputs["segment_ids"])
    hidden_states = [hidden]
    schedule = encoder.config.layer_schedule
    for index in schedule[:max(positions)]:
        hidden = encoder.transformer_layers[index](hidden, inputs["padding_mask"])
        hidden_states.append(hidden)
    if encoder.final_layer_norm is not None and max(positions) == len(schedule):
        hidden_states[-1] = encoder.final_layer_norm(hidden)  # the encoder's last hidden state
    features = combination([hidden_states[position] for position in positions])
    if pooling is not None:
        inputs[WORD_IDS] = keras.Input(shape=(None,), dtype="int32", name=WORD_IDS)
        features = pooling(features, inputs[WORD_IDS])
    return keras.Model(inputs, {"features": features}, name=name or f"{encoder.name}_features")


def hidden_state_positions(layers, num_layers):
    """`layers` (indices, negative ones counting from the last layer) as positions in the list
    of `num_layers + 1` hidden states; a `ValueError` naming any index out of range.

    >>> hidden_state_positions((-1, -2, 0), num_layers=4)
    [4, 3, 0]
    """
    if isinstance(layers, (int, np.integer)):
        layers = (layers,)
    layers = list(layers)
    if not layers:
        raise ValueError("layers is empty: name at least one hidden state (-1: the last layer)")
    count = num_layers + 1
    positions = []
    for index in layers:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise ValueError(f"layer index {index!r} is not an integer")
        if not -count <= index < count:
            raise ValueError(
                f"layer index {index} is out of range: the encoder has {num_layers} transformer "
                f"layers, so its hidden states are 0 (the embedding output) to {num_layers}, "
                f"or -{count} to -1 (-1: the last layer)")
        positions.append(int(index) % count)
    return positions


def whitespace_words(text):
    """The character spans `(start, end)` of the whitespace-separated words of `text`.

    >>> whitespace_words("New  York, NY")
    [(0, 3), (5, 10), (11, 13)]
    """
    return [match.span() for match in re.finditer(r"\S+", text)]


def word_of_tokens(text, starts, ends):
    """For tokens spanning `text[start:end]`, the index of the whitespace word each belongs to:
    the word holding the first non-whitespace character of its span, or -1 (`NO_WORD`) for an
    empty span, a special token (negative start) or whitespace alone.

    >>> word_of_tokens("unable  to", [0, 2, -1, 8], [2, 6, -1, 10])
    [0, 0, -1, 1]
    """
    word_at = np.full(len(text) + 1, NO_WORD)
    for word, (start, end) in enumerate(whitespace_words(text)):
        word_at[start:end] = word
    words = []
    for start, end in zip(starts, ends):
        inside = word_at[max(start, 0):max(end, 0)] if start >= 0 else word_at[:0]
        inside = inside[inside != NO_WORD]
        words.append(int(inside[0]) if inside.size else NO_WORD)
    return words


def extract_features(texts, tokenizer, extractor, batch_size=32, max_seq_length=128,
                     truncation="longest_first"):
    """Yield one record per text of `texts`, computing them `batch_size` texts at a time.

    `texts` is any iterable (a file's lines, a generator) of str or
    `(text_a, text_b)` pairs; it is read one batch ahead of what has been
    yielded, never whole. Each text is tokenized by `tokenizer` (a kerasbert
    `Tokenizer`), truncated to `max_seq_length` tokens with the special
    tokens (pairs by `truncation`, see `kerasbert.tokenizers.pack`), padded to
    the longest in its batch and run through `extractor` (a
    `feature_extractor` model).

    A record is a dict: `index` (the text's position in `texts`), `tokens`
    (the sub-tokens as vocabulary strings, special tokens included) and
    `features` (numpy float32, one row per token). For an extractor with word
    pooling, `tokens` are the words instead (whitespace-separated, those of
    `text_b` after those of `text_a`; a word truncated away entirely is left
    out) and `features` has one row per word.

    Example:
    >>> import kerasbert
    >>> from kerasbert.tokenizers import WordPieceTokenizer
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un",
    ...                                 "##able", "to"])
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", vocab_size=8, num_layers=1)
    >>> extractor = feature_extractor(encoder, layers=(-1,), word_pooling="mean")
    >>> record = next(extract_features(["unable  to"], tokenizer, extractor))
    >>> record["index"], record["tokens"], record["features"].shape
    (0, ['unable', 'to'], (2, 128))
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    positions = _positions(extractor)
    if not isinstance(max_seq_length, int) or not 0 < max_seq_length <= positions:
        raise ValueError(f"max_seq_length must be a positive integer no more than the "
                         f"{positions} positions of the encoder, got {max_seq_length!r}")
    with_words = WORD_IDS in extractor.input
    items = iter(texts)
    first_index = 0
    while True:
        batch = list(itertools.islice(items, batch_size))
        if not batch:
            return
        records = [None] * len(batch)
        for pairs in (False, True):  # single texts and pairs pack apart
            indices = [i for i, item in enumerate(batch) if isinstance(item, str) != pairs]
            if indices:
                group = [_as_texts(batch[i], first_index + i) for i in indices]
                grouped = _group_records(group, tokenizer, extractor, with_words, max_seq_length,
                                         truncation)
                for i, record in zip(indices, grouped):
                    records[i] = dict(index=first_index + i, **record)
        yield from records
        first_index += len(batch)


def _as_texts(item, index):
    if isinstance(item, str):
        return (item,)
    if (isinstance(item, (tuple, list)) and len(item) == 2
            and all(isinstance(text, str) for text in item)):
        return tuple(item)
    raise ValueError(f"texts[{index}] is {type(item).__name__} ({item!r:.80}); expected a str "
                     "or a (text_a, text_b) pair of str")


def _positions(extractor):
    """The longest sequence the encoder inside a `feature_extractor` model can number."""
    embeddings = extractor.get_layer("embeddings")
    return embeddings.max_positions - embeddings.position_offset


def _extracted_features(extractor, inputs):
    # Eagerly: a compiled function would be traced again for every extractor, which costs more
    # than it saves on small inputs, and the per-operation overhead is small beside the matrix
    # products of a real encoder.
    return keras.ops.convert_to_numpy(extractor(inputs, training=False)["features"])


def _group_records(group, tokenizer, extractor, with_words, max_seq_length, truncation):
    """Records (without `index`) of texts that are all single or all pairs."""
    columns = [list(column) for column in zip(*group)]

    def packed(pieces, layout):
        return pack(*pieces, *[None] * (2 - len(pieces)), layout, max_length=max_seq_length,
                    truncation=truncation, padding="longest")

    if not with_words:
        inputs = packed([tokenizer.tokenize(column) for column in columns], tokenizer.layout)
        features = _extracted_features(extractor, inputs)
        token_ids = inputs["token_ids"].numpy()
        return [{"tokens": [tokenizer.id_to_token(i) for i in token_ids[row, :length]],
                 "features": features[row, :length]}
                for row, length in enumerate(inputs["padding_mask"].numpy().sum(axis=1))]

    ids, starts, ends = zip(*[tokenizer.tokenize_with_offsets(column) for column in columns])
    inputs = packed(ids, tokenizer.layout)
    # The same packing, truncation included, of where each token came from: its text (column)
    # and place in that text's tokens, as column * _COLUMN + place; -1 at special tokens and
    # padding.
    marks = SpecialTokenLayout(start_id=-1, end_id=-1, pad_id=-1,
                               pair_separators=tokenizer.layout.pair_separators,
                               second_segment_id=tokenizer.layout.second_segment_id)
    origins = packed([tf.ragged.range(tf.cast(piece.row_lengths(), tf.int32)) + column * _COLUMN
                      for column, piece in enumerate(ids)], marks)["token_ids"].numpy()
    starts = [column.to_list() for column in starts]
    ends = [column.to_list() for column in ends]
    word_ids = np.full(origins.shape, NO_WORD, dtype="int32")
    words = []
    for row, texts in enumerate(group):
        row_words, last = [], None
        token_words = [word_of_tokens(text, starts[column][row], ends[column][row])
                       for column, text in enumerate(texts)]
        spans = [whitespace_words(text) for text in texts]
        for position, origin in enumerate(origins[row]):
            if origin < 0:
                continue
            column, place = divmod(int(origin), _COLUMN)
            word = token_words[column][place]
            if word == NO_WORD:
                continue
            if (column, word) != last:
                row_words.append(texts[column][slice(*spans[column][word])])
                last = (column, word)
            word_ids[row, position] = len(row_words) - 1
        words.append(row_words)
    features = _extracted_features(extractor, {**inputs, WORD_IDS: tf.constant(word_ids)})
    return [{"tokens": row_words, "features": features[row, :len(row_words)]}
            for row, row_words in enumerate(words)]


def json_line(record, layers=None, round_digits=6):
    """A record of `extract_features` as one line of JSON in the layout of Google's
    `extract_features.py`: `{"linex_index", "features": [{"token", "layers": [{"index",
    "values"}]}]}` when `layers` (the indices the extractor was built with, `combine=None`) are
    given, else one `values` per token; values rounded to `round_digits` decimals.

    >>> record = {"index": 3, "tokens": ["hi"], "features": np.array([[[0.5, 1 / 3]]])}
    >>> line = json_line(record, layers=[-1], round_digits=2)
    >>> json.loads(line)["linex_index"], json.loads(line)["features"]
    (3, [{'token': 'hi', 'layers': [{'index': -1, 'values': [0.5, 0.33]}]}])
    """
    values = np.round(np.asarray(record["features"], dtype=np.float64), round_digits).tolist()
    if layers is None:
        features = [{"token": token, "values": vector}
                    for token, vector in zip(record["tokens"], values)]
    else:
        features = [{"token": token,
                     "layers": [{"index": int(index), "values": vector}
                                for index, vector in zip(layers, vectors)]}
                    for token, vectors in zip(record["tokens"], values)]
    return json.dumps({"linex_index": record["index"], "features": features}, ensure_ascii=False)


def write_json_lines(records, path, layers=None, round_digits=6):
    """Write `records` (from `extract_features`) to `path`, one `json_line` each, as they come.

    The lines go to a temporary file beside `path`, renamed to `path` once the last is written:
    if `records` fails part way, `path` is left as it was. Returns the number of records.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "features.jsonl")
    >>> record = {"index": 0, "tokens": ["hi"], "features": np.array([[0.25]])}
    >>> write_json_lines([record], path), open(path).read()
    (1, '{"linex_index": 0, "features": [{"token": "hi", "values": [0.25]}]}\\n')
    """
    count = 0
    with atomic_output(path, "w", encoding="utf-8") as file:
        for record in records:
            file.write(json_line(record, layers, round_digits) + "\n")
            count += 1
    return count
