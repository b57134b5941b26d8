"""Entities, not logits: a token classifier's (NER) answers on raw text, decoded in the graph.

`entity_function` builds `serve_entities(text)`: tf.string `[batch]` in, the named entities of
each text out, as transformers' `pipeline("token-classification",
aggregation_strategy="first")` finds them:

1. The text is tokenized with character offsets and packed as one text (truncated to
   `max_seq_length` tokens: words past the cut get no entity; a word cut in the middle ends at
   its last kept sub-token).
2. Sub-tokens are grouped into the tokenizer's words. WordPiece: a `##` piece continues the
   word before it (`[UNK]` always starts a word). Other tokenizers: transformers' fallback rule
   (the pipeline's for byte-level BPE and SentencePiece): a token continues the previous one
   unless it starts the text or a space (U+0020) is just before or at its start; `[UNK]`
   starts a word.
3. A word takes its first sub-token's argmax label and that label's softmax probability.
4. Adjacent words join into one entity when their types agree (`B-PER`, `I-PER`, `PER` are of
   type `PER`) and the later is not a `B-` label; an entity's score is the mean of its words'
   scores; entities of type `O` are dropped.

SavedModel signature outputs cannot be ragged, so the outputs are dense `[batch, entities]`,
padded to the text with the most entities: `entity` tf.string (the type; padding ""), `word`
tf.string (`text[start:end]`; padding ""), `start` and `end` int32 (Unicode code points, end
exclusive; padding -1) and `score` float32 (padding 0). An `entity` of "" marks padding.

`reference_entities` decodes the same answers in Python without the graph, and
`entity_checks` compares the two. This graph does not convert to TFLite builtins (ragged and
string ops); `kerasbert.export.text_tflite_answers` builds the same answers for
`model_text.tflite`.
"""

import numpy as np
import tensorflow as tf

from kerasbert.export.padding_buckets import bucket_width

ENTITY_ANSWERS = ("entity", "word", "start", "end", "score")
_PADDING = {"entity": b"", "word": b"", "start": -1, "end": -1, "score": 0.0}
_SPACE = ord(" ")


def entity_function(model, tokenizer, settings):
    """`serve_entities(text)`: a `tf.function` from tf.string `[batch]` to the padded entity
    answers of `ENTITY_ANSWERS` (see the module docstring for the decoding and the padding).

    Texts longer than `settings.max_seq_length` tokens (with the special tokens) are truncated:
    the words past the cut get no entity. Each batch is padded to the bucket of its longest
    text (`kerasbert.export.padding_buckets`), as the other text signatures are.

    Args:
        model: a kerasbert task model with `task == "token_classification"` and `id2label`.
        tokenizer: the kerasbert tokenizer the model was trained with.
        settings: an `AnswerSettings` (its `max_seq_length` is used).

    Returns:
        A `tf.function` with `input_signature=[tf.TensorSpec([None], tf.string, name="text")]`
        returning `{"entity", "word", "start", "end", "score"}`, each `[batch, entities]`.

    Example:
    >>> import kerasbert
    >>> from kerasbert.data import demo
    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "token_classification", num_labels=3,
    ...                                           id2label=["O", "B-PER", "I-PER"])
    >>> tokenizer = kerasbert.zoo.build_tokenizer("bert_tiny_uncased",
    ...                                           demo.vocabulary_dir("wordpiece"))
    >>> serve_entities = entity_function(model, tokenizer, AnswerSettings(max_seq_length=32))
    >>> answers = serve_entities(tf.constant(["Ada Lovelace met Charles Babbage.", ""]))
    >>> sorted(answers) == sorted(ENTITY_ANSWERS), answers["start"].shape[0]
    (True, 2)
    >>> text = "Ada Lovelace met Charles Babbage."
    >>> all(word.decode() == text[start:end] for word, start, end in zip(
    ...     answers["word"][0].numpy(), answers["start"][0].numpy(), answers["end"][0].numpy())
    ...     if start >= 0)
    True
    """
    from kerasbert.tokenizers.packing import pack

    names, tags, begins, kept = _label_tables(model)
    max_seq_length = settings.max_seq_length
    capacity = _capacity(tokenizer, max_seq_length)
    continues = _graph_continuation_rule(tokenizer)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve_entities(text):
        ids, starts, ends = tokenizer.tokenize_with_offsets(text)
        ids, starts, ends = ids[:, :capacity], starts[:, :capacity], ends[:, :capacity]
        packed = pack(tf.cast(ids, tf.int32), None, tokenizer.layout, max_length=max_seq_length)
        longest = tf.reduce_max(tf.reduce_sum(packed["padding_mask"], axis=1))
        width = bucket_width(longest, max_seq_length)
        outputs = model({name: packed[name][:, :width] for name in model.input}, training=False)
        logits = tf.cast(outputs["logits"], tf.float32)

        # Every kept sub-token of every text, one after the other ("flat" order).
        token_row = ids.value_rowids()
        token_position = tf.cast(tf.ragged.range(ids.row_lengths()).flat_values, tf.int64)
        token_logits = tf.gather_nd(logits, tf.stack([token_row, token_position + 1], axis=1))
        probabilities = tf.nn.softmax(token_logits, axis=-1)
        token_label = tf.argmax(token_logits, axis=-1, output_type=tf.int32)
        token_score = tf.reduce_max(probabilities, axis=-1)
        token_start = tf.cast(starts.flat_values, tf.int32)
        token_end = tf.cast(ends.flat_values, tf.int32)
        first_of_row = tf.equal(token_position, 0)
        starts_word = first_of_row | ~continues(
            tf.cast(ids.flat_values, tf.int32), token_start, token_row, text)

        # Words: runs of a word-starting token and its continuations.
        word_first = tf.reshape(tf.where(starts_word), [-1])
        word_last = tf.concat([word_first[1:], tf.shape(token_start, tf.int64)], 0) - 1
        word_row = tf.gather(token_row, word_first)
        word_label = tf.gather(token_label, word_first)
        word_score = tf.gather(token_score, word_first)
        word_start = tf.gather(token_start, word_first)
        word_end = tf.gather(token_end, word_last)

        # Entities: runs of words of one type, each but the first not a B- label.
        word_tag = tf.gather(tags, word_label)
        previous_row = tf.concat([tf.constant([-1], tf.int64), word_row[:-1]], 0)
        previous_tag = tf.concat([[-1], word_tag[:-1]], 0)
        starts_group = ((word_row != previous_row) | (word_tag != previous_tag)
                        | tf.gather(begins, word_label))
        group_of_word = tf.cumsum(tf.cast(starts_group, tf.int32)) - 1
        group_first = tf.reshape(tf.where(starts_group), [-1])
        group_last = tf.concat([group_first[1:], tf.shape(word_row, tf.int64)], 0) - 1
        group_label = tf.gather(word_label, group_first)
        keep = tf.gather(kept, group_label)
        group_row = tf.boolean_mask(tf.gather(word_row, group_first), keep)
        start = tf.boolean_mask(tf.gather(word_start, group_first), keep)
        end = tf.boolean_mask(tf.gather(word_end, group_last), keep)
        word = tf.strings.substr(tf.gather(text, group_row), start, end - start,
                                 unit="UTF8_CHAR")
        values = {
            "entity": tf.gather(names, tf.boolean_mask(group_label, keep)),
            "word": word,
            "start": start,
            "end": end,
            "score": tf.boolean_mask(tf.math.segment_mean(word_score, group_of_word), keep),
        }
        rows = tf.shape(text, tf.int64)[0]
        return {name: tf.RaggedTensor.from_value_rowids(value, group_row, nrows=rows).to_tensor(
                    default_value=tf.constant(_PADDING[name], value.dtype))
                for name, value in values.items()}

    return serve_entities


def reference_entities(model, tokenizer, settings, texts):
    """The entities of each text as `entity_function` should find them, decoded without it.

    Each text is tokenized eagerly with offsets, packed by the tokenizer (truncated to
    `settings.max_seq_length`), and run through the Keras model; words, their first sub-token's
    label (`kerasbert.data.token_windows.word_predictions`, as `kerasbert-finetune` predicts
    CoNLL words) and IOB2 entities are decoded in plain Python, following transformers'
    `aggregate_words` and `group_entities`.

    Args:
        model: a kerasbert token classification model with `id2label`.
        tokenizer: its kerasbert tokenizer.
        settings: an `AnswerSettings`.
        texts: a list of str.

    Returns:
        A list with, per text, a list of `{"entity", "word", "start", "end", "score"}` dicts
        (str, str, int, int, float), in text order.

    Example:
    >>> import kerasbert
    >>> from kerasbert.data import demo
    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "token_classification", num_labels=3,
    ...                                           id2label=["O", "B-PER", "I-PER"])
    >>> tokenizer = kerasbert.zoo.build_tokenizer("bert_tiny_uncased",
    ...                                           demo.vocabulary_dir("wordpiece"))
    >>> entities = reference_entities(model, tokenizer, AnswerSettings(max_seq_length=32),
    ...                               ["Ada Lovelace met Charles Babbage.", ""])
    >>> len(entities), entities[1]
    (2, [])
    >>> all(e["word"] == "Ada Lovelace met Charles Babbage."[e["start"]:e["end"]]
    ...     for e in entities[0])
    True
    """
    from kerasbert.data.token_windows import word_predictions

    texts = list(texts)
    if not texts:
        return []
    labels = _labels(model)
    capacity = _capacity(tokenizer, settings.max_seq_length)
    ids, starts, ends = (value.to_list() for value in tokenizer.tokenize_with_offsets(
        tf.constant(texts, tf.string)))
    packed = tokenizer(tf.constant(texts, tf.string), max_length=settings.max_seq_length,
                       truncation="longest_first", padding="max_length")
    logits = np.asarray(model({name: packed[name] for name in model.input}, training=False)[
        "logits"], np.float32)
    word_index = np.full(logits.shape[:2], -1, np.int64)
    spans = []  # per text: [first token, last token] of each word
    for row, text in enumerate(texts):
        row_ids = ids[row][:capacity]
        firsts = [index for index, token_id in enumerate(row_ids) if index == 0 or not
                  _continues(tokenizer, token_id, starts[row][index], text)]
        spans.append(list(zip(firsts, [first - 1 for first in firsts[1:]] + [len(row_ids) - 1])))
        word_index[row, [first + 1 for first in firsts]] = np.arange(len(firsts))
    word_labels = word_predictions(logits, np.arange(len(texts)), word_index,
                                   [len(words) for words in spans])
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)

    answers = []
    for row, text in enumerate(texts):
        words = [{"label": labels[label], "score": float(probabilities[row, first + 1, label]),
                  "start": starts[row][first], "end": ends[row][last]}
                 for (first, last), label in zip(spans[row], word_labels[row])]
        answers.append([entity for entity in (_group(group, text) for group in _groups(words))
                        if entity["entity"] != "O"])
    return answers


def entity_checks(produced, expected, tolerance):
    """Checks of `serve_entities` outputs (`produced`: numpy arrays by name, padded) against
    `reference_entities` (`expected`): entity types, words and offsets equal, scores within
    `tolerance` (relative, as `kerasbert.export.compare.float_difference`).

    Returns:
        A list of `{"output", "check": "answer", "passed", ...}`, one per `ENTITY_ANSWERS`
        name; a mismatch names the first differing text in `first_differing_text`.

    Example:
    >>> expected = [[{"entity": "PER", "word": "Ada", "start": 0, "end": 3, "score": 0.9}], []]
    >>> produced = {"entity": np.array([[b"PER"], [b""]]), "word": np.array([[b"Ada"], [b""]]),
    ...             "start": np.array([[0], [-1]]), "end": np.array([[4], [-1]]),
    ...             "score": np.array([[0.90001], [0.0]])}
    >>> [(check["output"], check["passed"]) for check in entity_checks(produced, expected, 1e-4)]
    [('entity', True), ('word', True), ('start', True), ('end', False), ('score', True)]
    """
    from kerasbert.export.compare import float_difference

    rows = _unpadded(produced)
    checks = []
    for name in ENTITY_ANSWERS:
        got = [[entity[name] for entity in row] for row in rows]
        want = [[_plain(entity[name]) for entity in row] for row in expected]
        if name == "score":
            if [len(row) for row in got] != [len(row) for row in want]:
                result = {"max_abs": float("inf"), "max_rel": float("inf")}
            else:
                result = float_difference(np.array([value for row in want for value in row]),
                                          np.array([value for row in got for value in row]))
            checks.append({"output": name, "check": "answer", **result,
                           "passed": result["max_rel"] <= tolerance})
            continue
        differing = [index for index in range(max(len(got), len(want)))
                     if index >= len(got) or index >= len(want) or got[index] != want[index]]
        checks.append({"output": name, "check": "answer", "differing_texts": len(differing),
                       "first_differing_text": differing[0] if differing else None,
                       "passed": not differing})
    return checks


def _unpadded(produced):
    """Per text, the list of `{name: python value}` entities of padded outputs."""
    entity = np.asarray(produced["entity"])
    columns = {name: np.asarray(produced[name]) for name in ENTITY_ANSWERS}
    return [[{name: _plain(columns[name][row, column]) for name in ENTITY_ANSWERS}
             for column in range(entity.shape[1]) if bytes(entity[row, column]) != b""]
            for row in range(entity.shape[0])]


def _plain(value):
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8")
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value)
    return value


# --- labels, words and groups, shared by the graph and the Python decoder ---

def _labels(model):
    if getattr(model, "task", None) != "token_classification":
        raise ValueError(f"{getattr(model, 'name', model)}: entity answers need a "
                         f"token_classification model, not {getattr(model, 'task', None)!r}")
    return [model.id2label[index] for index in range(model.num_labels)]


def _tag(label):
    """transformers' `get_tag`: `(prefix, type)`; a label without B-/I- continues ("I")."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def _entity_name(label):
    """The name transformers' `group_sub_entities` gives an entity starting with `label`."""
    return label.split("-", 1)[-1]


def _label_tables(model):
    """Per label id: the entity name, the type's number, whether it is a B- label, whether its
    entities are kept (not "O")."""
    labels = _labels(model)
    types = sorted({_tag(label)[1] for label in labels})
    return (tf.constant([_entity_name(label) for label in labels], tf.string),
            tf.constant([types.index(_tag(label)[1]) for label in labels], tf.int32),
            tf.constant([_tag(label)[0] == "B" for label in labels], tf.bool),
            tf.constant([_entity_name(label) != "O" for label in labels], tf.bool))


def _capacity(tokenizer, max_seq_length):
    capacity = max_seq_length - tokenizer.layout.num_special_tokens(pair=False)
    if capacity < 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for text next to the "
                         f"{tokenizer.layout.num_special_tokens(pair=False)} special tokens")
    return capacity


def _is_wordpiece(tokenizer):
    from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

    return isinstance(tokenizer, WordPieceTokenizer)


def _graph_continuation_rule(tokenizer):
    """`continues(ids, starts, rows, text)`: whether each flat token continues the previous
    token's word (module docstring, step 2), in the graph."""
    unknown = tokenizer.unk_token_id
    if _is_wordpiece(tokenizer):
        suffix = tf.constant([token.startswith("##") and index != unknown
                              for index, token in enumerate(tokenizer.vocabulary)], tf.bool)
        return lambda ids, starts, rows, text: tf.gather(suffix, ids)

    def continues(ids, starts, rows, text):
        characters = tf.strings.unicode_decode(text, "UTF-8")
        flat = tf.concat([characters.flat_values, [_SPACE]], 0)  # a space past the last text
        base = tf.gather(characters.row_starts(), rows)
        length = tf.cast(tf.gather(characters.row_lengths(), rows), tf.int32)
        at = tf.where(starts < length, tf.gather(flat, base + tf.cast(starts, tf.int64)), -1)
        before = tf.gather(flat, base + tf.cast(tf.maximum(starts - 1, 0), tf.int64))
        return (starts > 0) & (before != _SPACE) & (at != _SPACE) & (ids != unknown)

    return continues


def _continues(tokenizer, token_id, start, text):
    """The rule of `_graph_continuation_rule`, in Python, for one token."""
    if token_id == tokenizer.unk_token_id:
        return False
    if _is_wordpiece(tokenizer):
        return tokenizer.id_to_token(token_id).startswith("##")
    return start > 0 and " " not in text[start - 1:start + 1]


def _groups(words):
    """transformers' `group_entities`: runs of words of one type, each after the first not B-."""
    groups = []
    for word in words:
        prefix, kind = _tag(word["label"])
        if groups and prefix != "B" and kind == _tag(groups[-1][-1]["label"])[1]:
            groups[-1].append(word)
        else:
            groups.append([word])
    return groups


def _group(words, text):
    start, end = words[0]["start"], words[-1]["end"]
    return {"entity": _entity_name(words[0]["label"]), "word": text[start:end], "start": start,
            "end": end, "score": float(np.mean(np.array([w["score"] for w in words], np.float32)))}
