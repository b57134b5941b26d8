"""Multi-head self-attention with a padding mask."""

import math
import warnings

import keras
from keras import ops


def padding_mask_to_attention_bias(padding_mask):
    """Additive attention bias [batch, 1, 1, seq] (float32): 0 for tokens, -1e9 for padding."""
    keep = ops.cast(padding_mask, "float32")
    return ops.expand_dims(ops.expand_dims((1.0 - keep) * -1e9, 1), 1)


@keras.saving.register_keras_serializable(package="kerasbert")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over `num_heads` heads plus the output projection.

    Padding keys get a large negative bias, so they receive zero weight. The
    softmax runs in float32 under mixed precision. With `queries`
    (`[batch, n, hidden]`, e.g. the rows of `inputs` at some positions) only
    those rows attend, to all of `inputs`: the output is `[batch, n, hidden]`,
    equal to those rows of the full output.

    Example:
    >>> import numpy as np
    >>> attention = MultiHeadSelfAttention(num_heads=2, hidden_size=8)
    >>> x = np.random.rand(1, 3, 8).astype("float32")
    >>> mask = np.array([[1, 1, 0]], dtype="int32")
    >>> tuple(attention(x, mask).shape)
    (1, 3, 8)
    """

    def __init__(self, num_heads, hidden_size, dropout=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_heads

        def dense(name):
            return keras.layers.Dense(
                hidden_size,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output")
        self.probs_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, inputs_shape, padding_mask_shape=None):
        for layer in (self.query, self.key, self.value):
            layer.build(inputs_shape)
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def _split_heads(self, x, projected_from):
        # Batch and length come from the projection's input, not its output: tf2onnx's
        # optimizer rewires a Shape of a Dense output to the flattened 2-D matmul and then
        # asks for [batch * seq, hidden, ...] (seen with tf2onnx 1.17).
        batch, seq = ops.shape(projected_from)[0], ops.shape(projected_from)[1]
        x = ops.reshape(x, (batch, seq, self.num_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, inputs, padding_mask, queries=None, training=None):
        scale = 1.0 / math.sqrt(self.head_size)
        queries = inputs if queries is None else queries
        query = self._split_heads(self.query(queries) * ops.cast(scale, self.compute_dtype),
                                  queries)
        key = self._split_heads(self.key(inputs), inputs)
        value = self._split_heads(self.value(inputs), inputs)

        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        scores = ops.cast(scores, "float32") + padding_mask_to_attention_bias(padding_mask)
        with warnings.catch_warnings():  # Keras warns on a length-1 softmax axis: valid here
            warnings.simplefilter("ignore", UserWarning)
            probs = ops.softmax(scores, axis=-1)
        probs = ops.cast(probs, self.compute_dtype)
        probs = self.probs_dropout(probs, training=training)

        context = ops.transpose(ops.matmul(probs, value), (0, 2, 1, 3))
        batch, seq = ops.shape(queries)[0], ops.shape(queries)[1]
        context = ops.reshape(context, (batch, seq, self.hidden_size))
        return self.output_dense(context)

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None, queries_shape=None):
        return tuple(inputs_shape if queries_shape is None else queries_shape)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "hidden_size": self.hidden_size,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        })
        return config
