"""Small XLA computations inside a CPU bfloat16 training step, which XLA does not compile whole.

A bfloat16 step on a CPU runs without XLA (`kerasbert.bfloat16`): TensorFlow's own kernels,
the matrix products on oneDNN's bfloat16 units, but every element-wise operation as its own
pass over memory. Where a piece of such a step is all element-wise work, the optimizer's
update (clipping, weight decay, the Adam step of every variable) and the feed-forward
activation, we run that piece as one small XLA computation (an "island") and leave the
products to TensorFlow. BUILD.md's bfloat16 section has the measured effect.

Islands are made only where they were measured to help: for bfloat16 compute, on a CPU-only
machine (no GPU visible), in a step being traced by `tf.function` (never eagerly), outside
any XLA computation, under no `tf.distribute` strategy or `OneDeviceStrategy` (a mirrored
strategy's optimizer update synchronizes its replicas, which cannot happen inside a nested
computation). In a float32 step the islands were not measurably faster (the float32 step is
fastest compiled whole, `jit_compile=True`), and they change float32 rounding, so float32
steps keep their code. Everywhere else every caller runs its code as before.
"""

import tensorflow as tf

_COMPILED = {}


def makes_islands(compute_dtype):
    """Whether code traced now, computing in `compute_dtype`, should run its element-wise
    pieces as XLA islands.

    >>> makes_islands("bfloat16")  # eagerly: never
    False
    """
    return (compute_dtype == "bfloat16"
            and not tf.executing_eagerly()
            and tf.__internal__.get_enclosing_xla_context() is None
            and (not tf.distribute.has_strategy()
                 or isinstance(tf.distribute.get_strategy(), tf.distribute.OneDeviceStrategy))
            and not tf.config.list_logical_devices("GPU"))


def xla_island(function):
    """`function` compiled as one XLA computation (`tf.function(jit_compile=True)`), made once
    per function and shared.

    >>> import numpy as np
    >>> double = xla_island(lambda x: 2.0 * x)
    >>> float(double(np.float32(1.5)))
    3.0
    """
    compiled = _COMPILED.get(function)
    if compiled is None:
        compiled = _COMPILED[function] = tf.function(function, jit_compile=True)
    return compiled
