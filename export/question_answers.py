"""Answers, not logits, for a span question-answering model: `serve_question(question, context)`.

`question_function(model, tokenizer, settings)` is a `tf.function` that takes 1-D `tf.string`
`question` and `context` and returns, per question,

- `answer` (tf.string `[batch]`): the exact substring of the context the model picks;
- `start`, `end` (int32 `[batch]`): its character offsets in the context, in Unicode code
  points (as Python indexes a `str`), end exclusive: `context[start:end] == answer`;
- `score` (float32 `[batch]`): the probability transformers' question-answering pipeline
  reports for that span (below);
- `has_answer` (bool `[batch]`, SQuAD v2.0 settings only): False when the model says "no
  answer"; then `answer` is "" and `start` = `end` = 0.

Everything happens in the graph, exactly as the Python fine-tuning pipeline evaluates:

- windows as `kerasbert.data.squad_features.squad_windows` makes them: the question loses its
  leading whitespace and is cut to `max_query_length` tokens; the context, tokenized whole with
  character offsets, is cut into windows of `max_seq_length` - question tokens - special tokens
  context tokens, `doc_stride` tokens apart (`context_windows`), each packed
  `[CLS] question [SEP] window [SEP]` in the tokenizer's layout and padded to
  `max_seq_length`; a token may only start an answer in the window where it has the most
  context (`max_context_windows`). All windows of all questions of the batch run through the
  model as one batch.
- the span as `kerasbert.data.squad_decoding.decode_squad` chooses its best non-null answer:
  in every window the `n_best_size` highest start logits times the `n_best_size` highest end
  logits, both tokens in the window's context, the start with its maximum context there, the end
  not before the start and at most `max_answer_length` tokens after it; the pairs of all the
  question's windows ranked by start + end logit (ties: window, start, end order); a span whose
  text is only whitespace is skipped. SQuAD v2.0: the null score is the smallest
  start[0] + end[0] over the question's windows, and the answer is "no answer" when there is no
  span or null score - best span score > `null_score_diff_threshold`. A question without any
  span answers "" (start = end = 0) in v1.1 too, as `decode_squad` does.

`score` is what transformers' `QuestionAnsweringPipeline` reports (`select_starts_ends`: the
logits of every position that is neither the [CLS] token nor a context token are set to -10000,
softmax over the window for the starts and for the ends; a span's score is
p_start[start] * p_end[end], the null answer's p_start[0] * p_end[0]): within the window the span
comes from, p_start is the softmax of the start logits over the [CLS] position and that window's
context tokens (all other positions excluded), p_end the same for the end logits, and
score = p_start[start] * p_end[end]. For "no answer" it is p_start[0] * p_end[0] of the window
with the smallest null score.

Where the pipeline differs: it ranks spans by that probability, normalized window by window, and
pairs every start with every end, where this ranks by logits across windows as in SQuAD
evaluation, among the `n_best_size` best starts and ends; its `doc_stride` is the overlap of two
windows (here the step) and it does not cut questions to `max_query_length`. For a context that
fits one window, with `n_best_size` >= `max_seq_length`, both choose the same span.

`kerasbert.export.text_tflite_answers` runs the same windows and decoding (`decode_spans`, in
TFLite builtin ops) inside `model_text.tflite`.

`reference_question_answers` computes the same outputs without the graph (`squad_windows`,
`squad_dataset`, the Keras model, `decode_squad`), and `question_answer_checks` compares an
artifact's outputs with it.
"""

import numpy as np
import tensorflow as tf

from kerasbert.tokenizers.fast_offsets import row_of

QUESTION_ANSWERS = ("answer", "start", "end", "score")
HAS_ANSWER = "has_answer"

# Python's `str.isspace` characters (what `str.strip` and `str.lstrip` remove), for RE2.
_SPACE = r"[\s\x{0B}\x{1C}-\x{1F}\x{85}\p{Z}]"


def question_answer_names(settings):
    """The outputs of `serve_question` under `settings` (an `AnswerSettings`).

    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> question_answer_names(AnswerSettings())
    ('answer', 'start', 'end', 'score')
    >>> question_answer_names(AnswerSettings(version_2_with_negative=True))[-1]
    'has_answer'
    """
    return QUESTION_ANSWERS + ((HAS_ANSWER,) if settings.version_2_with_negative else ())


def question_function(model, tokenizer, settings):
    """The `tf.function` `serve_question(question, context)` of the module docstring, for the
    question-answering `model`, its `tokenizer` and `settings` (an `AnswerSettings`).

    >>> import kerasbert, kerasbert.data.demo
    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "question_answering")
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> settings = AnswerSettings(max_seq_length=32, doc_stride=8, max_query_length=8)
    >>> serve = question_function(model, tokenizer, settings)
    >>> context = "The quick brown fox jumps over the lazy dog. " * 4  # three windows
    >>> answers = serve(tf.constant(["Who jumps?"]), tf.constant([context]))
    >>> sorted(answers)
    ['answer', 'end', 'score', 'start']
    >>> start, end = int(answers["start"][0]), int(answers["end"][0])
    >>> answers["answer"][0].numpy().decode() == context[start:end] != ""
    True
    """
    _check_settings(model, tokenizer, settings)
    names = question_answer_names(settings)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None], tf.string, name="context")])
    def serve_question(question, context):
        tf.debugging.assert_equal(tf.size(question), tf.size(context),
                                  message="question and context must have the same length")
        question_ids = tokenizer.tokenize(tf.strings.regex_replace(question, f"^{_SPACE}+", ""))
        context_ids, char_starts, char_ends = tokenizer.tokenize_with_offsets(context)
        # A pad past the offsets: token indexes are 0 where nothing is chosen, which holds no
        # token when the batch has no context token at all.
        char_starts = tf.concat([tf.cast(char_starts.flat_values, tf.int32), [0]], 0)
        char_ends = tf.concat([tf.cast(char_ends.flat_values, tf.int32), [0]], 0)

        def is_blank(example, start_tokens, end_tokens, valid):
            return _blank_spans(tf.gather(context, example), tf.gather(char_starts, start_tokens),
                                tf.gather(char_ends, end_tokens), valid)

        span = decode_spans(model, tokenizer.layout, settings,
                            tf.cast(question_ids.flat_values, tf.int32),
                            tf.cast(question_ids.row_splits, tf.int32),
                            tf.cast(context_ids.flat_values, tf.int32),
                            tf.cast(context_ids.row_splits, tf.int32), is_blank)
        use_null = ~span[HAS_ANSWER]
        start_char = tf.where(use_null, 0, tf.gather(char_starts, span["start_token"]))
        end_char = tf.where(use_null, 0, tf.gather(char_ends, span["end_token"]))
        answers = {
            "answer": tf.strings.substr(context, start_char, end_char - start_char,
                                        unit="UTF8_CHAR"),
            "start": start_char,
            "end": end_char,
            "score": span["score"],
            HAS_ANSWER: span[HAS_ANSWER],
        }
        return {name: answers[name] for name in names}

    return serve_question


def decode_spans(model, layout, settings, question_ids, question_splits, context_ids,
                 context_splits, is_blank=None):
    """Windows, the model and the span decoding of `serve_question` on tokenized texts, in
    TFLite builtin ops only (no ragged, string or Repeat ops): what the SavedModel's and
    `model_text.tflite`'s `serve_question` share.

    Args:
        model, settings: as `question_function`'s; `layout`: the tokenizer's
            `SpecialTokenLayout`.
        question_ids, question_splits: every question's ids one after the other (int32) and
            where each question starts (int32 `[batch + 1]`, as a ragged tensor's row splits),
            leading whitespace already ignored; cut here to `max_query_length`.
        context_ids, context_splits: the same for the contexts.
        is_blank: None, or `is_blank(example, start_tokens, end_tokens, valid)` saying which
            candidate spans' texts are only whitespace (they are skipped): `example` the
            question of each window row `[rows]`, the others `[rows, candidates]`, tokens as
            indexes into `context_ids`.

    Returns:
        `{"start_token", "end_token"}` (int32 `[batch]`, indexes into `context_ids` of the
        answer's first and last token; meaningless where there is no answer), `"score"`
        (float32) and `has_answer` (bool).
    """
    seq_length = settings.max_seq_length
    top_k = min(settings.n_best_size, seq_length)
    question_lengths = tf.minimum(question_splits[1:] - question_splits[:-1],
                                  settings.max_query_length)
    windows = _windows(question_lengths, context_splits[1:] - context_splits[:-1],
                       seq_length - layout.num_special_tokens(pair=True), settings.doc_stride,
                       layout.pair_separators, seq_length)
    example = windows["example"]
    # Per packed position of each window row: the context token there (0 outside the
    # window's context).
    in_context, max_context = windows["in_context"], windows["max_context"]
    first_token = tf.gather(context_splits, example)
    flat_token = tf.where(in_context, tf.expand_dims(first_token, 1) + windows["token"], 0)
    packed = _pack_windows(layout, windows, tf.gather(question_splits, example),
                           tf.gather(question_lengths, example), question_ids, context_ids,
                           flat_token)
    outputs = model({name: packed[name] for name in model.input}, training=False)
    start_logits = tf.cast(outputs["start_logits"], tf.float32)
    end_logits = tf.cast(outputs["end_logits"], tf.float32)

    # Candidate spans of each window, in `decode_squad`'s pairing order.
    top_starts = tf.math.top_k(start_logits, k=top_k, sorted=True).indices
    top_ends = tf.math.top_k(end_logits, k=top_k, sorted=True).indices
    span_starts = tf.repeat(top_starts, top_k, axis=1)  # [rows, k * k], start-major
    span_ends = tf.tile(top_ends, [1, top_k])
    valid = (tf.gather(max_context, span_starts, batch_dims=1)
             & tf.gather(in_context, span_ends, batch_dims=1)
             & (span_ends >= span_starts)
             & (span_ends - span_starts < settings.max_answer_length))
    span_tokens = (tf.gather(flat_token, span_starts, batch_dims=1),
                   tf.gather(flat_token, span_ends, batch_dims=1))
    if is_blank is not None:
        valid &= ~is_blank(example, *span_tokens, valid)
    # Scores are float64 sums of two float32 logits in `decode_squad`: exact, so here they are
    # kept exact as float32 pairs (TFLite has no float64 arithmetic), compared high part first.
    span_scores = _two_sum(tf.gather(start_logits, span_starts, batch_dims=1),
                           tf.gather(end_logits, span_ends, batch_dims=1))

    # All windows of a question side by side: [batch, windows * k * k].
    rows, row_valid = windows["rows"], windows["row_valid"]
    safe_rows = tf.where(row_valid, rows, 0)
    width = [tf.shape(rows)[0], tf.shape(rows)[1] * top_k * top_k]
    valid_by_question = tf.reshape(tf.gather(valid, safe_rows) & tf.expand_dims(row_valid, -1),
                                   width)
    has_span = tf.reduce_any(valid_by_question, axis=1)
    best_score, is_best = _pair_extreme(
        [tf.reshape(tf.gather(part, safe_rows), width) for part in span_scores],
        valid_by_question, tf.reduce_max)
    chosen = _first_where(is_best)
    chosen_row = tf.gather(safe_rows, chosen // (top_k * top_k), batch_dims=1)
    chosen_pair = tf.stack([chosen_row, chosen % (top_k * top_k)], axis=1)
    start_position = tf.gather_nd(span_starts, chosen_pair)
    end_position = tf.gather_nd(span_ends, chosen_pair)

    null_scores = _two_sum(start_logits[:, 0], end_logits[:, 0])
    null_score, is_null = _pair_extreme([tf.gather(part, safe_rows) for part in null_scores],
                                        row_valid, tf.reduce_min)
    null_row = tf.gather(safe_rows, _first_where(is_null), batch_dims=1)
    use_null = ~has_span
    if settings.version_2_with_negative:
        use_null |= _exceeds(null_score, best_score, settings.null_score_diff_threshold)

    allowed = in_context | (tf.range(seq_length) == 0)
    p_start = tf.nn.softmax(tf.where(allowed, start_logits, -np.inf), axis=1)
    p_end = tf.nn.softmax(tf.where(allowed, end_logits, -np.inf), axis=1)
    span_probability = (tf.gather_nd(p_start, tf.stack([chosen_row, start_position], 1))
                        * tf.gather_nd(p_end, tf.stack([chosen_row, end_position], 1)))
    null_probability = tf.gather(p_start[:, 0] * p_end[:, 0], null_row)
    return {"start_token": tf.gather_nd(span_tokens[0], chosen_pair),
            "end_token": tf.gather_nd(span_tokens[1], chosen_pair),
            "score": tf.where(use_null, null_probability, span_probability),
            HAS_ANSWER: ~use_null}


def _pack_windows(layout, windows, question_starts, question_lengths, question_ids,
                  context_ids, context_token):
    """`[start] question [end] * pair_separators window [end]` per window row, padded to the
    rows' width, as `pack` lays out a pair (nothing is truncated: the windows fit), in builtin
    ops: the question of each row starts at `question_starts` and has `question_lengths`
    tokens, `context_token` is the context token at each position (`_windows`' `in_context`)."""
    position = tf.expand_dims(tf.range(tf.shape(context_token)[1]), 0)
    question_length = tf.expand_dims(question_lengths, 1)
    second_start = 1 + question_length + layout.pair_separators
    second_end = second_start + tf.expand_dims(windows["length"], 1)  # the closing [end]
    is_question = (position >= 1) & (position <= question_length)
    in_context = windows["in_context"]
    # A pad value past each id list, so that every gather index is valid, even with no ids.
    questions = tf.concat([question_ids, [layout.pad_id]], 0)
    contexts = tf.concat([context_ids, [layout.pad_id]], 0)
    question_index = tf.where(is_question, tf.expand_dims(question_starts, 1) + position - 1,
                              tf.size(question_ids))
    context_index = tf.where(in_context, context_token, tf.size(context_ids))
    token_ids = tf.where(is_question, tf.gather(questions, question_index),
                         tf.gather(contexts, context_index))
    is_end = ((position > question_length) & (position < second_start)) | (position == second_end)
    token_ids = tf.where(is_end, layout.end_id, token_ids)
    token_ids = tf.where(position == 0, layout.start_id, token_ids)
    is_second = (position >= second_start) & (position <= second_end)
    return {"token_ids": token_ids,
            "segment_ids": tf.where(is_second, layout.second_segment_id, 0),
            "padding_mask": tf.cast(position <= second_end, tf.int32)}


def reference_question_answers(model, tokenizer, settings, questions, contexts):
    """What `serve_question` should return for `questions` and `contexts` (lists of str), made
    without its graph: `squad_windows`, the Keras `model` on `squad_dataset`'s batches,
    `decode_squad` for the answer texts; a dict of numpy arrays named as
    `question_answer_names(settings)`.

    >>> import kerasbert, kerasbert.data.demo
    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "question_answering")
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> settings = AnswerSettings(max_seq_length=32, doc_stride=8, max_query_length=8)
    >>> context = "The quick brown fox jumps over the lazy dog. " * 4
    >>> expected = reference_question_answers(model, tokenizer, settings, ["Who?"], [context])
    >>> {name: value.dtype.name for name, value in expected.items()}
    {'answer': 'object', 'start': 'int32', 'end': 'int32', 'score': 'float32'}
    >>> start, end = int(expected["start"][0]), int(expected["end"][0])
    >>> expected["answer"][0].decode() == context[start:end] != ""
    True
    """
    from kerasbert.data.squad_decoding import decode_squad

    _check_settings(model, tokenizer, settings)
    examples, features, start_logits, end_logits = window_logits(model, tokenizer, settings,
                                                                 questions, contexts)
    decoded = decode_squad(examples, features, start_logits, end_logits,
                           n_best_size=settings.n_best_size,
                           max_answer_length=settings.max_answer_length,
                           version_2_with_negative=settings.version_2_with_negative,
                           null_score_diff_threshold=settings.null_score_diff_threshold)
    by_example = [[] for _ in examples]
    for feature in features:
        by_example[feature.example_index].append(feature)
    rows = []
    for example, windows in zip(examples, by_example):
        text = decoded.texts[example.qas_id]
        span, null = _best_span(example, windows, start_logits, end_logits, settings)
        if span is None or (settings.version_2_with_negative
                            and null[0] - span[0] > settings.null_score_diff_threshold):
            if text:
                raise AssertionError(f"question {example.qas_id}: decode_squad answers {text!r} "
                                     "where the null rule says no answer")
            feature = null[1]
            probability = (_probabilities(feature, start_logits[feature.feature_index])[0]
                           * _probabilities(feature, end_logits[feature.feature_index])[0])
            rows.append((text, 0, 0, probability, False))
            continue
        _, feature, start, end = span
        first = feature.context_offset
        start_char = int(feature.char_starts[start - first])
        end_char = int(feature.char_ends[end - first])
        if example.context[start_char:end_char] != text:
            raise AssertionError(f"question {example.qas_id}: decode_squad answers {text!r}, the "
                                 f"span found here is {example.context[start_char:end_char]!r}")
        probability = (_probabilities(feature, start_logits[feature.feature_index])[start]
                       * _probabilities(feature, end_logits[feature.feature_index])[end])
        rows.append((text, start_char, end_char, probability, True))
    columns = list(zip(*rows)) if rows else [()] * 5
    answers = {
        "answer": np.array([text.encode("utf-8") for text in columns[0]], dtype=object),
        "start": np.array(columns[1], np.int32),
        "end": np.array(columns[2], np.int32),
        "score": np.array(columns[3], np.float32),
        HAS_ANSWER: np.array(columns[4], bool),
    }
    return {name: answers[name] for name in question_answer_names(settings)}


def window_logits(model, tokenizer, settings, questions, contexts):
    """`(examples, features, start_logits, end_logits)`: the SQuAD examples of `questions` and
    `contexts`, their windows (`squad_windows`) and the Keras `model`'s float32 logits per
    window, row i for feature i, as `reference_question_answers` decodes them."""
    from kerasbert.data.squad import SquadExample
    from kerasbert.data.squad_features import squad_dataset, squad_windows

    examples = [SquadExample(str(index), question, context)
                for index, (question, context) in enumerate(zip(questions, contexts, strict=True))]
    features = squad_windows(examples, tokenizer, max_seq_length=settings.max_seq_length,
                             doc_stride=settings.doc_stride,
                             max_query_length=settings.max_query_length)
    start_logits = np.zeros([len(features), settings.max_seq_length], np.float32)
    end_logits = np.zeros_like(start_logits)
    for batch in squad_dataset(features, batch_size=32):
        outputs = model({name: batch[name] for name in model.input}, training=False)
        rows = batch["feature_index"].numpy()
        start_logits[rows] = np.asarray(outputs["start_logits"], np.float32)
        end_logits[rows] = np.asarray(outputs["end_logits"], np.float32)
    return examples, features, start_logits, end_logits


def question_answer_checks(produced, expected, tolerance):
    """Checks of `serve_question`'s outputs (`produced`, by name) against `expected` (by
    `reference_question_answers`): `answer`, `start`, `end` and `has_answer` equal, `score`
    within `tolerance` (relative, as `float_difference`). A list of
    `{"output", "check": "answer", "passed", ...}`, one per output `expected` has.

    >>> expected = {"answer": np.array([b"fox"]), "start": np.array([16]),
    ...             "end": np.array([19]), "score": np.array([0.25])}
    >>> produced = {"answer": np.array([b"dog"]), "start": np.array([16]),
    ...             "end": np.array([19]), "score": np.array([0.25001])}
    >>> [(check["output"], check["passed"])
    ...  for check in question_answer_checks(produced, expected, 1e-4)]
    [('answer', False), ('start', True), ('end', True), ('score', True)]
    """
    from kerasbert.export.compare import float_difference

    checks = []
    for name in QUESTION_ANSWERS + (HAS_ANSWER,):
        if name not in expected:
            continue
        want = _as_array(expected[name], name)
        if name not in produced:
            checks.append({"output": name, "check": "answer", "missing": True, "passed": False})
            continue
        got = _as_array(produced[name], name)
        if name == "score":
            result = float_difference(want, got)
            checks.append({"output": name, "check": "answer", **result,
                           "passed": result["max_rel"] <= tolerance})
            continue
        same_shape = want.shape == got.shape
        differing = int(np.sum(want != got)) if same_shape else None
        checks.append({"output": name, "check": "answer", "differing_rows": differing,
                       "passed": same_shape and differing == 0})
    return checks


def _check_settings(model, tokenizer, settings):
    if getattr(model, "task", None) != "question_answering":
        raise ValueError(f"{getattr(model, 'name', model)}: question answers need a "
                         f"question_answering model, not {getattr(model, 'task', None)!r}")
    specials = tokenizer.layout.num_special_tokens(pair=True)
    if settings.max_seq_length - settings.max_query_length - specials < 1:
        raise ValueError(f"max_seq_length={settings.max_seq_length} leaves no room for context "
                         f"after a question of max_query_length={settings.max_query_length} "
                         f"tokens and {specials} special tokens")
    if settings.doc_stride < 1 or settings.n_best_size < 1 or settings.max_answer_length < 1:
        raise ValueError("doc_stride, n_best_size and max_answer_length must be at least 1, got "
                         f"{settings.doc_stride}, {settings.n_best_size} and "
                         f"{settings.max_answer_length}")


def _windows(question_lengths, context_lengths, room, doc_stride, pair_separators, seq_length):
    """The windows of every question, as `context_windows` and `max_context_windows` make them.

    One row per window, question by question: `example` (its question), `window` (its index
    among the question's windows), `start` and `length` (in context tokens); per packed position
    of a row, `token` (the context token there), `in_context` and `max_context` (the window has
    the most context for that token); `rows` `[batch, max windows]` (the row of each window of
    each question) and `row_valid` (that window exists).
    """
    capacity = room - question_lengths  # context tokens per window, >= 1
    step = tf.minimum(capacity, doc_stride)
    overflow = tf.maximum(context_lengths - capacity, 0)
    num_windows = 1 + (overflow + step - 1) // step
    # The question of each window row (TFLite builtins: no Repeat, no RaggedRange).
    first_row = tf.cumsum(num_windows, exclusive=True)
    total = tf.reduce_sum(num_windows)
    example = row_of(total, tf.concat([first_row, total[tf.newaxis]], 0))
    window = tf.range(total) - tf.gather(first_row, example)
    example_step, example_capacity = tf.gather(step, example), tf.gather(capacity, example)
    example_length = tf.gather(context_lengths, example)
    start = window * example_step
    length = tf.minimum(example_length - start, example_capacity)

    offset = 1 + tf.gather(question_lengths, example) + pair_separators  # packed position
    token = tf.expand_dims(start - offset, 1) + tf.range(seq_length)  # [rows, seq]
    local = token - tf.expand_dims(start, 1)
    in_context = (local >= 0) & (local < tf.expand_dims(length, 1))

    # The score of each token in each window of its question (max_context_windows).
    most = tf.reduce_max(tf.concat([num_windows, [1]], 0))
    other = tf.range(most)  # [windows]
    other_start = tf.expand_dims(example_step, 1) * other  # [rows, windows]
    other_length = tf.where(other < tf.expand_dims(tf.gather(num_windows, example), 1),
                            tf.minimum(tf.expand_dims(example_length, 1) - other_start,
                                       tf.expand_dims(example_capacity, 1)), 0)
    left = tf.expand_dims(token, 2) - tf.expand_dims(other_start, 1)  # [rows, seq, windows]
    right = tf.expand_dims(other_length, 1) - 1 - left
    contains = (left >= 0) & (right >= 0)
    # `min(left, right) + 0.01 * length` in float64 as `max_context_windows` computes it, by
    # its rank among all such values (integers: no float64 arithmetic in TFLite; ties kept).
    score_ranks, ranked_lengths = _max_context_ranks(seq_length)
    score = tf.gather(score_ranks, tf.where(contains, tf.minimum(left, right), 0) * ranked_lengths
                      + tf.expand_dims(other_length, 1))
    score = tf.where(contains, score, -1)
    best = _first_where(score == tf.reduce_max(score, axis=2, keepdims=True))
    max_context = in_context & (best == tf.expand_dims(window, 1))

    rows = tf.expand_dims(first_row, 1) + other
    return {"example": example, "window": window, "start": start, "length": length,
            "token": token, "in_context": in_context, "max_context": max_context,
            "rows": rows, "row_valid": other < tf.expand_dims(num_windows, 1)}


def _max_context_ranks(seq_length):
    """`(ranks, lengths)`: `ranks[a * lengths + l]` is the rank (int32, 0 = smallest) of the
    float64 `a + 0.01 * l` among all values with `a` in [0, seq_length // 2] and `l` in
    [0, seq_length], equal values sharing a rank: comparing ranks compares those floats."""
    distance = np.arange(seq_length // 2 + 1)[:, np.newaxis]
    length = np.arange(seq_length + 1)[np.newaxis, :]
    values = distance + 0.01 * length
    ranks = np.unique(values.reshape(-1), return_inverse=True)[1]
    return tf.constant(ranks.astype(np.int32)), seq_length + 1


def _two_sum(first, second):
    """`(high, low)` float32 with `high = first + second` rounded and `high + low` equal to the
    exact sum (Knuth's TwoSum)."""
    high = first + second
    second_part = high - first
    first_part = high - second_part
    return high, (first - first_part) + (second - second_part)


def _pair_extreme(pair, valid, reduce):
    """The extreme (`tf.reduce_max` / `tf.reduce_min`) along the last axis of the exact sums
    `high + low` of `pair` among `valid`, as a `(high, low)` pair, and where it is reached."""
    high, low = pair
    fill = -np.inf if reduce is tf.reduce_max else np.inf
    high = tf.where(valid, high, fill)
    best_high = reduce(high, axis=-1, keepdims=True)
    tied = valid & (high == best_high)
    best_low = reduce(tf.where(tied, low, fill), axis=-1, keepdims=True)
    return ((tf.squeeze(best_high, -1), tf.squeeze(best_low, -1)),
            tied & (tf.where(tied, low, fill) == best_low))


def _exceeds(minuend, subtrahend, threshold):
    """Whether `minuend - subtrahend > threshold` for exact `(high, low)` float32 pairs and a
    Python float, in float32 arithmetic: the high parts' differences are exact (TwoSum), only the
    sum of the small remainders rounds, so the answer is float64's unless the difference is
    within about 2**-47 (relative to the logits and the threshold) of the threshold."""
    threshold_high = np.float32(threshold)
    threshold_low = np.float32(threshold - float(threshold_high))
    difference, error = _two_sum(minuend[0], -subtrahend[0])
    margin, margin_error = _two_sum(difference, -threshold_high)
    return margin + (margin_error + error + minuend[1] - subtrahend[1] - threshold_low) > 0


def _first_where(condition):
    """The index of the first True along the last axis of `condition` (int32)."""
    width = tf.shape(condition)[-1]
    indices = tf.where(condition, tf.range(width), width)
    return tf.minimum(tf.reduce_min(indices, axis=-1), tf.maximum(width - 1, 0))


def _blank_spans(contexts, start_chars, end_chars, valid):
    """Whether each valid span's text (`contexts[row][start:end]`) is only whitespace (empty
    included), as `decode_squad` skips such spans; False where not `valid`."""
    where = tf.where(valid)
    rows = tf.gather(contexts, where[:, 0])
    starts, ends = tf.gather_nd(start_chars, where), tf.gather_nd(end_chars, where)
    texts = tf.strings.substr(rows, starts, tf.maximum(ends - starts, 0), unit="UTF8_CHAR")
    blank = tf.strings.regex_full_match(texts, f"{_SPACE}*")
    return tf.scatter_nd(where, blank, tf.shape(valid, out_type=tf.int64))


def _best_span(example, windows, start_logits, end_logits, settings):
    """`decode_squad`'s best non-null span `(score, feature, start, end)` (None without one) and
    the null `(score, feature)`: the window with the smallest start[0] + end[0]."""
    from kerasbert.data.squad_decoding import _span_text, _window_spans

    candidates, null = [], None
    for feature in windows:
        start_row = np.asarray(start_logits[feature.feature_index], np.float64)
        end_row = np.asarray(end_logits[feature.feature_index], np.float64)
        null_score = float(start_row[0] + end_row[0])
        if null is None or null_score < null[0]:
            null = (null_score, feature)
        starts, ends = _window_spans(feature, start_row, end_row, settings.n_best_size,
                                     settings.max_answer_length)
        candidates += [(float(start_row[start] + end_row[end]), feature, int(start), int(end))
                       for start, end in zip(starts, ends)]
    order = sorted(range(len(candidates)), key=lambda index: -candidates[index][0])
    for index in order:
        _, feature, start, end = candidates[index]
        if _span_text(example.context, feature, start, end).strip():
            return candidates[index], null
    return None, null


def _probabilities(feature, logits):
    """Softmax of a window's logits over [CLS] and its context tokens (0 elsewhere), float32 as
    transformers' pipeline computes it."""
    logits = np.asarray(logits, np.float32)
    allowed = np.zeros(logits.shape, bool)
    allowed[0] = True
    allowed[feature.context_offset:feature.context_offset + feature.window_length] = True
    shifted = np.where(allowed, logits, np.float32(-10000.0))
    weights = np.exp(shifted - shifted.max())
    return weights / weights.sum()


def _as_array(values, name):
    values = np.asarray(values.numpy() if hasattr(values, "numpy") else values)
    if name == "answer":
        return np.array([value.encode("utf-8") if isinstance(value, str) else bytes(value)
                         for value in values.reshape(-1)], dtype=object).reshape(values.shape)
    return values
