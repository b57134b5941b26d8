"""The name tables: keras-hub backbone variable paths -> kerasbert variable paths, one per family.

A table row is `(keras_hub_layer, kerasbert_layer, kind)`; `kind` fixes the
variable names on both sides and how a keras-hub value is reshaped into
kerasbert's variable (`KINDS`). keras-hub's attention projections keep the
heads as an axis of their own (`[hidden, heads, head_size]`), kerasbert's
are plain dense layers (`[hidden, heads * head_size]`): the `HEADS_*` kinds
merge the head axes, in the order keras-hub lays them out. `{n}` stands for
a distinct transformer layer; ALBERT's rows use `{group}` and `{inner}` of
that layer instead.
"""

import numpy as np

from kerasbert.convert.hf_names import encoder_modules

EMBEDDING, LAYER_NORM, DENSE = "embedding", "layer_norm", "dense"
HEADS_IN, HEADS_OUT, OFFSET_POSITIONS = "heads_in", "heads_out", "offset_positions"


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

_EMBEDDINGS = (
    ("token_embedding", "embeddings/token_embedding", EMBEDDING),
    ("position_embedding", "embeddings/position_embedding", EMBEDDING),
    ("segment_embedding", "embeddings/segment_embedding", EMBEDDING),
    ("embeddings_layer_norm", "embeddings/layer_norm", LAYER_NORM),
)


def _transformer_layer(prefix):
    return (
        (prefix + "/self_attention_layer/query", "transformer_layer_{n}/attention/query", HEADS_IN),
        (prefix + "/self_attention_layer/key", "transformer_layer_{n}/attention/key", HEADS_IN),
        (prefix + "/self_attention_layer/value", "transformer_layer_{n}/attention/value", HEADS_IN),
        (prefix + "/self_attention_layer/attention_output",
         "transformer_layer_{n}/attention/output", HEADS_OUT),
        (prefix + "/self_attention_layer_norm", "transformer_layer_{n}/attention_layer_norm",
         LAYER_NORM),
        (prefix + "/feedforward_intermediate_dense", "transformer_layer_{n}/intermediate", DENSE),
        (prefix + "/feedforward_output_dense", "transformer_layer_{n}/output", DENSE),
        (prefix + "/feedforward_layer_norm", "transformer_layer_{n}/output_layer_norm", LAYER_NORM),
    )


_POOLER = (("pooled_dense", "pooler/dense", DENSE),)

# family -> rows of the embeddings, of one transformer layer, of the pooler; and the kerasbert
# variables keras-hub has no counterpart for, filled with zeros (RoBERTa's single token type row:
# adding zeros is what keras-hub's RoBERTa, which has no token type embedding, computes).
# DistilBERT has neither token types nor pooler on either side; keras-hub keeps its token and
# position tables in one layer.
ENCODER_TABLES = {
    "bert": {"embeddings": _EMBEDDINGS, "layer": _transformer_layer("transformer_layer_{n}"),
             "pooler": _POOLER, "zeros": ()},
    "roberta": {"embeddings": (
                    ("embeddings/token_embedding", "embeddings/token_embedding", EMBEDDING),
                    ("embeddings/position_embedding", "embeddings/position_embedding",
                     OFFSET_POSITIONS),
                    ("embeddings_layer_norm", "embeddings/layer_norm", LAYER_NORM)),
                "layer": _transformer_layer("transformer_layer_{n}"),
                "pooler": (), "zeros": ("embeddings/segment_embedding/embeddings",)},
    "albert": {"embeddings": _EMBEDDINGS + (
                   ("embedding_projection", "embeddings/projection", DENSE),),
               "layer": _transformer_layer("group_{group}_inner_layer_{inner}"),
               "pooler": _POOLER, "zeros": ()},
    "electra": {"embeddings": _EMBEDDINGS + (
                    ("embeddings_projection", "embeddings/projection", DENSE),),
                "layer": _transformer_layer("transformer_layer_{n}"),
                "pooler": _POOLER, "zeros": ()},
    "distilbert": {"embeddings": (
                       ("token_and_position_embedding/token_embedding",
                        "embeddings/token_embedding", EMBEDDING),
                       ("token_and_position_embedding/position_embedding",
                        "embeddings/position_embedding", EMBEDDING),
                       ("embeddings_layer_norm", "embeddings/layer_norm", LAYER_NORM)),
                   "layer": _transformer_layer("transformer_layer_{n}"),
                   "pooler": (), "zeros": ()},
}


def has_pooler(family):
    """Whether keras-hub's `family` backbone has the tanh pooler (not RoBERTa's, DistilBERT's)."""
    return bool(ENCODER_TABLES[family]["pooler"])


def encoder_name_map(config):
    """`{keras_hub_variable_path: (kerasbert_variable_path, transform)}` for `config`'s encoder.

    `transform(value)` turns the keras-hub value into the kerasbert variable's layout.
    """
    names = {}
    for their_layer, our_layer, kind in encoder_modules(ENCODER_TABLES[config.family], config):
        for their_variable, our_variable, transform in KINDS[kind]:
            names[f"{their_layer}/{their_variable}"] = (
                f"{our_layer}/{our_variable}",
                lambda value, transform=transform: transform(value, config))
    return names


def zero_filled_variables(config):
    """kerasbert variable paths of `config`'s encoder that keras-hub has no weights for."""
    return ENCODER_TABLES[config.family]["zeros"]
