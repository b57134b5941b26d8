"""Hugging Face parameter names -> kerasbert variable paths, from the families' row tables.

A family's rows (`families.get(family).conversion.hf`) are `(hf_module, kerasbert_layer,
kind)`; `kind` fixes the parameter names on both sides (`LINEAR`: weight/bias -> kernel
(transposed)/bias, `LAYER_NORM`: weight/bias -> gamma/beta, `EMBEDDING`: weight -> embeddings).
`{n}` stands for a distinct transformer layer; ALBERT's rows use `{group}` and `{inner}` of that
layer instead.
"""

from kerasbert import families
from kerasbert.families.conversion_tables import (EMBEDDING, LAYER_NORM, LAYER_NORM_NO_BIAS,
                                                  LINEAR, LINEAR_NO_BIAS)

PARAMETERS = {
    LINEAR: (("weight", "kernel"), ("bias", "bias")),
    LAYER_NORM: (("weight", "gamma"), ("bias", "beta")),
    EMBEDDING: (("weight", "embeddings"),),
    LINEAR_NO_BIAS: (("weight", "kernel"),),
    LAYER_NORM_NO_BIAS: (("weight", "gamma"),),
}

# Checkpoint entries that are buffers, not weights: read and deliberately dropped.
IGNORED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


def encoder_modules(rows, config):
    """The `(their_module, kerasbert_layer, kind)` rows of an encoder of `config`, from a
    family's `EncoderRows` (the layer rows repeated with `{n}` / `{group}` / `{inner}` filled,
    the projection and pooler where `config` has them); other checkpoint formats reuse it."""
    modules = list(rows.embeddings)
    if config.has_embedding_projection:
        modules += list(rows.projection)
    for n in range(config.num_distinct_layers):
        group, inner = divmod(n, config.inner_group_num)
        layer_rows = rows.layer + (rows.after_first_layer if n else ())
        modules += [(theirs.format(n=n, group=group, inner=inner), ours.format(n=n), kind)
                    for theirs, ours, kind in layer_rows]
    modules += list(rows.final)
    if config.use_pooler:
        modules += list(rows.pooler)
    return modules


def hf_tables(family):
    """The `HuggingFaceTables` of `family`."""
    return families.get(family).conversion.hf


def encoder_name_map(config):
    """`{hf_parameter_name: (kerasbert_variable_path, transpose)}` for an encoder of `config`."""
    return expand_modules(encoder_modules(hf_tables(config.family).encoder, config))


def expand_modules(modules):
    """Expand `(hf_module, kerasbert_layer, kind)` rows to parameter-level name pairs."""
    names = {}
    for hf_module, our_layer, kind in modules:
        for hf_parameter, our_variable in PARAMETERS[kind]:
            names[f"{hf_module}.{hf_parameter}"] = (
                f"{our_layer}/{our_variable}",
                kind in (LINEAR, LINEAR_NO_BIAS) and our_variable == "kernel")
    return names


def normalize_hf_name(name):
    """Map legacy parameter names (`LayerNorm.gamma`/`beta`) to the current ones."""
    if name.endswith(".gamma"):
        return name[: -len("gamma")] + "weight"
    if name.endswith(".beta"):
        return name[: -len("beta")] + "bias"
    return name


def head_name_map(family, heads):
    """`{hf_parameter_name: (kerasbert_variable_path, transpose)}` for the pretraining heads of
    a family: their rows, and the MLM output bias (a parameter of its own)."""
    tables = hf_tables(family)
    names = expand_modules([row for head in heads for row in tables.heads.get(head, ())])
    if "mlm" in heads:
        names[tables.mlm_bias] = ("mlm_head/bias", False)
    return names


def task_head_name_map(family, task):
    """`{hf_parameter_name: (kerasbert_variable_path, transpose)}` for a fine-tuning head."""
    return expand_modules(hf_tables(family).task_heads[task].rows)
