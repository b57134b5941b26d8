"""The default inference path: a compiled, shape-polymorphic function over a model."""

import tensorflow as tf

from kerasbert.bfloat16 import xla_allowed
from kerasbert.models.tasks import encoder_of


def inference_function(model, jit_compile="auto"):
    """A `tf.function` that runs `model` in inference mode on its int32 inputs.

    `jit_compile`: compile with XLA (True), or not (False); "auto": with XLA, except for a
    model computing in bfloat16 on a CPU (oneDNN's bfloat16 kernels, which XLA does not use,
    are the fast path there: `kerasbert.bfloat16`).

    `model` is an encoder, a pretraining model or a task model; every input axis is free
    (`[batch, seq]`, `[batch, choices, seq]` for multiple choice).

    The function is traced once for any batch size and sequence length (XLA
    compiles once per distinct shape) and returns the model's output dict.
    Sequence lengths beyond the model's positions fail before the compiled
    part runs (XLA would otherwise clamp the position lookup silently).
    This is the path kerasbert's latency benchmark measures.

    Example:
    >>> import numpy as np
    >>> import kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> infer = inference_function(encoder)
    >>> ids = np.ones((2, 8), dtype="int32")
    >>> out = infer({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": ids})
    >>> tuple(out["pooled_output"].shape)
    (2, 128)
    """
    signature = {name: tf.TensorSpec([None] * len(tensor.shape), tf.int32, name=name)
                 for name, tensor in model.input.items()}
    max_length = encoder_of(model).config.max_sequence_length
    if jit_compile == "auto":
        jit_compile = xla_allowed(model.dtype_policy)

    @tf.function(jit_compile=jit_compile, autograph=False)
    def compiled(inputs):
        return model(inputs, training=False)

    @tf.function(input_signature=[signature], autograph=False)
    def infer(inputs):
        length = tf.shape(inputs["token_ids"])[-1]
        check = tf.debugging.assert_less_equal(
            length, max_length,
            message=f"Sequence length exceeds the {max_length} positions of {model.name}")
        with tf.control_dependencies([check]):
            return compiled(inputs)

    return infer
