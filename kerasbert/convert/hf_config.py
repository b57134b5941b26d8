"""Hugging Face `config.json` -> `EncoderConfig`."""

from kerasbert import file_system
from kerasbert.config import EncoderConfig
from kerasbert.json_files import JsonFileError, read_json_file

BASE_MODEL_PREFIX = {"bert": "bert", "roberta": "roberta", "albert": "albert", "electra": "electra",
                     "distilbert": "distilbert"}

# `config.json` field names of the `EncoderConfig` fields that DistilBERT names its own way
# (every other family uses BERT's names); its LayerNorm epsilon is fixed at 1e-12.
DISTILBERT_FIELDS = {"hidden_size": "dim", "num_layers": "n_layers", "num_heads": "n_heads",
                     "intermediate_size": "hidden_dim", "hidden_activation": "activation",
                     "dropout": "dropout", "attention_dropout": "attention_dropout",
                     "sinusoidal_positions": "sinusoidal_pos_embds"}
DISTILBERT_LAYER_NORM_EPSILON = 1e-12
# The field of each DistilBERT head's dropout (token classification reads `dropout`).
DISTILBERT_TASK_DROPOUT = {"sequence_classification": "seq_classif_dropout",
                           "multiple_choice": "seq_classif_dropout",
                           "question_answering": "qa_dropout"}


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
    family = hf_config.get("model_type")
    if family not in BASE_MODEL_PREFIX:
        raise HFConfigError(
            f"{source}: model_type {family!r} is not one of the supported families "
            f"{sorted(BASE_MODEL_PREFIX)}")
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise HFConfigError(
            f"{source}: position_embedding_type {position_type!r} is not supported (only 'absolute')")

    def field(name, default=None):
        if name in hf_config and hf_config[name] is not None:
            return hf_config[name]
        if default is None:
            raise HFConfigError(f"{source}: required field {name!r} is missing")
        return default

    pad_token_id = field("pad_token_id", 1 if family == "roberta" else 0)
    if family == "distilbert":
        return _distilbert_config(field, pad_token_id, source)
    values = dict(
        family=family,
        vocab_size=field("vocab_size"),
        hidden_size=field("hidden_size"),
        num_layers=field("num_hidden_layers"),
        num_heads=field("num_attention_heads"),
        intermediate_size=field("intermediate_size"),
        hidden_activation=field("hidden_act", "gelu"),
        embedding_size=hf_config.get("embedding_size") or field("hidden_size"),
        max_positions=field("max_position_embeddings", 512),
        type_vocab_size=field("type_vocab_size", 2),
        pad_token_id=pad_token_id,
        position_offset=pad_token_id + 1 if family == "roberta" else 0,
        layer_norm_epsilon=field("layer_norm_eps", 1e-12),
        dropout=field("hidden_dropout_prob", 0.1),
        attention_dropout=field("attention_probs_dropout_prob", 0.1),
        initializer_range=field("initializer_range", 0.02),
    )
    if family == "albert":
        values.update(num_hidden_groups=field("num_hidden_groups", 1),
                      inner_group_num=field("inner_group_num", 1))
    try:
        return EncoderConfig(**values)
    except ValueError as error:
        raise HFConfigError(f"{source}: {error}") from None


def _distilbert_config(field, pad_token_id, source):
    names = DISTILBERT_FIELDS
    try:
        return EncoderConfig(
            family="distilbert",
            vocab_size=field("vocab_size"),
            hidden_size=field(names["hidden_size"]),
            num_layers=field(names["num_layers"]),
            num_heads=field(names["num_heads"]),
            intermediate_size=field(names["intermediate_size"]),
            hidden_activation=field(names["hidden_activation"], "gelu"),
            max_positions=field("max_position_embeddings", 512),
            pad_token_id=pad_token_id,
            layer_norm_epsilon=DISTILBERT_LAYER_NORM_EPSILON,
            dropout=field(names["dropout"], 0.1),
            attention_dropout=field(names["attention_dropout"], 0.1),
            initializer_range=field("initializer_range", 0.02),
            sinusoidal_positions=bool(field(names["sinusoidal_positions"], False)),
        )
    except ValueError as error:
        raise HFConfigError(f"{source}: {error}") from None


def task_settings_from_hf(hf_config, task):
    """`build_task_model` arguments a `*For<Task>` config.json implies: `num_labels` and
    `id2label` (from its label map; one label is regression) and the head's `dropout`."""
    family = hf_config["model_type"]
    if family == "distilbert":
        dropout = hf_config.get(DISTILBERT_TASK_DROPOUT.get(task, "dropout"), 0.1)
    elif task == "multiple_choice" and family == "electra":
        dropout = hf_config.get("summary_last_dropout", 0.1)
    elif family == "albert":
        dropout = hf_config.get("classifier_dropout_prob")
    else:
        dropout = hf_config.get("classifier_dropout")
    if dropout is None:
        dropout = hf_config.get("hidden_dropout_prob", 0.1)
    settings = {"dropout": dropout}
    if task in ("sequence_classification", "token_classification"):
        id2label = hf_config.get("id2label") or {
            str(index): f"LABEL_{index}" for index in range(hf_config.get("num_labels", 2))}
        settings.update(num_labels=len(id2label),
                        id2label={int(index): name for index, name in id2label.items()})
    return settings
