"""Hugging Face `config.json` -> `EncoderConfig`."""

from kerasbert import families, file_system
from kerasbert.config import EncoderConfig
from kerasbert.convert.config_keys import read_config_keys
from kerasbert.json_files import JsonFileError, read_json_file

# `config.json`'s `model_type` -> the family it names.
FAMILY_OF_MODEL_TYPE = {families.get(name).conversion.hf.model_type: name
                        for name in families.NAMES}


# `classifier_pooling` values -> `TaskModel` pooling.
HF_POOLINGS = {"cls": "first_token", "mean": "mean"}


def head_pools(family, task):
    """Whether `family`'s `task` head in `transformers` pools by a config key
    (ModernBERT's `classifier_pooling` for sequence classification and multiple choice)."""
    return (families.get(family).conversion.hf.pooling_key is not None
            and task in families.get(family).model.summary_heads)


class HFConfigError(ValueError):
    """A `config.json` that kerasbert cannot map to an encoder."""


def read_hf_config(directory):
    """The parsed `config.json` of a Hugging Face model directory (local or a URL)."""
    path = file_system.join(directory, "config.json")
    if not file_system.exists(path):
        raise HFConfigError(f"{directory!r} has no config.json")
    try:
        return read_json_file(path, "a Hugging Face config")
    except JsonFileError as error:
        raise HFConfigError(str(error)) from None


def encoder_config_from_hf(hf_config, source="config.json"):
    """The `EncoderConfig` equal to a Hugging Face config dict of a supported family."""
    model_type = hf_config.get("model_type")
    if model_type not in FAMILY_OF_MODEL_TYPE:
        raise HFConfigError(
            f"{source}: model_type {model_type!r} is not one of the supported families "
            f"{sorted(FAMILY_OF_MODEL_TYPE)}")
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise HFConfigError(
            f"{source}: position_embedding_type {position_type!r} is not supported (only 'absolute')")

    def missing(key):
        return HFConfigError(f"{source}: required field {key!r} is missing")

    family = FAMILY_OF_MODEL_TYPE[model_type]
    conversion = families.get(family).conversion
    values = dict(read_config_keys(hf_config, conversion.hf.config_keys, missing),
                  family=family, **conversion.hf.fixed_fields)
    if conversion.positions_after_padding:
        values["position_offset"] = values["pad_token_id"] + 1
    try:
        if conversion.hf.read_extra_config is not None:
            values.update(conversion.hf.read_extra_config(hf_config))
        return EncoderConfig(**values)
    except ValueError as error:
        raise HFConfigError(f"{source}: {error}") from None


def head_pooling_from_hf(hf_config):
    """How a config.json's sequence-level heads pool ("first_token" or "mean", `TaskModel`'s
    names), for a family that says so by a key (ModernBERT's `classifier_pooling`, "cls"
    when absent, as in transformers); None for the other families.

    >>> head_pooling_from_hf({"model_type": "modernbert", "classifier_pooling": "mean"})
    'mean'
    """
    family = FAMILY_OF_MODEL_TYPE.get(hf_config.get("model_type"))
    key = None if family is None else families.get(family).conversion.hf.pooling_key
    if key is None:
        return None
    pooling = hf_config.get(key, "cls")
    if pooling not in HF_POOLINGS:
        raise HFConfigError(f"config.json: {key} {pooling!r} is not one of {sorted(HF_POOLINGS)}")
    return HF_POOLINGS[pooling]


def task_settings_from_hf(hf_config, task):
    """`build_task_model` arguments a `*For<Task>` config.json implies: `num_labels` and
    `id2label` (from its label map; one label is regression) and the head's `dropout`."""
    family = FAMILY_OF_MODEL_TYPE[hf_config["model_type"]]
    head = families.get(family).conversion.hf.task_heads[task]
    dropout = hf_config.get(head.dropout_key)
    if dropout is None:
        dropout = head.dropout_default
    if dropout is None:
        dropout = hf_config.get("hidden_dropout_prob", 0.1)
    settings = {"dropout": dropout}
    if head_pools(family, task):
        settings["pooling"] = head_pooling_from_hf(hf_config)
    if task in ("sequence_classification", "token_classification"):
        id2label = hf_config.get("id2label") or {
            str(index): f"LABEL_{index}" for index in range(hf_config.get("num_labels", 2))}
        settings.update(num_labels=len(id2label),
                        id2label={int(index): name for index, name in id2label.items()})
    return settings
