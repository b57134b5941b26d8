"""`from_keras_hub`: a kerasbert encoder from a keras-hub preset saved on disk."""

import os

import numpy as np

from kerasbert import file_system
from kerasbert.convert.keras_hub_config import (KerasHubPresetError, encoder_config_from_keras_hub,
                                                read_preset_config, transformer_settings)
from kerasbert.convert.keras_hub_names import encoder_name_map, zero_filled_variables
from kerasbert.convert.keras_hub_tokenizer import tokenizer_from_keras_hub
from kerasbert.convert.weights import assign_weights, variables_by_path
from kerasbert.models.encoder import build_encoder


def from_keras_hub(preset_dir, with_tokenizer=False):
    """Import a keras-hub BERT, RoBERTa, ALBERT, ELECTRA or DistilBERT backbone.

    The backbone classes read are `BertBackbone`, `RobertaBackbone`,
    `AlbertBackbone`, `ElectraBackbone` and `DistilBertBackbone`.

    `preset_dir` is a folder (local, or a TensorFlow file-system URL such
    as `gs://...`) written by keras-hub's
    `backbone.save_to_preset(preset_dir)` (or a task's, whose backbone is
    taken): `config.json`, `model.weights.h5` and `metadata.json`, plus
    `tokenizer.json` and `assets/tokenizer/` when a tokenizer was saved too.
    The backbone is loaded with keras-hub and its variables are copied, all
    or nothing, into an `Encoder` whose outputs (`sequence_output`, and
    `pooled_output` where keras-hub has one) are keras-hub's:

    - The activation is the one keras-hub's layers apply: its BERT, ELECTRA
      and ALBERT backbones always use the tanh approximation of GELU, so the
      encoder gets `hidden_activation="gelu_new"`, although the original
      BERT and ELECTRA checkpoints were trained with the exact (erf) GELU
      that `from_hf` and the zoo presets use; RoBERTa and DistilBERT keep the
      exact `"gelu"`.
    - ELECTRA keeps keras-hub's pooler (`use_pooler=True`), which the
      original ELECTRA does not have.
    - RoBERTa gets kerasbert's usual RoBERTa layout: one token type row of
      zeros (keras-hub has no token type embedding) and positions offset
      by `pad_token_id + 1`, the rows below the offset zero. keras-hub
      numbers positions `0..seq-1` whatever the padding; kerasbert numbers
      the non-padding tokens and gives padding tokens the (zero) padding
      position. With right padding, real tokens' outputs are keras-hub's;
      the outputs at padding positions differ (neither is meaningful), and
      with left padding the real tokens' positions differ too.
    - DistilBERT keeps its own layout, as keras-hub's: learned positions,
      no segment embeddings (`segment_ids` are accepted and ignored,
      keras-hub takes none) and no pooler.

    With `with_tokenizer=True` it returns `(encoder, tokenizer)`: the kerasbert
    tokenizer equal to the preset's keras-hub tokenizer (see
    `kerasbert.convert.keras_hub_tokenizer`; `KerasHubPresetError` if the
    preset has none), whose padding token is then the encoder's
    `pad_token_id`; without it, `pad_token_id` is that of the family's
    keras-hub tokenizer (`<pad>` = 1 for RoBERTa, 0 for the others).

    Raises `KerasHubPresetError` for a folder that is not a keras-hub preset,
    `UnsupportedArchitectureError` naming the backbone class for other
    models, and `WeightMismatchError` listing every variable the tables
    cannot pair.

    Example:
    >>> import tempfile, keras_hub
    >>> backbone = keras_hub.models.BertBackbone(vocabulary_size=20, num_layers=1, num_heads=2,
    ...                                          hidden_dim=8, intermediate_dim=16,
    ...                                          max_sequence_length=8)
    >>> preset_dir = tempfile.mkdtemp()
    >>> backbone.save_to_preset(preset_dir)
    >>> encoder = from_keras_hub(preset_dir)
    >>> encoder.config.hidden_activation, sorted(encoder.output)
    ('gelu_new', ['pooled_output', 'sequence_output'])
    """
    import keras_hub

    preset_dir = os.fspath(preset_dir)
    family, config_path = read_preset_config(preset_dir)
    tokenizer = tokenizer_from_keras_hub(preset_dir) if with_tokenizer else None
    with file_system.local_copy(preset_dir) as local:  # keras-hub reads local presets
        backbone = keras_hub.models.Backbone.from_preset(local, dtype="float32")
    activation, epsilon = transformer_settings(backbone, config_path)
    config = encoder_config_from_keras_hub(
        family, backbone.get_config(), activation, epsilon,
        pad_token_id=None if tokenizer is None else tokenizer.pad_token_id, source=config_path)
    if tokenizer is not None and tokenizer.vocabulary_size() > config.vocab_size:
        raise KerasHubPresetError(
            f"keras-hub preset {preset_dir!r}: the tokenizer has {tokenizer.vocabulary_size()} "
            f"tokens, more than the backbone's {config.vocab_size} embeddings")

    encoder = build_encoder(config)
    names = encoder_name_map(config)
    state = {}
    for variable in backbone.weights:
        value = np.asarray(variable)
        state[variable.path] = names[variable.path][1](value) if variable.path in names else value
    name_map = {name: (path, False) for name, (path, _) in names.items()}
    ours = variables_by_path(encoder)
    for path in zero_filled_variables(config):
        source_name = f"(zeros: keras-hub has no {path})"
        state[source_name] = np.zeros(ours[path].shape, dtype="float32")
        name_map[source_name] = (path, False)
    assign_weights(encoder, state, name_map, source=f"keras-hub preset {preset_dir}")
    if with_tokenizer:
        return encoder, tokenizer
    return encoder
