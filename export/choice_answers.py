"""`serve_choices(context, choices)`: a multiple-choice model's answer to raw text.

Each (context, choice) pair is packed as `kerasbert-finetune` packs SWAG's (the context first,
the choice second, `longest_first` truncation to `max_seq_length`), the batch padded to the
bucket of its longest pair (`kerasbert.export.padding_buckets`). Outputs:

- `logits` (float32 `[batch, choices]`): the model's;
- `choice` (int32 `[batch]`): the index of the most probable choice (the first of equal logits,
  as `numpy.argmax`, which `kerasbert-finetune` writes into SWAG's `dev_predictions.tsv`);
- `probabilities` (float32 `[batch, choices]`): the softmax of the logits.

`choices` is tf.string `[batch, choices]`: every context has the same number of choices.
"""

import numpy as np
import tensorflow as tf

from kerasbert.export.padding_buckets import cut_to_bucket

CHOICE_ANSWERS = ("choice", "probabilities")


def choices_function(model, tokenizer, settings, length_buckets=True):
    """A `tf.function` `(context [batch], choices [batch, choices]) -> {logits, choice,
    probabilities}` running `tokenizer` then the multiple-choice `model`.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "multiple_choice")
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> serve = choices_function(model, tokenizer, AnswerSettings(max_seq_length=32))
    >>> answers = serve(tf.constant(["He sits down."]),
    ...                 tf.constant([["He eats.", "He flies.", "He sings."]]))
    >>> answers["probabilities"].shape.as_list(), answers["choice"].dtype.name
    ([1, 3], 'int32')
    """
    max_seq_length = settings.max_seq_length

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="context"),
                                  tf.TensorSpec([None, None], tf.string, name="choices")])
    def serve_choices(context, choices):
        shape = tf.shape(choices)
        contexts = tf.reshape(tf.repeat(context[:, tf.newaxis], shape[1], axis=1), [-1])
        packed = tokenizer(contexts, tf.reshape(choices, [-1]), max_length=max_seq_length,
                           truncation="longest_first", padding="max_length")
        if length_buckets:
            packed = cut_to_bucket(packed, max_seq_length)
        inputs = {name: tf.reshape(packed[name], [shape[0], shape[1], -1])
                  for name in model.input}
        logits = tf.cast(model(inputs, training=False)["logits"], tf.float32)
        return {"logits": logits,
                "choice": tf.argmax(logits, axis=-1, output_type=tf.int32),
                "probabilities": tf.nn.softmax(logits, axis=-1)}

    return serve_choices


def reference_choices(model, tokenizer, settings, contexts, choices):
    """`{logits, choice, probabilities}` of each context's choices without the graph above: the
    pairs packed at `max_seq_length` by the tokenizer alone, the Keras model, numpy's argmax
    and softmax.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "multiple_choice")
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> reference = reference_choices(model, tokenizer, AnswerSettings(max_seq_length=32),
    ...                               ["He sits down."], [["He eats.", "He flies."]])
    >>> reference["probabilities"].shape, float(reference["probabilities"].sum())
    ((1, 2), 1.0)
    """
    count = len(choices[0])
    if any(len(row) != count for row in choices) or len(choices) != len(contexts):
        raise ValueError("every context needs the same number of choices")
    packed = tokenizer([context for context in contexts for _ in range(count)],
                       [choice for row in choices for choice in row],
                       max_length=settings.max_seq_length, truncation="longest_first")
    inputs = {name: np.asarray(packed[name]).reshape(len(contexts), count, -1)
              for name in model.input}
    logits = np.asarray(model(inputs, training=False)["logits"], np.float64)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return {"logits": logits.astype(np.float32), "choice": np.argmax(logits, axis=-1),
            "probabilities": (shifted / shifted.sum(axis=-1, keepdims=True)).astype(np.float32)}


def choice_checks(produced, reference, tolerance):
    """Checks of `serve_choices`' outputs (`produced`, numpy by name) against
    `reference_choices`: the logits within `tolerance` (relative, as `float_difference`), and the
    answers what numpy makes of the artifact's own logits (the choice equal, the probabilities
    within `tolerance`). A list of `{"output", "check", "passed", ...}`.

    >>> reference = {"logits": np.array([[0.0, 1.0]])}
    >>> produced = {"logits": np.array([[0.0, 1.0]]), "choice": np.array([0]),
    ...             "probabilities": np.array([[0.2689, 0.7311]])}
    >>> [(check["output"], check["passed"]) for check in choice_checks(produced, reference, 1e-4)]
    [('logits', True), ('choice', False), ('probabilities', True)]
    """
    from kerasbert.export.compare import float_difference

    logits = np.asarray(produced["logits"], np.float64)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    checks = []
    for name, expected, check in (
            ("logits", reference["logits"], "reference"),
            ("choice", np.argmax(logits, axis=-1), "answer"),
            ("probabilities", shifted / shifted.sum(axis=-1, keepdims=True), "answer")):
        value = np.asarray(produced[name])
        if name == "choice":
            same = value.shape == expected.shape and bool(np.all(value == expected))
            checks.append({"output": name, "check": check, "passed": same})
            continue
        result = float_difference(np.asarray(expected), value)
        checks.append({"output": name, "check": check, **result,
                       "passed": result["max_rel"] <= tolerance})
    return checks
