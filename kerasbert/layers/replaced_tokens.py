"""ELECTRA's corruption step: sample replacements from the generator, label what changed."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class ReplacedTokenSampler(keras.layers.Layer):
    """Put tokens sampled from the generator's MLM logits at the masked positions.

    Call with `(mlm_logits [batch, predictions, vocab], token_ids [batch, seq],
    masked_lm_positions, masked_lm_ids, masked_lm_weights)` (the last three
    `[batch, predictions]`). Samples one token per real prediction from the
    softmax of the logits, without gradient through the sample. Returns
    `(corrupted_token_ids, replaced)`: the ids with the samples in place and
    int32 `[batch, seq]` labels, 1 where the token now differs from the
    original (`masked_lm_ids`), as ELECTRA's discriminator targets.

    Example:
    >>> import numpy as np
    >>> sampler = ReplacedTokenSampler(seed=1)
    >>> logits = np.full((1, 2, 6), -1e9, "float32"); logits[0, 0, 5] = 0.0; logits[0, 1, 3] = 0.0
    >>> ids, replaced = sampler(logits, np.array([[1, 4, 4, 2]]), np.array([[1, 2]]),
    ...                         np.array([[5, 4]]), np.array([[1.0, 1.0]]))
    >>> ops.convert_to_numpy(ids).tolist(), ops.convert_to_numpy(replaced).tolist()
    ([[1, 5, 3, 2]], [[0, 0, 1, 0]])
    """

    def __init__(self, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, mlm_logits, token_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
        token_ids = ops.cast(token_ids, "int32")
        positions = ops.cast(masked_lm_positions, "int32")
        original_ids = ops.cast(masked_lm_ids, "int32")
        logits = ops.stop_gradient(ops.cast(mlm_logits, "float32"))
        batch, predictions = ops.shape(positions)[0], ops.shape(positions)[1]
        flat = ops.reshape(logits, (batch * predictions, ops.shape(logits)[-1]))
        sampled = ops.reshape(keras.random.categorical(flat, 1, seed=self.seed_generator,
                                                       dtype="int32"), (batch, predictions))
        real = ops.cast(masked_lm_weights, "float32") > 0
        # Where predictions pad (weight 0) nothing changes.
        sampled = ops.where(real, sampled, ops.take_along_axis(token_ids, positions, axis=1))
        seq = ops.shape(token_ids)[1]
        at = ops.one_hot(positions, seq, dtype="int32") * ops.expand_dims(
            ops.cast(real, "int32"), -1)                        # [batch, predictions, seq]
        chosen = ops.minimum(ops.sum(at, axis=1), 1)
        corrupted = token_ids * (1 - chosen) + ops.sum(at * ops.expand_dims(sampled, -1), axis=1)
        original = token_ids * (1 - chosen) + ops.sum(at * ops.expand_dims(original_ids, -1),
                                                      axis=1)
        return corrupted, ops.cast(ops.not_equal(corrupted, original), "int32")

    def compute_output_spec(self, mlm_logits, token_ids, *labels):
        spec = keras.KerasTensor(token_ids.shape, dtype="int32")
        return spec, keras.KerasTensor(token_ids.shape, dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update({"seed": self.seed})
        return config
