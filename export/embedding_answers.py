"""A text embedding model's answer signature: `serve_embedding(text)`, raw text in, the
model's `embedding` out (normalized when the model normalizes), tokenized and packed in the
graph as one text each (truncated to `max_seq_length`, each batch padded to the bucket of its
longest text, `kerasbert.export.padding_buckets`). `reference_embeddings` computes the same
vectors in Python, padding to the longest text instead, and `embedding_checks` compares them.
"""

import numpy as np
import tensorflow as tf

from kerasbert.export.padding_buckets import cut_to_bucket

EMBEDDING_ANSWERS = ("embedding",)
# The smallest cosine similarity a float artifact's vector may have to the Keras model's.
FLOAT_MIN_COSINE = 0.9999


def embedding_function(model, tokenizer, settings, length_buckets=True):
    """`serve_embedding(text)`: a `tf.function` from tf.string `[batch]` to `{"embedding":
    float32 [batch, dim]}`.

    >>> import kerasbert
    >>> from kerasbert.data import demo
    >>> from kerasbert.export.answer_settings import AnswerSettings
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "text_embedding", normalize=True)
    >>> tokenizer = kerasbert.zoo.build_tokenizer("bert_tiny_uncased",
    ...                                           demo.vocabulary_dir("wordpiece"))
    >>> serve = embedding_function(model, tokenizer, AnswerSettings(max_seq_length=32))
    >>> vectors = serve(tf.constant(["a small cat", ""]))["embedding"].numpy()
    >>> vectors.shape, np.round(np.linalg.norm(vectors, axis=1), 4).tolist()
    ((2, 128), [1.0, 1.0])
    """
    max_seq_length = settings.max_seq_length

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve_embedding(text):
        packed = tokenizer(text, max_length=max_seq_length, padding="max_length")
        if length_buckets:
            packed = cut_to_bucket(packed, max_seq_length)
        outputs = model({name: packed[name] for name in model.input}, training=False)
        return {"embedding": tf.cast(outputs["embedding"], tf.float32)}

    return serve_embedding


def reference_embeddings(model, tokenizer, settings, texts):
    """`model`'s embeddings of `texts` computed eagerly, each batch padded to its longest
    text: `[len(texts), dim]` float32."""
    packed = tokenizer(tf.constant(texts), max_length=settings.max_seq_length, padding="longest")
    return np.asarray(model(packed, training=False)["embedding"], np.float32)


def embedding_checks(produced, expected, tolerance):
    """Checks of `serve_embedding`'s `embedding` (`produced["embedding"]`) against
    `reference_embeddings` (`expected`): the smallest cosine similarity of a row to its
    reference at least `FLOAT_MIN_COSINE`, and the largest difference within `tolerance`
    (relative, as `kerasbert.export.compare.float_difference`).

    >>> reference = np.array([[1.0, 0.0], [0.6, 0.8]])
    >>> [check["passed"] for check in embedding_checks(
    ...     {"embedding": reference + 1e-6}, reference, 1e-4)]
    [True]
    >>> embedding_checks({"embedding": reference[::-1]}, reference, 1e-4)[0]["min_cosine"]
    0.6
    """
    from kerasbert.export.compare import float_difference

    got = np.asarray(produced["embedding"], np.float64)
    want = np.asarray(expected, np.float64)
    difference = float_difference(want, got)
    if got.shape != want.shape:
        return [{"output": "embedding", "check": "answer", "passed": False, **difference}]
    norms = np.maximum(np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1), 1e-12)
    min_cosine = round(float(np.min(np.sum(got * want, axis=1) / norms)), 10)
    return [{"output": "embedding", "check": "answer", "min_cosine": min_cosine,
             "passed": bool(min_cosine >= FLOAT_MIN_COSINE and
                            difference["max_rel"] <= tolerance), **difference}]
