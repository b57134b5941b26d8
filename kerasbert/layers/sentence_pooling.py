"""Sentence pooling: one vector per text from the encoder's token vectors and padding mask."""

import keras

from kerasbert.choices import POOLING_MODES
_SMALLEST_DIVISOR = 1e-9  # sentence-transformers' clamp on token counts and weight sums


def pooling_modes(pooling):
    """`pooling` (a mode name or a sequence of them) as a tuple of known mode names.

    >>> pooling_modes("mean"), pooling_modes(["cls", "max"])
    (('mean',), ('cls', 'max'))
    """
    modes = (pooling,) if isinstance(pooling, str) else tuple(pooling)
    unknown = [mode for mode in modes if mode not in POOLING_MODES]
    if not modes or unknown:
        raise ValueError(f"pooling must be one or more of {POOLING_MODES}, got {pooling!r}")
    return modes


@keras.saving.register_keras_serializable(package="kerasbert")
class SentencePooling(keras.layers.Layer):
    """Pools `[batch, seq, hidden]` token vectors over the unpadded tokens to `[batch, hidden]`.

    The modes are sentence-transformers' (`Pooling`), computed in float32 with
    its rules: `cls` is the first unpadded token, `max` the element-wise maximum,
    `mean` the average, `mean_sqrt_len_tokens` the sum over the square root of
    the token count, `weightedmean` the average weighted by position (1 for the
    first unpadded token, 2 for the next, ...), `lasttoken` the last unpadded
    token. Several modes concatenate in the order given.

    Example:
    >>> import numpy as np
    >>> tokens = np.array([[[1.0], [3.0], [100.0]]], "float32")
    >>> mask = np.array([[1, 1, 0]], "int32")
    >>> SentencePooling(["mean", "max", "lasttoken"])(tokens, mask).numpy().tolist()
    [[2.0, 3.0, 3.0]]
    """

    def __init__(self, modes="mean", **kwargs):
        super().__init__(**kwargs)
        self.modes = pooling_modes(modes)

    def call(self, token_vectors, padding_mask):
        token_vectors = keras.ops.cast(token_vectors, "float32")
        # (expand_dims, not [..., None]: TFLite's builtin StridedSlice takes no new axes)
        mask = keras.ops.expand_dims(keras.ops.cast(padding_mask, "float32"), -1)
        length = keras.ops.shape(token_vectors)[1]
        first = keras.ops.argmax(padding_mask, axis=1)  # the first unpadded position
        pooled = []
        for mode in self.modes:
            if mode == "cls":
                pooled.append(_take_position(token_vectors, first))
            elif mode == "max":
                pooled.append(keras.ops.max(
                    keras.ops.where(mask > 0, token_vectors, float("-inf")), axis=1))
            elif mode in ("mean", "mean_sqrt_len_tokens"):
                count = keras.ops.maximum(keras.ops.sum(mask, axis=1), _SMALLEST_DIVISOR)
                total = keras.ops.sum(token_vectors * mask, axis=1)
                pooled.append(total / (count if mode == "mean" else keras.ops.sqrt(count)))
            elif mode == "weightedmean":
                positions = keras.ops.reshape(keras.ops.arange(1, length + 1, dtype="float32"),
                                              (1, -1, 1))
                weights = mask * (positions - keras.ops.reshape(
                    keras.ops.cast(first, "float32"), (-1, 1, 1)))
                pooled.append(keras.ops.sum(token_vectors * weights, axis=1) / keras.ops.maximum(
                    keras.ops.sum(weights, axis=1), _SMALLEST_DIVISOR))
            else:  # lasttoken: the last unpadded position (position 0 of an all-padding row)
                reversed_mask = keras.ops.flip(padding_mask, axis=1)
                from_end = keras.ops.where(keras.ops.max(reversed_mask, axis=1) > 0,
                                           keras.ops.argmax(reversed_mask, axis=1), length - 1)
                pooled.append(_take_position(token_vectors * mask, length - 1 - from_end))
        return pooled[0] if len(pooled) == 1 else keras.ops.concatenate(pooled, axis=-1)

    def compute_output_shape(self, token_vectors_shape, padding_mask_shape=None):
        hidden = token_vectors_shape[-1]
        return (token_vectors_shape[0], None if hidden is None else hidden * len(self.modes))

    def get_config(self):
        config = super().get_config()
        config["modes"] = list(self.modes)
        return config


def _take_position(token_vectors, positions):
    """`token_vectors[b, positions[b], :]` for every row `b`."""
    index = keras.ops.reshape(keras.ops.cast(positions, "int32"), (-1, 1, 1))
    return keras.ops.squeeze(keras.ops.take_along_axis(token_vectors, index, axis=1), axis=1)
