"""`EncoderConfig` (and a task head's settings) -> the fields of a Hugging Face `config.json`.

The inverse of `hf_config.encoder_config_from_hf` and `hf_config.task_settings_from_hf`.
"""

from kerasbert import families
from kerasbert.convert.config_keys import write_config_keys
from kerasbert.convert.hf_config import HF_POOLINGS, head_pools


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
    _check_expressible(config)
    hf = families.get(config.family).conversion.hf
    return {
        "model_type": hf.model_type,
        **write_config_keys(config, hf.config_keys),
        **(hf.write_extra_config(config) if hf.write_extra_config else {}),
        # The MLM decoders are the token embedding matrix (kerasbert has no other kind).
        "tie_word_embeddings": True,
        "dtype": "float32",
    }


def _check_expressible(config):
    family = config.family
    conversion = families.get(family).conversion
    hf = conversion.hf
    expected_offset = config.pad_token_id + 1 if conversion.positions_after_padding else 0
    if config.position_offset != expected_offset:
        raise UnsupportedModelError(
            f"EncoderConfig.position_offset is {config.position_offset}, but transformers' "
            f"{family} numbers positions from {expected_offset}"
            + (" (pad_token_id + 1)" if conversion.positions_after_padding else ""))
    if not hf.encoder.projection and config.embedding_size != config.hidden_size:
        raise UnsupportedModelError(
            f"EncoderConfig.embedding_size ({config.embedding_size}) differs from hidden_size "
            f"({config.hidden_size}), but transformers' {family} has no embedding projection")
    for field, value in hf.fixed_fields.items():
        if getattr(config, field) != value:
            raise UnsupportedModelError(
                f"EncoderConfig.{field} is {getattr(config, field)}, but transformers' "
                f"{conversion.display_name} fixes it at {value}")
    if not hf.encoder.pooler and config.use_pooler:
        raise UnsupportedModelError(
            f"EncoderConfig.use_pooler is True, but transformers' {conversion.display_name} has "
            "no pooler")


def task_config_fields(family, task, id2label, is_regression, dropout, pooling="first_token"):
    """The `config.json` fields of a `*For<Task>` head: its label names (`id2label`,
    `label2id`; `problem_type="regression"` for one regression output) and its dropout under
    the name the family's head reads.

    >>> fields = task_config_fields("albert", "sequence_classification", {0: "no", 1: "yes"},
    ...                             is_regression=False, dropout=0.1)
    >>> fields["classifier_dropout_prob"], fields["id2label"], fields["label2id"]
    (0.1, {'0': 'no', '1': 'yes'}, {'no': 0, 'yes': 1})
    """
    hf = families.get(family).conversion.hf
    head = hf.task_heads[task]
    # A head reading one of the encoder's own keys (DistilBERT's token head reads `dropout`)
    # has no field of its own to write.
    encoder_keys = {key.key for key in hf.config_keys}
    fields = {} if head.dropout_key in encoder_keys else {head.dropout_key: dropout}
    fields.update(head.extra_fields)
    if head_pools(family, task):
        fields[hf.pooling_key] = {ours: theirs for theirs, ours in HF_POOLINGS.items()}[pooling]
    elif pooling != "first_token":
        raise UnsupportedModelError(f"transformers' {family} {task} head has no {pooling!r} "
                                    "pooling")
    if id2label is not None:
        fields["id2label"] = {str(index): name for index, name in sorted(id2label.items())}
        fields["label2id"] = {name: index for index, name in sorted(id2label.items())}
        if is_regression:
            fields["problem_type"] = "regression"
    return fields
