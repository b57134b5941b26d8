"""Look up presets by name and build encoders from them."""

import difflib

from kerasbert.config import EncoderConfig
from kerasbert.models.encoder import build_encoder
from kerasbert.zoo.presets import PRESETS

_BUILD_ARGUMENTS = ("output_hidden_states", "dtype", "name")


class UnknownPresetError(ValueError, KeyError):
    """A preset name that the zoo does not have."""

    def __str__(self):
        return self.args[0]


def list_presets():
    """The names of every preset, sorted.

    Example:
    >>> "bert_base_uncased" in list_presets()
    True
    """
    return sorted(PRESETS)


def source_checkpoint(name):
    """The public checkpoint whose architecture preset `name` copies."""
    return PRESETS[_checked(name)][0]


def get_config(name, **overrides):
    """The `EncoderConfig` of preset `name`, with `overrides` of its fields. Fields derived from
    others keep following them (unlike `EncoderConfig.replace`): overriding `hidden_size` of a
    BERT preset also changes its embedding size, as the preset sets none.

    Example:
    >>> get_config("albert_base_v2").embedding_size
    128
    >>> get_config("bert_base_uncased", hidden_size=64, num_heads=2).embedding_size
    64
    """
    return EncoderConfig.from_dict({**PRESETS[_checked(name)][1], **overrides})


def build(preset, /, **overrides):
    """A randomly initialized encoder with the architecture of `preset`.

    `overrides` change `EncoderConfig` fields (e.g. `num_layers=2`) or pass
    `output_hidden_states`, `dtype` and `name` on to `build_encoder`. Fields
    derived from others keep following them: overriding `hidden_size` of a
    BERT preset also changes its embedding size, as the preset sets none.

    Example:
    >>> encoder = build("bert_tiny_uncased", num_layers=1)
    >>> encoder.config.num_layers
    1
    """
    build_arguments = {key: overrides.pop(key) for key in _BUILD_ARGUMENTS if key in overrides}
    return build_encoder(get_config(preset, **overrides), **build_arguments)


def _checked(name):
    if name in PRESETS:
        return name
    close = difflib.get_close_matches(str(name), PRESETS, n=5, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownPresetError(
        f"Unknown preset {name!r}.{hint} Available presets: {', '.join(sorted(PRESETS))}")
