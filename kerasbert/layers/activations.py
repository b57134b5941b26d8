"""Activation functions by their Hugging Face `hidden_act` names, written with `keras.ops`."""

import math

from keras import ops

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_exact(x):
    """GELU with the error function, as BERT uses: `0.5 x (1 + erf(x / sqrt 2))`.

    Written with `erf` rather than through `tf.nn.gelu`, which lowers to an
    `Erfc` op that tf2onnx cannot convert.
    """
    return 0.5 * x * (1.0 + ops.erf(x * _SQRT_HALF))


def gelu_tanh(x):
    """The tanh approximation of GELU (`gelu_new` in Hugging Face, ALBERT's activation)."""
    return 0.5 * x * (1.0 + ops.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


_ACTIVATIONS = {
    "gelu": gelu_exact,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": ops.relu,
    "silu": ops.silu,
    "swish": ops.silu,
    "tanh": ops.tanh,
}


def get_activation(name):
    """The activation function named `name` (a `hidden_act` value)."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}") from None

ACTIVATION_NAMES = tuple(_ACTIVATIONS)
