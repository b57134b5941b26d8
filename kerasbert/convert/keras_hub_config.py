"""A keras-hub preset's backbone config -> `EncoderConfig`."""

import json

from kerasbert import families, file_system
from kerasbert.config import EncoderConfig
from kerasbert.convert.from_hf import UnsupportedArchitectureError
from kerasbert.convert.keras_hub_names import (KERAS_HUB_FAMILIES, has_pooler,
                                             keras_hub_tables)

PRESET_CONFIG_FILE = "config.json"
WEIGHTS_FILES = ("model.weights.h5", "model.weights.json")  # whole, or the index of shards

# keras-hub backbone class -> the family it is.
BACKBONE_FAMILIES = {keras_hub_tables(name).backbone_class: name for name in KERAS_HUB_FAMILIES}

# keras-hub's serialized feed-forward activations -> kerasbert `hidden_activation` names.
ACTIVATIONS = {
    "gelu": "gelu",  # keras' "gelu" is the exact (erf) GELU
    "keras_hub>gelu_approximate": "gelu_new",
    "keras_nlp>gelu_approximate": "gelu_new",
    "relu": "relu",
    "tanh": "tanh",
    "silu": "silu",
}


class KerasHubPresetError(ValueError):
    """A directory that is not a keras-hub preset kerasbert can read."""


def read_preset_config(directory):
    """`(family, path)` of the backbone saved in a keras-hub preset `directory`."""
    path = file_system.join(directory, PRESET_CONFIG_FILE)
    if not file_system.isdir(directory):
        raise KerasHubPresetError(f"keras-hub preset {directory!r} does not exist")
    if not file_system.isfile(path):
        raise KerasHubPresetError(
            f"{directory!r} is not a keras-hub preset: it has no {PRESET_CONFIG_FILE} (found "
            f"{file_system.listdir(directory)})")
    try:
        with file_system.open_file(path, encoding="utf-8") as file:
            saved = json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise KerasHubPresetError(f"{path}: invalid JSON ({error})") from None
    if isinstance(saved, dict) and "model_type" in saved:
        raise KerasHubPresetError(
            f"{path} is a Hugging Face config (model_type {saved['model_type']!r}), not a "
            "keras-hub preset: import the directory with kerasbert.convert.from_hf")
    if not (isinstance(saved, dict) and "registered_name" in saved and "class_name" in saved):
        raise KerasHubPresetError(
            f"{path} is not a keras-hub backbone config (a serialized Keras object with "
            "'class_name' and 'registered_name', as save_to_preset writes)")
    class_name = saved["class_name"]
    if class_name not in BACKBONE_FAMILIES:
        raise UnsupportedArchitectureError(
            f"{path}: keras-hub backbone class {class_name!r} is not supported; supported: "
            f"{sorted(BACKBONE_FAMILIES)}")
    if not any(file_system.isfile(file_system.join(directory, name)) for name in WEIGHTS_FILES):
        raise KerasHubPresetError(
            f"keras-hub preset {directory!r} has no weights: expected {WEIGHTS_FILES[0]} (or the "
            f"sharded {WEIGHTS_FILES[1]})")
    return BACKBONE_FAMILIES[class_name], path


def transformer_settings(backbone, source):
    """`(hidden_activation, layer_norm_epsilon)` that a keras-hub backbone's layers actually use.

    Read from the layers, not assumed from the class: every transformer
    layer must be post-LayerNorm with one activation, and every LayerNorm
    must share one epsilon, as kerasbert's encoder has.
    """
    import keras
    from keras_hub.layers import TransformerEncoder

    layers = [layer.get_config() for layer in backbone.layers
              if isinstance(layer, TransformerEncoder)]
    if not layers:
        raise KerasHubPresetError(f"{source}: the backbone has no TransformerEncoder layers")
    activations = {_activation_name(layer["activation"]) for layer in layers}
    if len(activations) != 1:
        raise KerasHubPresetError(f"{source}: the transformer layers mix activations {activations}")
    (activation,) = activations
    if activation not in ACTIVATIONS:
        raise KerasHubPresetError(
            f"{source}: activation {activation!r} has no kerasbert counterpart; supported: "
            f"{sorted(ACTIVATIONS)}")
    if any(layer.get("normalize_first") for layer in layers):
        raise KerasHubPresetError(
            f"{source}: pre-LayerNorm transformer layers (normalize_first=True) are not supported")
    epsilons = {layer["layer_norm_epsilon"] for layer in layers}
    epsilons |= {layer.epsilon for layer in backbone.layers
                 if isinstance(layer, keras.layers.LayerNormalization)}
    if len(epsilons) != 1:
        raise KerasHubPresetError(f"{source}: the LayerNorms use different epsilons {epsilons}")
    return ACTIVATIONS[activation], epsilons.pop()


def _activation_name(serialized):
    """`"gelu"` or `"keras_hub>gelu_approximate"` from what `keras.activations.serialize` wrote."""
    if isinstance(serialized, dict):
        serialized = serialized.get("config")
    return serialized


def encoder_config_from_keras_hub(family, backbone_config, hidden_activation, layer_norm_epsilon,
                                  pad_token_id=None, source=PRESET_CONFIG_FILE):
    """The `EncoderConfig` that computes what the keras-hub backbone of `backbone_config` does.

    `backbone_config` holds the keras-hub constructor arguments (a backbone's
    `get_config()`); `hidden_activation` and `layer_norm_epsilon` are what
    its layers use (`transformer_settings`). RoBERTa gets kerasbert's usual
    layout (one zero token type row, positions offset by `pad_token_id + 1`,
    see `keras_hub_names`); the pooler is kept exactly where keras-hub has
    one, ELECTRA's included. DistilBERT keeps its own layout: learned
    positions `0..seq-1`, no segment embeddings, no pooler.
    """
    conversion = families.get(family).conversion
    tables = conversion.keras_hub
    missing = sorted(key for key in tables.config_keys.values() if key not in backbone_config)
    if missing:
        raise KerasHubPresetError(f"{source}: required backbone argument(s) {missing} missing")
    values = {field: backbone_config[key] for field, key in tables.config_keys.items()}
    pad_token_id = tables.default_pad_token_id if pad_token_id is None else pad_token_id
    values.update(family=family, hidden_activation=hidden_activation,
                  layer_norm_epsilon=layer_norm_epsilon, pad_token_id=pad_token_id,
                  use_pooler=has_pooler(family), **tables.fixed_fields)
    if conversion.positions_after_padding:
        # keras-hub numbers positions from 0: kerasbert's offset needs as many more rows.
        values.update(position_offset=pad_token_id + 1,
                      max_positions=values["max_positions"] + pad_token_id + 1)
    try:
        return EncoderConfig(**values)
    except ValueError as error:
        raise KerasHubPresetError(f"{source}: {error}") from None
