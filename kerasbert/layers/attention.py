"""Multi-head self-attention with a padding mask, optionally rotary and windowed."""

import math
import warnings

import keras
from keras import ops

from kerasbert.layers.chunked_attention import query_chunked_attention
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.local_attention import local_attention, sees_a_token, window_bias
from kerasbert.layers.rotary import rotary_frequencies, rotate


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
    equal to those rows of the full output (give their `query_positions` when the layer is
    rotary or windowed).

    Options any family may switch on: `use_bias=False` (no biases in the projections);
    `fused_projection` (one `qkv` projection to queries, keys and values, in that order,
    instead of `query` / `key` / `value`); `rotary_theta` (queries and keys turned by rotary
    position embeddings of that base over the whole head); `local_window` (each position
    attends only to keys at most `local_window // 2` positions away, computed in blocks so
    that time and memory grow linearly with length); `query_chunk_size` (without a window,
    inference computes the scores that many query rows at a time, so that a long sequence's
    score matrix is never held whole; the result is the same).

    Example:
    >>> import numpy as np
    >>> attention = MultiHeadSelfAttention(num_heads=2, hidden_size=8)
    >>> x = np.random.rand(1, 3, 8).astype("float32")
    >>> mask = np.array([[1, 1, 0]], dtype="int32")
    >>> tuple(attention(x, mask).shape)
    (1, 3, 8)
    """

    def __init__(self, num_heads, hidden_size, dropout=0.0, initializer_range=0.02,
                 use_bias=True, fused_projection=False, rotary_theta=None, local_window=None,
                 query_chunk_size=None, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.use_bias = use_bias
        self.fused_projection = fused_projection
        self.rotary_theta = rotary_theta
        self.local_window = local_window
        self.query_chunk_size = query_chunk_size
        self.head_size = hidden_size // num_heads
        self.frequencies = (None if rotary_theta is None
                            else rotary_frequencies(self.head_size, rotary_theta))

        def dense(name, width=hidden_size):
            return keras.layers.Dense(
                width,
                use_bias=use_bias,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        if fused_projection:
            self.qkv = dense("qkv", 3 * hidden_size)
            self.projections = (self.qkv,)
        else:
            self.query, self.key, self.value = dense("query"), dense("key"), dense("value")
            self.projections = (self.query, self.key, self.value)
        self.output_dense = dense("output")
        self.probs_dropout = Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, inputs_shape, padding_mask_shape=None):
        for layer in self.projections:
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

    def _project(self, inputs, queries):
        """Queries (of `queries`), keys and values (of `inputs`), each `[batch, seq, hidden]`."""
        if not self.fused_projection:
            return self.query(queries), self.key(inputs), self.value(inputs)
        width = self.hidden_size
        projected = self.qkv(inputs)
        query = projected[..., :width] if queries is inputs else self.qkv(queries)[..., :width]
        return query, projected[..., width:2 * width], projected[..., 2 * width:]

    def call(self, inputs, padding_mask, queries=None, query_positions=None, training=None):
        scale = 1.0 / math.sqrt(self.head_size)
        full = queries is None
        queries = inputs if full else queries
        query, key, value = self._project(inputs, queries)
        query = self._split_heads(query * ops.cast(scale, self.compute_dtype), queries)
        key = self._split_heads(key, inputs)
        value = self._split_heads(value, inputs)
        if self.rotary_theta is not None or self.local_window:
            key_positions = ops.arange(ops.shape(inputs)[1], dtype="float32")
            if full:
                query_positions = key_positions
            elif query_positions is None:
                raise ValueError("A rotary or windowed attention layer needs `query_positions` "
                                 "with `queries`")
        if self.rotary_theta is not None:
            query = rotate(query, ops.cast(query_positions, "float32"), self.frequencies)
            key = rotate(key, key_positions, self.frequencies)

        if self.local_window and full:
            context = local_attention(
                query, key, value, padding_mask, self.local_window // 2,
                dropout=lambda probs: self.probs_dropout(probs, training=training))
            context = ops.transpose(context, (0, 2, 1, 3))
        elif self.query_chunk_size and not self.local_window and not training:
            context = query_chunked_attention(query, key, value,
                                              padding_mask_to_attention_bias(padding_mask),
                                              self.query_chunk_size)
            context = ops.transpose(context, (0, 2, 1, 3))
        else:
            context = self._full_attention(query, key, value, padding_mask, query_positions,
                                           training)
        batch, seq = ops.shape(queries)[0], ops.shape(queries)[1]
        context = ops.reshape(context, (batch, seq, self.hidden_size))
        return self.output_dense(context)

    def _full_attention(self, query, key, value, padding_mask, query_positions, training):
        """Every query row against every key (within the window when the layer has one):
        the context `[batch, queries, heads, head_size]`."""
        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        bias = padding_mask_to_attention_bias(padding_mask)
        if self.local_window:
            bias = bias + window_bias(query_positions, ops.shape(key)[2], self.local_window // 2)
        scores = ops.cast(scores, "float32") + bias
        with warnings.catch_warnings():  # Keras warns on a length-1 softmax axis: valid here
            warnings.simplefilter("ignore", UserWarning)
            probs = ops.softmax(scores, axis=-1)
        if self.local_window:  # as local_attention: no token in the window, no attention
            probs = probs * sees_a_token(bias)
        probs = ops.cast(probs, self.compute_dtype)
        probs = self.probs_dropout(probs, training=training)
        return ops.transpose(ops.matmul(probs, value), (0, 2, 1, 3))

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None, queries_shape=None,
                             query_positions_shape=None):
        return tuple(inputs_shape if queries_shape is None else queries_shape)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "hidden_size": self.hidden_size,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
            "use_bias": self.use_bias,
            "fused_projection": self.fused_projection,
            "rotary_theta": self.rotary_theta,
            "local_window": self.local_window,
            "query_chunk_size": self.query_chunk_size,
        })
        return config
