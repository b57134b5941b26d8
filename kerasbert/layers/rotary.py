"""Rotary position embeddings (RoFormer, ModernBERT): queries and keys turned by position."""

import numpy as np
from keras import ops


def rotary_frequencies(head_size, theta):
    """The `head_size / 2` rotation speeds `1 / theta ** (2i / head_size)`, float32, rounded
    as PyTorch rounds them (the exponent in float32, the power in float64, then float32), so
    that angles at position 8,191 agree with `transformers` to the last bit.

    >>> rotary_frequencies(4, 10000.0)
    array([1.  , 0.01], dtype=float32)
    """
    if head_size % 2:
        raise ValueError(f"rotary positions need an even head size, got {head_size}")
    exponents = np.arange(0, head_size, 2, dtype=np.float32) / np.float32(head_size)
    return np.float32(1.0) / np.power(np.float64(theta), exponents.astype(np.float64)).astype(
        np.float32)


def rotate(x, positions, frequencies):
    """`x` (`[batch, heads, seq, head_size]`) turned by the angles `positions * frequencies`:
    each half-pair `(x1, x2)` of the head becomes `(x1 cos - x2 sin, x2 cos + x1 sin)`, computed
    in float32. `positions`: float32 `[seq]` or `[batch, seq]`.

    >>> import numpy as np
    >>> x = np.ones((1, 1, 2, 4), "float32")
    >>> turned = rotate(x, np.array([0.0, 1.0], "float32"), rotary_frequencies(4, 10000.0))
    >>> bool(np.allclose(np.asarray(turned)[0, 0, 0], 1.0))
    True
    """
    dtype = x.dtype
    angles = ops.expand_dims(positions, -1) * ops.convert_to_tensor(frequencies)
    angles = ops.concatenate([angles, angles], axis=-1)
    if len(angles.shape) == 2:  # (expand_dims: TFLite's builtin StridedSlice adds no axes)
        angles = ops.expand_dims(angles, 0)
    angles = ops.expand_dims(angles, 1)
    x = ops.cast(x, "float32")
    half = x.shape[-1] // 2
    rotated = ops.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return ops.cast(x * ops.cos(angles) + rotated * ops.sin(angles), dtype)
