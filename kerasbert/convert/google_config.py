"""Google's original config files -> `EncoderConfig`.

BERT's `bert_config.json` and ALBERT's `albert_config.json` describe the encoder
with the same keys (`hidden_size`, `num_hidden_layers`, ...; ALBERT adds
`embedding_size`, `num_hidden_groups`, `inner_group_num`). ELECTRA's
pretraining takes hyperparameters instead (`model_size` small | base | large,
`model_hparam_overrides`, `embedding_size`, `vocab_size`,
`generator_hidden_size`, `generator_layers`), from which its code derives the
discriminator and generator sizes; an ELECTRA config may be either those
hyperparameters or a `bert_config.json`-style description of the discriminator
(plus `embedding_size`).

`hidden_act` values are read as the published Hugging Face conversions of these
checkpoints read them: `gelu` is the exact (erf) GELU for BERT and ELECTRA, and
the tanh approximation (`gelu_new`) for ALBERT, whose code computes it so.
"""

import json
import os

from kerasbert import file_system
from kerasbert.config import EncoderConfig


class GoogleCheckpointError(ValueError):
    """An original Google checkpoint or config file that is missing, unreadable or not
    importable; the message names the path (and the key or variable at fault)."""


# Google's `hidden_act` name -> kerasbert's, per family where they differ.
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "tanh": "tanh"}
_FAMILY_ACTIVATIONS = {"albert": {"gelu": "gelu_new"}}

# ALBERT config keys for variants its released models do not use, with the value that
# means "not used"; kerasbert builds only that.
_ALBERT_UNUSED_FEATURES = {"net_structure_type": 0, "down_scale_factor": 1, "gap_size": 0,
                           "num_memory_blocks": 0, "layers_to_keep": []}

# ELECTRA's `model_size` -> (hidden_size, num_hidden_layers), as its pretraining code sets them.
ELECTRA_MODEL_SIZES = {"small": (256, 12), "base": (768, 12), "large": (1024, 24)}
ELECTRA_SMALL_EMBEDDING_SIZE = 128
ELECTRA_DEFAULT_VOCAB_SIZE = 30522
ELECTRA_GENERATOR_DEFAULTS = {"generator_hidden_size": 0.25, "generator_layers": 1.0}


def read_google_config(path):
    """The parsed JSON config file at `path`."""
    path = os.fspath(path)
    if not file_system.isfile(path):
        raise GoogleCheckpointError(f"{path}: no such config file")
    try:
        with file_system.open_file(path, encoding="utf-8") as file:
            values = json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise GoogleCheckpointError(f"{path}: invalid JSON ({error})") from None
    if not isinstance(values, dict):
        raise GoogleCheckpointError(f"{path}: holds a {type(values).__name__}, not a JSON object")
    return values


def encoder_config_from_google(values, family, source="config"):
    """The `EncoderConfig` of a Google config dict (`values`) of `family`.

    For ELECTRA: the discriminator's.

    >>> config = encoder_config_from_google({"model_size": "small"}, "electra")
    >>> config.hidden_size, config.num_heads, config.intermediate_size, config.embedding_size
    (256, 4, 1024, 128)
    >>> encoder_config_from_google({"hidden_size": 8}, "bert", source="bert_config.json")
    Traceback (most recent call last):
    ...
    kerasbert.convert.google_config.GoogleCheckpointError: bert_config.json: required key ...
    """
    if family == "electra" and "model_size" in values:
        values = electra_bert_config(values, source)

    def field(name, default=None):
        value = values.get(name)
        if value is None:
            if default is None:
                raise GoogleCheckpointError(f"{source}: required key {name!r} is missing")
            return default
        return value

    activation = field("hidden_act", "gelu")
    if activation not in _ACTIVATIONS:
        raise GoogleCheckpointError(f"{source}: hidden_act {activation!r} is not supported; "
                                    f"expected one of {sorted(_ACTIVATIONS)}")
    settings = dict(
        family=family,
        vocab_size=field("vocab_size"),
        hidden_size=field("hidden_size"),
        num_layers=field("num_hidden_layers"),
        num_heads=field("num_attention_heads"),
        intermediate_size=field("intermediate_size"),
        hidden_activation=_FAMILY_ACTIVATIONS.get(family, {}).get(activation, activation),
        max_positions=field("max_position_embeddings", 512),
        type_vocab_size=field("type_vocab_size", 2),
        dropout=field("hidden_dropout_prob", 0.1),
        attention_dropout=field("attention_probs_dropout_prob", 0.1),
        initializer_range=field("initializer_range", 0.02),
    )
    if family in ("albert", "electra"):
        settings["embedding_size"] = field("embedding_size", settings["hidden_size"])
    if family == "albert":
        for name, unused in _ALBERT_UNUSED_FEATURES.items():
            if values.get(name, unused) not in (unused, None):
                raise GoogleCheckpointError(
                    f"{source}: {name}={values[name]!r} is an ALBERT variant kerasbert does not "
                    f"build (only {name}={unused!r})")
        settings.update(num_hidden_groups=field("num_hidden_groups", 1),
                        inner_group_num=field("inner_group_num", 1))
    return _encoder_config(settings, source)


def electra_bert_config(hparams, source="config"):
    """ELECTRA pretraining hyperparameters -> the `bert_config.json`-style discriminator
    description ELECTRA's code derives from them (`model_size` gives the hidden size and
    depth; heads are hidden // 64, the FFN 4 x hidden, unless `model_hparam_overrides`
    says otherwise; `embedding_size` is 128 for small models, else the hidden size).

    >>> electra_bert_config({"model_size": "base"})["num_attention_heads"]
    12
    """
    size = hparams["model_size"]
    if size not in ELECTRA_MODEL_SIZES:
        raise GoogleCheckpointError(f"{source}: model_size {size!r} is not one of "
                                    f"{sorted(ELECTRA_MODEL_SIZES)}")
    overrides = hparams.get("model_hparam_overrides") or {}
    hidden_size, num_layers = ELECTRA_MODEL_SIZES[size]
    values = {"hidden_size": hidden_size, "num_hidden_layers": num_layers,
              "vocab_size": hparams.get("vocab_size", ELECTRA_DEFAULT_VOCAB_SIZE), **overrides}
    values.update({"num_attention_heads": max(1, values["hidden_size"] // 64),
                   "intermediate_size": 4 * values["hidden_size"], **overrides})
    default_embedding = ELECTRA_SMALL_EMBEDDING_SIZE if size == "small" else None
    values["embedding_size"] = (hparams.get("embedding_size", default_embedding)
                                or values["hidden_size"])
    return values


def electra_generator_config(discriminator_config, values, checkpoint_size, source="config"):
    """ELECTRA's generator for a discriminator, as its pretraining code sizes it.

    Hidden size and depth: the fractions `generator_hidden_size` /
    `generator_layers` of the discriminator's when `values` gives them, else
    `checkpoint_size`, the `(hidden_size, num_layers)` of the checkpoint's
    generator variables, else ELECTRA's default fractions (1/4, 1). Heads are
    hidden // 64 (at least one), the FFN 4 x hidden; embeddings and everything
    else as the discriminator's.

    >>> discriminator = encoder_config_from_google({"model_size": "large"}, "electra")
    >>> config = electra_generator_config(discriminator, {"generator_hidden_size": 0.25}, None)
    >>> config.hidden_size, config.num_layers, config.num_heads, config.embedding_size
    (256, 24, 4, 1024)
    """
    hidden_fraction, layers_fraction = (values.get(name, default) for name, default in
                                        ELECTRA_GENERATOR_DEFAULTS.items())
    hidden_size, num_layers = checkpoint_size or (None, None)
    if "generator_hidden_size" in values or hidden_size is None:
        hidden_size = int(round(discriminator_config.hidden_size * hidden_fraction))
    if "generator_layers" in values or num_layers is None:
        num_layers = int(round(discriminator_config.num_layers * layers_fraction))
    return _encoder_config(
        dict(discriminator_config.to_dict(), hidden_size=hidden_size, num_layers=num_layers,
             intermediate_size=4 * hidden_size, num_heads=max(1, hidden_size // 64)), source)


def _encoder_config(settings, source):
    try:
        return EncoderConfig(**settings)
    except (TypeError, ValueError) as error:
        raise GoogleCheckpointError(f"{source}: {error}") from None
