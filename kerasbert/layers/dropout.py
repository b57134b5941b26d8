"""Dropout that draws its mask with ThreeFry when the step is compiled by XLA, and in float32
under bfloat16 and float16 policies."""

import keras
import tensorflow as tf


def scaled_keep_mask(shape, seed, rate, dtype, alg="threefry"):
    """`1 / (1 - rate)` where a float32 uniform draw from the int32 `seed` pair is at least
    `rate`, else 0, in `dtype`. `alg` is the generator (`tf.random.Algorithm`'s name):
    TensorFlow's kernels have no ThreeFry, so call it with "threefry" inside an XLA
    computation only."""
    draw = tf.random.stateless_uniform(shape, seed, alg=alg)
    scale = tf.constant(1.0 / (1.0 - rate), dtype)
    return tf.where(draw >= rate, scale, tf.zeros_like(scale))


@keras.saving.register_keras_serializable(package="kerasbert")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` (no `noise_shape`) that is cheaper inside an XLA-compiled step.

    Same contract as Keras' layer: in training, each element is zeroed with probability `rate`
    and the others are scaled by `1 / (1 - rate)`; otherwise the inputs pass unchanged. Inside
    an XLA computation (`jit_compile=True`, TPUs) the mask is drawn by `scaled_keep_mask`:
    ThreeFry, in float32 under every dtype policy. Keras draws with the default Philox, which
    costs XLA's CPU code about twice as much (BUILD.md, fine-tuning throughput). Outside XLA,
    inputs of 16 bits (`mixed_bfloat16`, `mixed_float16`) get a float32 Philox draw too, and
    are scaled in float32 and rounded once: Keras' layer draws in the inputs' dtype, and a
    bfloat16 uniform draw, on a grid of 1/128, drops 13/128 = 0.1016 of the inputs at rate
    0.1. Float32 and float64 inputs outside XLA get Keras' layer, draw for draw.

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
        inside_xla = tf.__internal__.get_enclosing_xla_context() is not None
        if not training or self.rate == 0 or (not inside_xla and inputs.dtype.size >= 4):
            return super().call(inputs, training=training)
        seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1), tf.int32)
        mask = scaled_keep_mask(tf.shape(inputs), seed, float(self.rate), tf.float32,
                                alg="threefry" if inside_xla else "philox")
        if inputs.dtype == tf.float32:
            return inputs * mask
        return tf.cast(tf.cast(inputs, tf.float32) * mask, inputs.dtype)

    def get_config(self):
        config = super().get_config()
        del config["noise_shape"]
        return config
