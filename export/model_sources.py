"""What `export` accepts as its model: a Keras model, a `.keras` file, a `kerasbert-pretrain` or
`kerasbert-finetune` directory, a Hugging Face folder or an original Google TF1 checkpoint
prefix, and the tokenizer that goes with it; paths may be local or TensorFlow file-system URLs
(see `kerasbert.file_system`)."""

import os

import keras

from kerasbert import file_system
from kerasbert.export.errors import ExportError
from kerasbert.convert import from_google, from_hf
from kerasbert.convert.from_google import is_checkpoint_prefix
from kerasbert.models.electra import ElectraPretrainer
from kerasbert.models.pretraining import PretrainingModel
from kerasbert.tokenizers import Tokenizer
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from kerasbert.training.finetune import MODEL_FILE
from kerasbert.training.pretrained_sources import PRETRAINED_MODEL_FILE, pretraining_run_model

_HF_TOKENIZER_FILES = ("vocab.txt", "vocab.json", "spiece.model", "tokenizer.json")


def load_export_model(model_or_path, tokenizer=None):
    """`(model, tokenizer)` to export from `model_or_path`.

    `tokenizer` (a kerasbert `Tokenizer` or a Hugging Face tokenizer folder)
    overrides the one found with the model: a Hugging Face folder's tokenizer
    files or the tokenizer a `kerasbert-pretrain` run was trained with. An
    ELECTRA pretrainer exports its discriminator with the replaced-token head
    (what `ElectraForPreTraining` is); its generator samples at random.

    >>> import kerasbert
    >>> model, tokenizer = load_export_model(kerasbert.zoo.build("bert_tiny_uncased", num_layers=1))
    >>> sorted(model.output), tokenizer
    (['pooled_output', 'sequence_output'], None)
    """
    found_tokenizer = None
    if isinstance(model_or_path, keras.Model):
        model = model_or_path
    else:
        model, found_tokenizer = _load_path(os.fspath(model_or_path))
    if isinstance(model, ElectraPretrainer):
        model = discriminator_model(model)
    if tokenizer is not None:
        found_tokenizer = _tokenizer(tokenizer)
    return float32_model(model), found_tokenizer


def float32_model(model):
    """`model` itself when it computes in float32, else the same model rebuilt under the
    float32 dtype policy with its weights (a `mixed_bfloat16` or `mixed_float16` model keeps
    float32 master weights, so nothing is rounded). The exports are float32 graphs: the TFLite
    converter has no kernels for a bfloat16 graph's operations, and fp16 / int8 come from the
    converter's own quantization.

    >>> import keras, kerasbert
    >>> keras.config.set_dtype_policy("mixed_bfloat16")
    >>> mixed = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> keras.config.set_dtype_policy("float32")
    >>> rebuilt = float32_model(mixed)
    >>> mixed.compute_dtype, rebuilt.compute_dtype
    ('bfloat16', 'float32')
    """
    if all(layer.dtype_policy.name == "float32" for layer in [model, *model.layers]):
        return model
    config = _float32_config(keras.saving.serialize_keras_object(model))
    rebuilt = keras.saving.deserialize_keras_object(config)
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def _float32_config(config):
    """A serialized Keras object with every dtype policy in it made "float32"."""
    if isinstance(config, list):
        return [_float32_config(value) for value in config]
    if not isinstance(config, dict):
        return config
    if config.get("class_name") in ("DTypePolicy", "FloatDTypePolicy"):
        return {**config, "config": {**config["config"], "name": "float32"}}
    return {key: _float32_config(value) for key, value in config.items()}


def discriminator_model(pretrainer):
    """The discriminator of an `ElectraPretrainer` with its replaced-token head, sharing weights.

    >>> import kerasbert
    >>> from kerasbert.models import ElectraPretrainer, generator_config
    >>> config = kerasbert.zoo.get_config("electra_small_discriminator").replace(num_layers=1)
    >>> model = discriminator_model(ElectraPretrainer(config, generator_config(config)))
    >>> sorted(model.output)
    ['rtd_logits']
    """
    model = PretrainingModel(pretrainer.discriminator, heads=("rtd",), name="electra_discriminator")
    model.head_layers["rtd"].set_weights(pretrainer.get_layer("rtd_head").get_weights())
    return model


def _load_path(path):
    if is_checkpoint_prefix(path):  # Google's TF1 checkpoint, its config file beside it
        return from_google(path), None
    if not file_system.exists(path):
        raise ExportError(f"{path}: no such model file or directory")
    if not file_system.isdir(path):
        if not path.endswith(".keras"):
            raise ExportError(f"{path}: not a .keras file, a kerasbert-pretrain or "
                              "kerasbert-finetune directory or a Hugging Face folder")
        return _load_keras(path), None
    if file_system.isfile(file_system.join(path, "config.json")):
        tokenizer = None
        if any(file_system.isfile(file_system.join(path, name)) for name in _HF_TOKENIZER_FILES):
            tokenizer = tokenizer_from_hf(path)
        return from_hf(path), tokenizer
    if file_system.isfile(file_system.join(path, PRETRAINED_MODEL_FILE)):
        return pretraining_run_model(path)
    if file_system.isfile(file_system.join(path, MODEL_FILE)):
        return _load_keras(file_system.join(path, MODEL_FILE)), None
    raise ExportError(f"{path}: a directory with neither {MODEL_FILE} (kerasbert-finetune), "
                      f"{PRETRAINED_MODEL_FILE} (kerasbert-pretrain) nor config.json "
                      "(Hugging Face)")


def _load_keras(path):
    try:
        with file_system.local_copy(path) as local:
            return keras.models.load_model(local)
    except (ValueError, OSError, TypeError) as error:
        raise ExportError(f"{path}: cannot load this .keras file ({error})") from None


def _tokenizer(tokenizer):
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    path = os.fspath(tokenizer)
    if not file_system.isdir(path):
        raise ExportError(f"tokenizer {path}: not a kerasbert Tokenizer or a Hugging Face "
                          "tokenizer folder")
    return tokenizer_from_hf(path)
