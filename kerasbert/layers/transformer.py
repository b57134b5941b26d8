"""The transformer block: BERT's post-LayerNorm one, or a pre-LayerNorm one (ModernBERT's)."""

import keras

from kerasbert.layers.activations import get_activation
from kerasbert.layers.attention import MultiHeadSelfAttention
from kerasbert.layers.dropout import Dropout
from kerasbert.xla_islands import makes_islands, xla_island


@keras.saving.register_keras_serializable(package="kerasbert")
class TransformerLayer(keras.layers.Layer):
    """Self-attention and a feed-forward network, each followed by residual + LayerNorm.

    `x = LN(x + dropout(attention(x)))`, then
    `x = LN(x + dropout(W2 act(W1 x)))`, as in the original BERT. DistilBERT has no dropout
    on the attention output (`dropout_after_attention=False`): `x = LN(x + attention(x))`.

    With `pre_norm` (ModernBERT) each sub-block reads a normalized copy and adds to the
    unnormalized stream: `x = x + attention(LN(x))`, `x = x + FFN(LN(x))`; with
    `normalize_attention_input=False` (the first layer, whose input the embedding LayerNorm
    has just normalized) the attention reads `x` as it is. `gated_mlp`: the intermediate
    projection has twice the width, split into an input and a gate,
    `W2 (act(input) * gate)` (GeGLU with GELU). `use_bias=False`: no biases in the
    projections or the LayerNorms. `rotary_theta`, `local_window`, `fused_projection` and
    `query_chunk_size`: see `MultiHeadSelfAttention`.

    With `queries` (`[batch, n, hidden]`: rows of `inputs`, e.g. gathered at
    the positions a pretraining head reads) the block computes only those
    rows, attending to all of `inputs`; the result equals the same rows of
    the full output, for about n / seq of the feed-forward work.

    Example:
    >>> import numpy as np
    >>> block = TransformerLayer(num_heads=2, hidden_size=8, intermediate_size=16)
    >>> x = np.random.rand(2, 5, 8).astype("float32")
    >>> mask = np.ones((2, 5), dtype="int32")
    >>> tuple(block(x, mask).shape)
    (2, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        hidden_size,
        intermediate_size,
        hidden_activation="gelu",
        layer_norm_epsilon=1e-12,
        dropout=0.0,
        attention_dropout=0.0,
        initializer_range=0.02,
        dropout_after_attention=True,
        pre_norm=False,
        normalize_attention_input=True,
        gated_mlp=False,
        use_bias=True,
        fused_projection=False,
        rotary_theta=None,
        local_window=None,
        query_chunk_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_activation = hidden_activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.dropout_after_attention = dropout_after_attention
        self.pre_norm = pre_norm
        self.normalize_attention_input = normalize_attention_input
        self.gated_mlp = gated_mlp
        self.use_bias = use_bias
        self.fused_projection = fused_projection
        self.rotary_theta = rotary_theta
        self.local_window = local_window
        self.query_chunk_size = query_chunk_size
        self.activation = get_activation(hidden_activation)

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        policy = self.dtype_policy
        self.attention = MultiHeadSelfAttention(
            num_heads, hidden_size, dropout=attention_dropout,
            initializer_range=initializer_range, use_bias=use_bias,
            fused_projection=fused_projection, rotary_theta=rotary_theta,
            local_window=local_window, query_chunk_size=query_chunk_size, dtype=policy,
            name="attention")
        self.attention_output_dropout = Dropout(
            dropout if dropout_after_attention else 0.0, dtype=policy,
            name="attention_output_dropout")
        self.attention_layer_norm = None
        if normalize_attention_input or not pre_norm:
            self.attention_layer_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, center=use_bias, dtype=policy,
                name="attention_layer_norm")
        self.intermediate = keras.layers.Dense(
            intermediate_size * (2 if gated_mlp else 1), use_bias=use_bias,
            kernel_initializer=initializer, dtype=policy, name="intermediate")
        self.output_dense = keras.layers.Dense(
            hidden_size, use_bias=use_bias, kernel_initializer=initializer, dtype=policy,
            name="output")
        self.output_dropout = Dropout(dropout, dtype=policy, name="output_dropout")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, center=use_bias, dtype=policy, name="output_layer_norm")

    def build(self, inputs_shape, padding_mask_shape=None):
        inputs_shape = tuple(inputs_shape)
        self.attention.build(inputs_shape)
        if self.attention_layer_norm is not None:
            self.attention_layer_norm.build(inputs_shape)
        self.intermediate.build(inputs_shape)
        self.output_dense.build(inputs_shape[:-1] + (self.intermediate_size,))
        self.output_layer_norm.build(inputs_shape)
        self.built = True

    def call(self, inputs, padding_mask, queries=None, query_positions=None, training=None):
        if self.pre_norm:
            return self._pre_norm_call(inputs, padding_mask, queries, query_positions, training)
        queries = inputs if queries is None else queries
        attended = self.attention(inputs, padding_mask, queries=queries,
                                  query_positions=query_positions, training=training)
        attended = self.attention_output_dropout(attended, training=training)
        hidden = self.attention_layer_norm(queries + attended)
        return self.output_layer_norm(hidden + self._feed_forward(hidden, training))

    def _pre_norm_call(self, inputs, padding_mask, queries, query_positions, training):
        norm = self.attention_layer_norm or (lambda x: x)
        attended = self.attention(
            norm(inputs), padding_mask, queries=None if queries is None else norm(queries),
            query_positions=query_positions, training=training)
        hidden = (inputs if queries is None else queries) + self.attention_output_dropout(
            attended, training=training)
        return hidden + self._feed_forward(self.output_layer_norm(hidden), training)

    def _feed_forward(self, hidden, training):
        intermediate = self.intermediate(hidden)
        # In a CPU bfloat16 training step, the activation's element-wise passes (and their
        # gradients') run as one XLA computation (kerasbert.xla_islands).
        activation = (xla_island(self.activation)
                      if training and makes_islands(self.compute_dtype) else self.activation)
        if self.gated_mlp:
            width = self.intermediate_size
            intermediate = activation(intermediate[..., :width]) * intermediate[..., width:]
        else:
            intermediate = activation(intermediate)
        return self.output_dropout(self.output_dense(intermediate), training=training)

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None, queries_shape=None,
                             query_positions_shape=None):
        return tuple(inputs_shape if queries_shape is None else queries_shape)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "hidden_activation": self.hidden_activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
            "dropout_after_attention": self.dropout_after_attention,
            "pre_norm": self.pre_norm,
            "normalize_attention_input": self.normalize_attention_input,
            "gated_mlp": self.gated_mlp,
            "use_bias": self.use_bias,
            "fused_projection": self.fused_projection,
            "rotary_theta": self.rotary_theta,
            "local_window": self.local_window,
            "query_chunk_size": self.query_chunk_size,
        })
        return config
