"""The tanh pooler over the first ([CLS]) token."""

import keras


@keras.saving.register_keras_serializable(package="kerasbert")
class Pooler(keras.layers.Layer):
    """`tanh(W h[:, 0] + b)`: BERT's summary of a sequence from its first token.

    Example:
    >>> import numpy as np
    >>> pooler = Pooler(hidden_size=8)
    >>> tuple(pooler(np.random.rand(2, 5, 8).astype("float32")).shape)
    (2, 8)
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size,
            activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, inputs_shape):
        self.dense.build((inputs_shape[0], inputs_shape[-1]))
        self.built = True

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0, :])

    def compute_output_shape(self, inputs_shape):
        return (inputs_shape[0], self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_size": self.hidden_size, "initializer_range": self.initializer_range})
        return config
