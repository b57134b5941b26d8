"""`EncoderConfig` (and a task head's settings) -> the fields of a Hugging Face `config.json`.

The inverse of `hf_config.encoder_config_from_hf` and `hf_config.task_settings_from_hf`.
"""


from kerasbert.convert.hf_config import (DISTILBERT_FIELDS, DISTILBERT_LAYER_NORM_EPSILON,
                                         DISTILBERT_TASK_DROPOUT)


class UnsupportedModelError(ValueError):
    """A kerasbert model (or tokenizer) that no `transformers` class can express."""


def hf_config_fields(config):
    """The `config.json` fields of a `transformers` model whose encoder is `config`.

    Raises `UnsupportedModelError` naming the field for an encoder that the
    family's `transformers` model cannot be: positions numbered other than the
    family does, an embedding projection BERT and RoBERTa do not have, or a
    pooler on ELECTRA.

    >>> import kerasbert
    >>> fields = hf_config_fields(kerasbert.zoo.get_config("albert_base_v2"))
    >>> fields["model_type"], fields["embedding_size"], fields["hidden_act"]
    ('albert', 128, 'gelu_new')
    """
    family = config.family
    _check_expressible(config)
    if family == "distilbert":
        return _distilbert_fields(config)
    fields = {
        "model_type": family,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_activation,
        "max_position_embeddings": config.max_positions,
        "type_vocab_size": config.type_vocab_size,
        "pad_token_id": config.pad_token_id,
        "layer_norm_eps": config.layer_norm_epsilon,
        "hidden_dropout_prob": config.dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "initializer_range": config.initializer_range,
        # The MLM decoders are the token embedding matrix (kerasbert has no other kind).
        "tie_word_embeddings": True,
        "dtype": "float32",
    }
    if family in ("albert", "electra"):
        fields["embedding_size"] = config.embedding_size
    if family == "albert":
        fields.update(num_hidden_groups=config.num_hidden_groups,
                      inner_group_num=config.inner_group_num)
    return fields


def _distilbert_fields(config):
    names = DISTILBERT_FIELDS
    return {
        "model_type": "distilbert",
        "vocab_size": config.vocab_size,
        names["hidden_size"]: config.hidden_size,
        names["num_layers"]: config.num_layers,
        names["num_heads"]: config.num_heads,
        names["intermediate_size"]: config.intermediate_size,
        names["hidden_activation"]: config.hidden_activation,
        "max_position_embeddings": config.max_positions,
        names["sinusoidal_positions"]: config.sinusoidal_positions,
        "pad_token_id": config.pad_token_id,
        names["dropout"]: config.dropout,
        names["attention_dropout"]: config.attention_dropout,
        "initializer_range": config.initializer_range,
        "tie_word_embeddings": True,
        "dtype": "float32",
    }


def _check_expressible(config):
    family = config.family
    expected_offset = config.pad_token_id + 1 if family == "roberta" else 0
    if config.position_offset != expected_offset:
        raise UnsupportedModelError(
            f"EncoderConfig.position_offset is {config.position_offset}, but transformers' "
            f"{family} numbers positions from {expected_offset}"
            + (" (pad_token_id + 1)" if family == "roberta" else ""))
    if family in ("bert", "roberta") and config.embedding_size != config.hidden_size:
        raise UnsupportedModelError(
            f"EncoderConfig.embedding_size ({config.embedding_size}) differs from hidden_size "
            f"({config.hidden_size}), but transformers' {family} has no embedding projection")
    if family == "distilbert" and config.layer_norm_epsilon != DISTILBERT_LAYER_NORM_EPSILON:
        raise UnsupportedModelError(
            f"EncoderConfig.layer_norm_epsilon is {config.layer_norm_epsilon}, but transformers' "
            f"DistilBERT fixes it at {DISTILBERT_LAYER_NORM_EPSILON}")
    if family == "electra" and config.use_pooler:
        raise UnsupportedModelError(
            "EncoderConfig.use_pooler is True, but transformers' ELECTRA has no pooler")


def task_config_fields(family, task, id2label, is_regression, dropout):
    """The `config.json` fields of a `*For<Task>` head: its label names (`id2label`,
    `label2id`; `problem_type="regression"` for one regression output) and its dropout under
    the name the family's head reads.

    >>> fields = task_config_fields("albert", "sequence_classification", {0: "no", 1: "yes"},
    ...                             is_regression=False, dropout=0.1)
    >>> fields["classifier_dropout_prob"], fields["id2label"], fields["label2id"]
    (0.1, {'0': 'no', '1': 'yes'}, {'no': 0, 'yes': 1})
    """
    dropout_field = _head_dropout_field(family, task)
    # DistilBERT's token head reads the encoder's own `dropout`: no field of its own to write.
    fields = {} if (family, dropout_field) == ("distilbert", "dropout") else {dropout_field: dropout}
    if task == "multiple_choice" and family == "electra":
        # ELECTRA's multiple-choice summary: first token, dense, GELU (then the dropout).
        fields.update(summary_type="first", summary_use_proj=True, summary_activation="gelu")
    if id2label is not None:
        fields["id2label"] = {str(index): name for index, name in sorted(id2label.items())}
        fields["label2id"] = {name: index for index, name in sorted(id2label.items())}
        if is_regression:
            fields["problem_type"] = "regression"
    return fields


def _head_dropout_field(family, task):
    """The `config.json` field holding a fine-tuning head's dropout in `transformers`."""
    if family == "distilbert":
        return DISTILBERT_TASK_DROPOUT.get(task, "dropout")
    if task == "multiple_choice" and family == "electra":
        return "summary_last_dropout"
    return "classifier_dropout_prob" if family == "albert" else "classifier_dropout"
