"""Pretraining heads: masked-LM (decoder tied to the token embedding), replaced-token detection."""

import keras

from kerasbert.layers.activations import get_activation


def gather_positions(sequence, positions):
    """The rows of `sequence` `[batch, seq, hidden]` at `positions` `[batch, n]` ->
    `[batch, n, hidden]`."""
    return keras.ops.take_along_axis(
        sequence, keras.ops.expand_dims(keras.ops.cast(positions, "int32"), -1), axis=1)


def _initializer(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="kerasbert")
class MaskedLMHead(keras.layers.Layer):
    """Logits over the vocabulary at chosen positions of a sequence.

    `dense -> activation -> layer_norm`, then the transpose of the token
    embedding matrix (shared with the encoder, not a copy) plus a bias per
    token: BERT's `cls.predictions`, RoBERTa's `lm_head`, ALBERT's and ELECTRA's
    generator `predictions` (whose `dense` maps to the embedding size).

    Call with `(sequence_output [batch, seq, hidden], positions [batch, predictions])`;
    returns float logits `[batch, predictions, vocab]`. Without `positions`,
    `sequence_output` holds only the rows to predict, already gathered.
    `use_bias=False`: no bias in `dense` and `layer_norm` (ModernBERT's prediction head);
    the output bias per token stays.

    Example:
    >>> import numpy as np
    >>> embedding = keras.layers.Embedding(50, 8)
    >>> embedding.build((None,))
    >>> head = MaskedLMHead(embedding, activation="gelu")
    >>> tuple(head(np.ones((2, 5, 16), "float32"), np.array([[0, 3], [1, 2]])).shape)
    (2, 2, 50)
    """

    def __init__(self, token_embedding, activation="gelu", layer_norm_epsilon=1e-12,
                 initializer_range=0.02, use_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.use_bias = use_bias
        self.activation_name = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.activation = get_activation(activation)
        self.dense = keras.layers.Dense(
            token_embedding.output_dim, use_bias=use_bias,
            kernel_initializer=_initializer(initializer_range), dtype=self.dtype_policy,
            name="dense")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, center=use_bias, dtype=self.dtype_policy,
            name="layer_norm")

    def build(self, sequence_output_shape, positions_shape=None):
        self.dense.build((None, sequence_output_shape[-1]))
        self.layer_norm.build((None, self.token_embedding.output_dim))
        self.bias = self.add_weight(name="bias", shape=(self.token_embedding.input_dim,),
                                    initializer="zeros")
        self.built = True

    def call(self, sequence_output, positions=None):
        gathered = sequence_output if positions is None else gather_positions(
            sequence_output, positions)
        hidden = self.layer_norm(self.activation(self.dense(gathered)))
        embeddings = keras.ops.cast(self.token_embedding.embeddings, hidden.dtype)
        logits = keras.ops.matmul(hidden, keras.ops.transpose(embeddings))
        return logits + keras.ops.cast(self.bias, logits.dtype)

    def compute_output_shape(self, sequence_output_shape, positions_shape=None):
        predictions = (sequence_output_shape if positions_shape is None else positions_shape)[1]
        return (sequence_output_shape[0], predictions, self.token_embedding.input_dim)

    def get_config(self):
        config = super().get_config()
        config.update({
            "token_embedding": keras.layers.serialize(self.token_embedding),
            "activation": self.activation_name,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
            "use_bias": self.use_bias,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["token_embedding"] = keras.layers.deserialize(config["token_embedding"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="kerasbert")
class ReplacedTokenHead(keras.layers.Layer):
    """ELECTRA's discriminator head: `dense -> activation -> dense(1)`, a logit per token.

    Example:
    >>> import numpy as np
    >>> head = ReplacedTokenHead(hidden_size=16)
    >>> tuple(head(np.ones((2, 5, 16), "float32")).shape)
    (2, 5)
    """

    def __init__(self, hidden_size, activation="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.activation_name = activation
        self.initializer_range = initializer_range
        self.activation = get_activation(activation)
        self.dense = keras.layers.Dense(hidden_size, kernel_initializer=_initializer(
            initializer_range), dtype=self.dtype_policy, name="dense")
        self.prediction = keras.layers.Dense(1, kernel_initializer=_initializer(initializer_range),
                                             dtype=self.dtype_policy, name="prediction")

    def build(self, sequence_shape):
        self.dense.build((None, sequence_shape[-1]))
        self.prediction.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        return keras.ops.squeeze(self.prediction(self.activation(self.dense(sequence_output))), -1)

    def compute_output_shape(self, sequence_shape):
        return tuple(sequence_shape[:2])

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_size": self.hidden_size, "activation": self.activation_name,
                       "initializer_range": self.initializer_range})
        return config
