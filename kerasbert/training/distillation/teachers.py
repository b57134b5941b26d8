"""Teachers for pretraining distillation: any kerasbert model with a masked-LM head, from memory
or from disk (a `.keras` file, a `kerasbert-pretrain` model directory, a Hugging Face folder)."""

import os

import keras

from kerasbert import file_system
from kerasbert.convert import from_hf
from kerasbert.json_files import read_json_file
from kerasbert.models.electra import ElectraPretrainer
from kerasbert.models.encoder import Encoder
from kerasbert.models.pretraining import PretrainingModel
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from kerasbert.training.pretrained_sources import PRETRAINED_MODEL_FILE, pretraining_run_model

_TOKENIZER_FILES = ("vocab.txt", "vocab.json", "spiece.model", "tokenizer.json")


def masked_lm_teacher(model):
    """The masked-LM model that teaches: `model` itself if it is a `PretrainingModel` with an
    `mlm` head (BERT, RoBERTa, ALBERT, ELECTRA's generator as `from_hf` imports
    `ElectraForMaskedLM`); for an `ElectraPretrainer`, a `PretrainingModel` copy of its
    generator and MLM head. Anything else is a `ValueError` naming what the model is.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("electra_small_discriminator").replace(
    ...     num_layers=1, vocab_size=50)
    >>> teacher = masked_lm_teacher(kerasbert.models.ElectraPretrainer(
    ...     config, kerasbert.models.generator_config(config)))
    >>> teacher.heads, teacher.encoder.config.hidden_size
    (('mlm',), 64)
    """
    if isinstance(model, PretrainingModel) and "mlm" in model.heads:
        return model
    if isinstance(model, ElectraPretrainer):
        generator = model.generator
        teacher = PretrainingModel(Encoder(generator.config, dtype=generator.dtype_policy),
                                   ("mlm",), mlm_activation="gelu")
        teacher.encoder.set_weights(generator.get_weights())
        teacher.head_layers["mlm"].set_weights(model.get_layer("mlm_head").get_weights())
        return teacher
    what = type(model).__name__ + (f" with heads {list(model.heads)}"
                                    if isinstance(model, PretrainingModel) else "")
    raise ValueError(f"The teacher ({what}) has no MLM head; pretraining distillation needs "
                     "one: a pretraining model with 'mlm' in its heads, an ELECTRA generator or "
                     "pretrainer, a Hugging Face *ForMaskedLM or *ForPreTraining folder")


def load_teacher(path):
    """`(masked_lm_teacher(model), tokenizer or None)` for the model at `path`: a `.keras`
    file, a `kerasbert-pretrain` (or `kerasbert-distill`) model directory (the model of its
    latest checkpoint, and the tokenizer it was trained with), or a Hugging Face folder
    (`from_hf`, and its tokenizer files if any).

    >>> import tempfile
    >>> load_teacher(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    ValueError: ...: not a teacher model: ...
    """
    path = os.fspath(path)
    tokenizer = None
    if file_system.isfile(file_system.join(path, "config.json")):
        model = from_hf(path)
        if any(file_system.isfile(file_system.join(path, name)) for name in _TOKENIZER_FILES):
            tokenizer = tokenizer_from_hf(path)
    elif path.endswith(".keras") and file_system.isfile(path):
        model = keras.saving.load_model(path)
    elif file_system.isfile(file_system.join(path, PRETRAINED_MODEL_FILE)):
        model, tokenizer = pretraining_run_model(path)
    else:
        raise ValueError(f"{path}: not a teacher model: give a .keras file, a kerasbert-pretrain "
                         f"model directory ({PRETRAINED_MODEL_FILE}) or a Hugging Face folder "
                         "(config.json)")
    try:
        return masked_lm_teacher(model), tokenizer
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def teacher_tokenizer_arguments(path):
    """The `load_tokenizer` arguments of the tokenizer that `load_teacher(path)` finds, for
    `kerasbert_model.json`, or None.

    >>> import tempfile
    >>> teacher_tokenizer_arguments(tempfile.mkdtemp()) is None
    True
    """
    path = file_system.absolute(path)
    if file_system.isfile(file_system.join(path, "config.json")):
        if any(file_system.isfile(file_system.join(path, name)) for name in _TOKENIZER_FILES):
            return {"tokenizer_dir": path}
        return None
    description = file_system.join(path, PRETRAINED_MODEL_FILE)
    if file_system.isfile(description):
        return read_json_file(description, f"a {PRETRAINED_MODEL_FILE}").get("tokenizer")
    return None
