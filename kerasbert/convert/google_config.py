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

from kerasbert import families, file_system
from kerasbert.config import EncoderConfig
from kerasbert.convert.config_keys import read_config_keys
from kerasbert.convert.google_names import google_tables


class GoogleCheckpointError(ValueError):
    """An original Google checkpoint or config file that is missing, unreadable or not
    importable; the message names the path (and the key or variable at fault)."""


# Google's `hidden_act` names -> kerasbert's (a family's `activation_names` say where it differs).
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "tanh": "tanh"}


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
    tables = google_tables(family)
    if tables.model_sizes and "model_size" in values:
        values = electra_bert_config(values, tables.model_sizes, source)

    def missing(key):
        return GoogleCheckpointError(f"{source}: required key {key!r} is missing")

    activation = values.get("hidden_act")
    activation = "gelu" if activation is None else activation
    if activation not in _ACTIVATIONS:
        raise GoogleCheckpointError(f"{source}: hidden_act {activation!r} is not supported; "
                                    f"expected one of {sorted(_ACTIVATIONS)}")
    settings = dict(read_config_keys(values, tables.config_keys, missing), family=family,
                    hidden_activation=tables.activation_names.get(activation, activation))
    for name, unused in tables.unused_features.items():
        if values.get(name, unused) not in (unused, None):
            display_name = families.get(family).conversion.display_name
            raise GoogleCheckpointError(
                f"{source}: {name}={values[name]!r} is an {display_name} variant kerasbert does "
                f"not build (only {name}={unused!r})")
    return _encoder_config(settings, source)


def electra_bert_config(hparams, model_sizes, source="config"):
    """ELECTRA pretraining hyperparameters -> the `bert_config.json`-style discriminator
    description ELECTRA's code derives from them (`model_size` gives the hidden size and
    depth; heads are hidden // 64, the FFN 4 x hidden, unless `model_hparam_overrides`
    says otherwise; `embedding_size` is 128 for small models, else the hidden size).

    >>> from kerasbert import families
    >>> model_sizes = families.get("electra").conversion.google.model_sizes
    >>> electra_bert_config({"model_size": "base"}, model_sizes)["num_attention_heads"]
    12
    """
    size = hparams["model_size"]
    if size not in model_sizes.sizes:
        raise GoogleCheckpointError(f"{source}: model_size {size!r} is not one of "
                                    f"{sorted(model_sizes.sizes)}")
    overrides = hparams.get("model_hparam_overrides") or {}
    hidden_size, num_layers = model_sizes.sizes[size]
    values = {"hidden_size": hidden_size, "num_hidden_layers": num_layers,
              "vocab_size": hparams.get("vocab_size", model_sizes.default_vocab_size),
              **overrides}
    values.update({"num_attention_heads": max(1, values["hidden_size"] // 64),
                   "intermediate_size": 4 * values["hidden_size"], **overrides})
    default_embedding = model_sizes.small_embedding_size if size == "small" else None
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
    fractions = google_tables(discriminator_config.family).model_sizes.generator_fractions
    hidden_fraction, layers_fraction = (values.get(name, default)
                                        for name, default in fractions.items())
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
