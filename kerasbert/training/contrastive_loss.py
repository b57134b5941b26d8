"""In-batch-negatives contrastive loss for embedding models (sentence-transformers'
MultipleNegativesRankingLoss)."""

import keras


@keras.saving.register_keras_serializable(package="kerasbert")
class MultipleNegativesRankingLoss(keras.losses.Loss):
    """Cross-entropy of each anchor against every candidate text in the batch.

    `y_pred` stacks the batch's columns along the batch axis: `batch` anchors,
    then their `batch` positives, then optionally `batch` hard negatives per
    extra column (`[columns * batch, dim]`, as `TextEmbeddingModel.split_batch`
    makes it); `y_true` is `range(batch)`, the position of each anchor's
    positive. Scores are `scale` times the cosine similarity (or the dot
    product with `similarity="dot"`); anchor `i` must pick candidate `i` among
    all positives and negatives. `symmetric=True` averages in the other
    direction too: each positive must pick its anchor among all anchors (one
    softmax per direction). This is sentence-transformers'
    `MultipleNegativesRankingLoss` (`directions=("query_to_doc",)`, and with
    `symmetric` `("query_to_doc", "doc_to_query")`, `partition_mode="per_direction"`).

    Example:
    >>> import numpy as np
    >>> anchors_then_positives = np.array([[1, 0], [0, 1], [1, 0.1], [0.1, 1]], "float32")
    >>> loss = MultipleNegativesRankingLoss(scale=20.0)
    >>> round(float(loss(np.arange(2), anchors_then_positives)), 6)
    0.0
    """

    def __init__(self, scale=20.0, similarity="cosine", symmetric=False,
                 name="multiple_negatives_ranking_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale!r}")
        if similarity not in ("cosine", "dot"):
            raise ValueError(f"similarity must be 'cosine' or 'dot', got {similarity!r}")
        self.scale = float(scale)
        self.similarity = similarity
        self.symmetric = bool(symmetric)

    def call(self, y_true, y_pred):
        y_true = keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int32")
        vectors = keras.ops.cast(y_pred, "float32")
        if self.similarity == "cosine":
            vectors = keras.ops.normalize(vectors, axis=-1, order=2, epsilon=1e-12)
        batch = keras.ops.shape(y_true)[0]
        anchors, candidates = vectors[:batch], vectors[batch:]
        scores = self.scale * keras.ops.matmul(anchors, keras.ops.transpose(candidates))
        positive = keras.ops.take_along_axis(scores, y_true[:, None], axis=1)[:, 0]
        normalizer = keras.ops.logsumexp(scores, axis=1)
        if self.symmetric:  # each positive against every anchor
            backward = keras.ops.transpose(scores[:, :batch])
            normalizer = (normalizer + keras.ops.logsumexp(backward, axis=1)) / 2
        return normalizer - positive

    def get_config(self):
        config = super().get_config()
        config.update(scale=self.scale, similarity=self.similarity, symmetric=self.symmetric)
        return config
