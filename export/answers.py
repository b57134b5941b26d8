"""Answers, not logits: what the raw-text signatures return on top of a task model's outputs.

A sequence classifier's text signatures (`serve_text`, `serve_text_pair`, `serve_examples`, and
`model_text.tflite`'s `serve_text`) also return

- `label` (tf.string `[batch]`): the name of the most probable label, from the model's
  `id2label`;
- `label_id` (int32 `[batch]`): its id (the first of equal logits, as `numpy.argmax`);
- `probabilities` (float32 `[batch, labels]`): the softmax of the logits;

and a regression model (one output) returns `score` (float32 `[batch]`), its one logit, as
`kerasbert-finetune` writes it for STS-B. The graph uses TFLite builtin ops only (Softmax,
ArgMax, Gather on a string constant).

Each is checked at export (`answer_checks`) against `kerasbert.data.glue.answers_from_logits`,
a Python decoder that does not run the graph, applied to the artifact's own logits (which are
checked against the Keras model's like every output): the names and ids must be equal.
"""

import numpy as np
import tensorflow as tf

CLASSIFICATION_ANSWERS = ("label", "label_id", "probabilities")
REGRESSION_ANSWERS = ("score",)


def answer_names(model):
    """The answer outputs the text signatures add for `model` (empty for models without an
    answer decoder here).

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> answer_names(kerasbert.models.build_task_model(config, "sequence_classification"))
    ('label', 'label_id', 'probabilities')
    >>> answer_names(kerasbert.models.build_task_model(config, "sequence_classification",
    ...                                                num_labels=1))
    ('score',)
    """
    if getattr(model, "task", None) != "sequence_classification":
        return ()
    return REGRESSION_ANSWERS if model.num_labels == 1 else CLASSIFICATION_ANSWERS


def with_answers(model, outputs):
    """`outputs` (the model's float32 outputs by name) with the answers of `answer_names`.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "sequence_classification",
    ...                                           id2label=["no", "yes"])
    >>> answers = with_answers(model, {"logits": tf.constant([[0.1, 2.0], [3.0, -1.0]])})
    >>> answers["label"].numpy().tolist(), answers["label_id"].numpy().tolist()
    ([b'yes', b'no'], [1, 0])
    """
    names = answer_names(model)
    if not names:
        return outputs
    logits = outputs["logits"]
    if names == REGRESSION_ANSWERS:
        return {**outputs, "score": logits[:, 0]}
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
    labels = tf.constant([model.id2label[index] for index in range(model.num_labels)])
    return {**outputs, "label": tf.gather(labels, label_id), "label_id": label_id,
            "probabilities": tf.nn.softmax(logits, axis=-1)}


def answer_checks(model, outputs, tolerance):
    """Checks of a text signature's answers (`outputs`: what an artifact returned, by name)
    against `kerasbert.data.glue.answers_from_logits` on the artifact's own logits: names and
    ids equal, probabilities and scores within `tolerance` (relative, as `float_difference`).
    A list of `{"output", "passed", ...}`; empty for a model without answers.

    >>> import numpy as np, kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "sequence_classification",
    ...                                           id2label=["no", "yes"])
    >>> produced = {"logits": np.array([[0.0, 1.0]]), "label": np.array([b"no"]),
    ...             "label_id": np.array([1]), "probabilities": np.array([[0.2689, 0.7311]])}
    >>> [(check["output"], check["passed"]) for check in answer_checks(model, produced, 1e-4)]
    [('label', False), ('label_id', True), ('probabilities', True)]
    """
    from kerasbert.data.glue import answers_from_logits
    from kerasbert.export.compare import float_difference

    names = answer_names(model)
    if not names:
        return []
    decoded = answers_from_logits(outputs["logits"], model.id2label)
    checks = []
    for name in names:
        expected, produced = decoded[name], np.asarray(outputs[name])
        if name == "label":
            expected = np.array([label.encode("utf-8") for label in expected], dtype=object)
            produced = np.array([bytes(label) for label in produced], dtype=object)
        if name in ("label", "label_id"):
            same = expected.shape == produced.shape and bool(np.all(expected == produced))
            differing = (int(np.sum(expected != produced)) if expected.shape == produced.shape
                         else None)
            checks.append({"output": name, "check": "answer", "differing_rows": differing,
                           "passed": same})
        else:
            result = float_difference(expected, produced)
            checks.append({"output": name, "check": "answer", **result,
                           "passed": result["max_rel"] <= tolerance})
    return checks
