"""`EncoderConfig` fields <-> a checkpoint config's keys, as a family's `ConfigKey` rows say."""

from kerasbert.families.conversion_tables import REQUIRED


def read_config_keys(values, keys, missing):
    """`{EncoderConfig field: value}` read from the config dict `values` by `keys` (`ConfigKey`
    rows, in order); `missing(key)` is raised for the first required key missing or null.
    A key missing with default None is left out (the `EncoderConfig` default then holds).

    >>> from kerasbert import families
    >>> keys = families.get("bert").conversion.hf.config_keys
    >>> values = {"vocab_size": 9, "hidden_size": 4, "num_hidden_layers": 1,
    ...           "num_attention_heads": 2, "intermediate_size": 8}
    >>> fields = read_config_keys(values, keys, KeyError)
    >>> fields["num_layers"], fields["hidden_activation"], "embedding_size" in fields
    (1, 'gelu', False)
    """
    fields = {}
    for key in keys:
        value = values.get(key.key)
        if value is None:
            if key.default == REQUIRED:
                raise missing(key.key)
            value = key.default
        if value is not None:
            fields[key.field] = value
    return fields


def write_config_keys(config, keys):
    """`{config key: value}` of `config` for the written `keys`."""
    return {key.key: getattr(config, key.field) for key in keys if key.written}
