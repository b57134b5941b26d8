"""keras-hub backbone variable paths -> kerasbert variable paths, from the families' row tables.

The rows are the families' (`families.get(family).conversion.keras_hub`). A row is
`(keras_hub_layer, kerasbert_layer, kind)`; `kind` fixes the variable names on both sides and
how a keras-hub value is reshaped into kerasbert's variable (`KINDS`). keras-hub's attention
projections keep the heads as an axis of their own (`[hidden, heads, head_size]`), kerasbert's
are plain dense layers (`[hidden, heads * head_size]`): the `HEADS_*` kinds merge the head axes,
in the order keras-hub lays them out. `{n}` stands for a distinct transformer layer; ALBERT's
rows use `{group}` and `{inner}` of that layer instead.
"""

import numpy as np

from kerasbert import families
from kerasbert.convert.hf_names import encoder_modules
from kerasbert.families.conversion_tables import (DENSE, EMBEDDING, HEADS_IN, HEADS_OUT,
                                                  LAYER_NORM, OFFSET_POSITIONS)


def _unchanged(value, config):
    return value


def _merge_heads_in(value, config):
    """`[hidden, heads, head_size]` kernel or `[heads, head_size]` bias -> one output axis."""
    return value.reshape(value.shape[:-2] + (-1,))


def _merge_heads_out(value, config):
    """`[heads, head_size, hidden]` kernel -> `[heads * head_size, hidden]`."""
    return value.reshape((-1,) + value.shape[2:])


def _prepend_position_rows(value, config):
    """keras-hub's RoBERTa table numbers positions from 0; kerasbert's from `position_offset`.

    The rows below the offset are zero: row `position_offset - 1` is the
    position of padding tokens, which RoBERTa keeps at zero (the embedding's
    padding row), and the rows below it are never read.
    """
    rows = np.zeros((config.position_offset,) + value.shape[1:], dtype=value.dtype)
    return np.concatenate([rows, value], axis=0)


# kind -> ((keras-hub variable, kerasbert variable, transform(value, config)), ...)
KINDS = {
    EMBEDDING: (("embeddings", "embeddings", _unchanged),),
    LAYER_NORM: (("gamma", "gamma", _unchanged), ("beta", "beta", _unchanged)),
    DENSE: (("kernel", "kernel", _unchanged), ("bias", "bias", _unchanged)),
    HEADS_IN: (("kernel", "kernel", _merge_heads_in), ("bias", "bias", _merge_heads_in)),
    HEADS_OUT: (("kernel", "kernel", _merge_heads_out), ("bias", "bias", _unchanged)),
    OFFSET_POSITIONS: (("embeddings", "embeddings", _prepend_position_rows),),
}


def keras_hub_tables(family):
    """The `KerasHubTables` of `family` (None when keras-hub has no backbone of it)."""
    return families.get(family).conversion.keras_hub


# The families keras-hub has a backbone of.
KERAS_HUB_FAMILIES = tuple(name for name in families.NAMES if keras_hub_tables(name))


def has_pooler(family):
    """Whether keras-hub's `family` backbone has the tanh pooler (not RoBERTa's, DistilBERT's)."""
    return bool(keras_hub_tables(family).encoder.pooler)


def encoder_name_map(config):
    """`{keras_hub_variable_path: (kerasbert_variable_path, transform)}` for `config`'s encoder.

    `transform(value)` turns the keras-hub value into the kerasbert variable's layout.
    """
    names = {}
    rows = keras_hub_tables(config.family).encoder
    for their_layer, our_layer, kind in encoder_modules(rows, config):
        for their_variable, our_variable, transform in KINDS[kind]:
            names[f"{their_layer}/{their_variable}"] = (
                f"{our_layer}/{our_variable}",
                lambda value, transform=transform: transform(value, config))
    return names


def zero_filled_variables(config):
    """kerasbert variable paths of `config`'s encoder that keras-hub has no weights for."""
    return keras_hub_tables(config.family).encoder.zeros
