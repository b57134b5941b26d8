"""Multiple choice: fold the choices of each example into the batch and unfold the logits."""

import keras


@keras.saving.register_keras_serializable(package="kerasbert")
class FoldChoices(keras.layers.Layer):
    """`[batch, choices, seq]` -> `[batch * choices, seq]`: every choice encoded as its own row.

    Example:
    >>> import numpy as np
    >>> tuple(FoldChoices()(np.zeros((2, 4, 7), "int32")).shape)
    (8, 7)
    """

    def call(self, inputs):
        return keras.ops.reshape(inputs, (-1, keras.ops.shape(inputs)[-1]))

    def compute_output_spec(self, inputs):
        batch, choices, seq = inputs.shape
        rows = None if batch is None or choices is None else batch * choices
        return keras.KerasTensor((rows, seq), dtype=inputs.dtype)


@keras.saving.register_keras_serializable(package="kerasbert")
class UnfoldChoiceLogits(keras.layers.Layer):
    """One logit per folded row `[batch * choices, 1]` -> `[batch, choices]`.

    Call with `(logits, token_ids)`; the `[batch, choices, seq]` token ids give the number of
    choices.

    Example:
    >>> import numpy as np
    >>> logits = np.arange(6, dtype="float32").reshape(6, 1)
    >>> UnfoldChoiceLogits()(logits, np.zeros((2, 3, 5), "int32")).numpy().tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """

    def call(self, logits, token_ids):
        return keras.ops.reshape(logits, (-1, keras.ops.shape(token_ids)[1]))

    def compute_output_shape(self, logits_shape, token_ids_shape):
        return (token_ids_shape[0], token_ids_shape[1])
