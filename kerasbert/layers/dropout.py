"""Dropout that draws its mask with ThreeFry when the step is compiled by XLA."""

import keras
import tensorflow as tf


def scaled_keep_mask(shape, seed, rate, dtype):
    """`1 / (1 - rate)` where a float32 ThreeFry uniform draw from the int32 `seed` pair is at
    least `rate`, else 0, in `dtype`. TensorFlow's kernels have no ThreeFry: call it inside
    an XLA computation only."""
    draw = tf.random.stateless_uniform(shape, seed, alg="threefry")
    scale = tf.constant(1.0 / (1.0 - rate), dtype)
    return tf.where(draw >= rate, scale, tf.zeros_like(scale))


@keras.saving.register_keras_serializable(package="kerasbert")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` (no `noise_shape`) that is cheaper inside an XLA-compiled step.

    Same contract as Keras' layer: in training, each element is zeroed with probability `rate`
    and the others are scaled by `1 / (1 - rate)`; otherwise the inputs pass unchanged. Inside
    an XLA computation (`jit_compile=True`, TPUs) the mask is drawn by `scaled_keep_mask`:
    ThreeFry, in float32 under every dtype policy. Keras draws with the default Philox, which
    costs XLA's CPU code about twice as much (BUILD.md, fine-tuning throughput). Elsewhere
    this is Keras' layer, with its draws.

    Example:
    >>> import numpy as np
    >>> dropout = Dropout(0.5, seed=1)
    >>> out = np.asarray(dropout(np.ones((4, 1000), "float32"), training=True))
    >>> sorted(set(out.ravel().tolist()))
    [0.0, 2.0]
    >>> bool(np.all(np.asarray(dropout(np.ones((2, 3), "float32"))) == 1.0))
    True
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(rate, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if not training or self.rate == 0 or tf.__internal__.get_enclosing_xla_context() is None:
            return super().call(inputs, training=training)
        seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1), tf.int32)
        return inputs * scaled_keep_mask(tf.shape(inputs), seed, float(self.rate), inputs.dtype)

    def get_config(self):
        config = super().get_config()
        del config["noise_shape"]
        return config
