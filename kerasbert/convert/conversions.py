"""Convert a model between the formats kerasbert reads and writes: what `kerasbert-convert` does.

Sources: an original Google TF1 checkpoint prefix (`from_google`), a Hugging Face folder
(`from_hf`; a sentence-transformers folder too), a keras-hub preset folder (`from_keras_hub`) or a kerasbert `.keras` file.
Targets: a Hugging Face folder (`to_hf`; a sentence-transformers folder for an embedding model)
or a `.keras` file.
"""

import keras

from kerasbert import file_system
from kerasbert.atomic_files import atomic_path
from kerasbert.convert.from_google import from_google, is_checkpoint_prefix
from kerasbert.convert.from_hf import from_hf
from kerasbert.convert.from_keras_hub import from_keras_hub
from kerasbert.convert.keras_hub_tokenizer import TOKENIZER_CONFIG_FILE
from kerasbert.convert.to_hf import to_hf
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from kerasbert.tokenizers.sentence_transformers_modules import (
    is_sentence_transformers_folder, transformer_settings)

from kerasbert.choices import CONVERT_SOURCE_FORMATS as SOURCE_FORMATS
from kerasbert.choices import CONVERT_TARGET_FORMATS as TARGET_FORMATS

_KERAS_HUB_MARKERS = ("metadata.json", "model.weights.h5")
_HF_TOKENIZER_FILES = ("vocab.txt", "vocab.json", "spiece.model", "tokenizer.json")


class ConversionError(ValueError):
    """The source cannot be read as the format asked for, or the target cannot be written."""


def source_format(path):
    """Which of `SOURCE_FORMATS` `path` is.

    >>> import tempfile
    >>> source_format(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    kerasbert.convert.conversions.ConversionError: ...: not a TF1 checkpoint prefix, ...
    """
    if path.endswith(".keras") and file_system.isfile(path):
        return "keras"
    if is_checkpoint_prefix(path):
        return "google"
    if is_sentence_transformers_folder(path):
        return "hf"
    if file_system.isfile(file_system.join(path, "config.json")):
        markers = [name for name in _KERAS_HUB_MARKERS
                   if file_system.isfile(file_system.join(path, name))]
        return "keras_hub" if markers else "hf"
    raise ConversionError(f"{path}: not a TF1 checkpoint prefix, a Hugging Face or keras-hub "
                          "folder (config.json) or a .keras file")


def load_model(path, input_format="auto", config_json=None, encoder_only=False):
    """`(model, tokenizer or None)` read from `path` in `input_format` ("auto": `source_format`)."""
    input_format = source_format(path) if input_format == "auto" else input_format
    if input_format == "google":
        return from_google(path, config_json, encoder_only=encoder_only), None
    if input_format == "hf":
        tokenizer_folder = (transformer_settings(path)[0] if is_sentence_transformers_folder(path)
                            else path)
        has_tokenizer = any(file_system.isfile(file_system.join(tokenizer_folder, name))
                            for name in _HF_TOKENIZER_FILES)
        return (from_hf(path, encoder_only=encoder_only),
                tokenizer_from_hf(path) if has_tokenizer else None)
    if input_format == "keras_hub":
        if file_system.isfile(file_system.join(path, TOKENIZER_CONFIG_FILE)):
            return from_keras_hub(path, with_tokenizer=True)
        return from_keras_hub(path), None
    if input_format == "keras":
        with file_system.local_copy(path) as local:
            model = keras.models.load_model(local)
        return (getattr(model, "encoder", model) if encoder_only else model), None
    raise ConversionError(f"unknown input format {input_format!r}; choose from "
                          f"{['auto', *SOURCE_FORMATS]}")


def convert(input_path, output_path, input_format="auto", output_format="auto",
            config_json=None, encoder_only=False, tokenizer_dir=None):
    """Read `input_path`, write `output_path` (a Hugging Face folder, or a `.keras` file when
    the name ends so or `output_format="keras"`); return the model.

    `tokenizer_dir` (a Hugging Face tokenizer folder) overrides the source's own tokenizer,
    whose files go into a Hugging Face target.
    """
    output_format = ("keras" if output_path.endswith(".keras") else "hf") \
        if output_format == "auto" else output_format
    if output_format not in TARGET_FORMATS:
        raise ConversionError(f"unknown output format {output_format!r}; choose from "
                              f"{['auto', *TARGET_FORMATS]}")
    if file_system.exists(output_path) and not (file_system.isdir(output_path)
                                                 and not file_system.listdir(output_path)):
        raise ConversionError(f"{output_path}: already exists; choose a new path")
    model, tokenizer = load_model(input_path, input_format, config_json, encoder_only)
    if tokenizer_dir is not None:
        tokenizer = tokenizer_from_hf(tokenizer_dir)
    if output_format == "hf":
        to_hf(model, output_path, tokenizer=tokenizer)
    else:
        _save_keras(model, output_path)
    return model


def _save_keras(model, path):
    """`model.save(path)` in a temporary folder beside it, the file renamed when complete."""
    with atomic_path(path, kind="convert") as temporary:
        model.save(temporary)
