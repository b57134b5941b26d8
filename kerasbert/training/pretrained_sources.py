"""Where fine-tuning starts: a Hugging Face folder, a `.keras` model, a `kerasbert-pretrain` run or
an original Google TF1 checkpoint.

`pretrained_source(path)` tells which it is and gives a factory of fresh encoders with the
pretrained weights (each fine-tuning seed starts from them again) and, where the source has
one, its tokenizer.
"""

import dataclasses
import os
from typing import Callable, Optional

import keras
import tensorflow as tf

from kerasbert import file_system
from kerasbert.config import EncoderConfig
from kerasbert.convert import from_google, from_hf
from kerasbert.convert.from_google import config_beside, is_checkpoint_prefix
from kerasbert.convert.hf_config import head_pooling_from_hf, read_hf_config
from kerasbert.convert.sentence_transformers_folder import read_sentence_transformers_folder
from kerasbert.json_files import read_json_file
from kerasbert.models.electra import ElectraPretrainer, generator_config
from kerasbert.models.encoder import build_encoder
from kerasbert.models.pretraining import PretrainingModel
from kerasbert.models.tasks import encoder_of
from kerasbert.op_errors import op_error_message
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from kerasbert.tokenizers.sentence_transformers_modules import is_sentence_transformers_folder
from kerasbert.tokenizers.vocabulary_files import load_tokenizer
from kerasbert.training.loop import model_variables

# What `kerasbert-pretrain` writes into its model directory to describe the model it trains.
PRETRAINED_MODEL_FILE = "kerasbert_model.json"
_TOKENIZER_FILES = ("vocab.txt", "vocab.json", "spiece.model", "tokenizer.json")


class PretrainedSourceError(ValueError):
    """A path that is none of the sources fine-tuning can start from, or a broken one."""


@dataclasses.dataclass
class PretrainedSource:
    """A pretrained model on disk: `make_encoder()` builds a new encoder with its weights (call
    it under a `tf.distribute` strategy's scope); `tokenizer` is its tokenizer, or None;
    `embedding_head`: a sentence-transformers model's `pooling` and `normalize`, or None;
    `head_pooling`: how a Hugging Face config.json says sequence-level heads pool
    (ModernBERT's `classifier_pooling` as "first_token" or "mean"), or None.

    >>> import kerasbert
    >>> source = PretrainedSource("keras", lambda: kerasbert.zoo.build("bert_tiny_uncased"), None)
    >>> source.make_encoder().config.hidden_size
    128
    """

    kind: str
    make_encoder: Callable
    tokenizer: Optional[keras.layers.Layer]
    embedding_head: Optional[dict] = None
    head_pooling: Optional[str] = None


def pretrained_source(path):
    """The `PretrainedSource` at `path`.

    - a sentence-transformers folder (`modules.json`): its Transformer module's
      encoder and tokenizer, and its pooling and normalization (a model with
      Dense modules or several pooling modes is refused);
    - a folder with `config.json` (Hugging Face): its encoder (`from_hf(path,
      encoder_only=True)`) and, if the folder has tokenizer files, its tokenizer;
    - a `.keras` file of a kerasbert model (an encoder, a pretraining or task
      model): its encoder; no tokenizer;
    - a `kerasbert-pretrain` model directory (`kerasbert_model.json` and
      checkpoints): the encoder of its latest checkpoint and the tokenizer it
      was trained with;
    - the prefix of an original Google TF1 checkpoint (`.../bert_model.ckpt`,
      with `bert_config.json`, `albert_config.json` or `config.json` beside
      it): its encoder (`from_google(path, encoder_only=True)`); no tokenizer.

    >>> import tempfile
    >>> pretrained_source(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    kerasbert.training.pretrained_sources.PretrainedSourceError: ...
    """
    path = os.fspath(path)
    if is_sentence_transformers_folder(path):
        folder = read_sentence_transformers_folder(path)
        if folder.dense_layers:
            raise PretrainedSourceError(
                f"{path}: a sentence-transformers model with Dense modules; fine-tuning starts "
                "from its encoder and pooling, and would drop them")
        pooling = folder.pooling[0] if len(folder.pooling) == 1 else None
        if pooling is None:
            raise PretrainedSourceError(
                f"{path}: pools with several modes {folder.pooling}; --pooling takes one")
        return PretrainedSource("sentence-transformers",
                                lambda: from_hf(path, encoder_only=True),
                                tokenizer_from_hf(path),
                                {"pooling": pooling, "normalize": folder.normalize})
    if file_system.isfile(file_system.join(path, "config.json")):
        tokenizer = None
        if any(file_system.isfile(file_system.join(path, name)) for name in _TOKENIZER_FILES):
            tokenizer = tokenizer_from_hf(path)
        return PretrainedSource("huggingface", lambda: from_hf(path, encoder_only=True),
                                tokenizer,
                                head_pooling=head_pooling_from_hf(read_hf_config(path)))
    if path.endswith(".keras") and file_system.isfile(path):
        return PretrainedSource("keras", lambda: encoder_of(keras.models.load_model(path)), None)
    if file_system.isfile(file_system.join(path, PRETRAINED_MODEL_FILE)):
        description, checkpoint, tokenizer = _read_pretraining_run(path)
        return PretrainedSource(
            "kerasbert-pretrain",
            lambda: encoder_of(_model_from_pretraining(description, checkpoint)), tokenizer)
    if is_checkpoint_prefix(path):
        config = config_beside(path)
        return PretrainedSource("google", lambda: from_google(path, config, encoder_only=True),
                                None)
    raise PretrainedSourceError(
        f"{path}: not a Hugging Face folder (config.json), a .keras file, a kerasbert-pretrain "
        f"directory ({PRETRAINED_MODEL_FILE}) or a TF1 checkpoint prefix ({path}.index)")


def pretraining_description(config, heads, generator_ratio=None, tokenizer=None):
    """The content of `kerasbert_model.json`: the encoder config, the heads (or the ELECTRA
    generator's size ratio) and the tokenizer arguments of `load_tokenizer`."""
    return {"encoder_config": config.to_dict(), "heads": list(heads) if heads else None,
            "generator_ratio": generator_ratio, "tokenizer": tokenizer}


def _checkpoint_key(variable):
    """Where `tf.train.Checkpoint(model_variables=model_variables(model))` stores a variable
    (the dict key `model_variables` gives it, with the checkpoint's escape of "." as "..")."""
    key = variable.path.replace("/", ".").replace(".", "..")
    return f"model_variables/{key}/.ATTRIBUTES/VARIABLE_VALUE"


def pretraining_run_model(path):
    """The model a `kerasbert-pretrain` directory trains, with the weights of its latest
    checkpoint, and the tokenizer it was trained with (or None).

    >>> import tempfile
    >>> pretraining_run_model(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    kerasbert.training.pretrained_sources.PretrainedSourceError: ...
    """
    description, checkpoint, tokenizer = _read_pretraining_run(path)
    return _model_from_pretraining(description, checkpoint), tokenizer


def _read_pretraining_run(path):
    """`kerasbert_model.json`'s content, the latest checkpoint and the tokenizer of a run."""
    description_path = file_system.join(path, PRETRAINED_MODEL_FILE)
    if not file_system.isfile(description_path):
        raise PretrainedSourceError(f"{path}: not a kerasbert-pretrain directory (no "
                                    f"{PRETRAINED_MODEL_FILE})")
    description = read_json_file(description_path, f"a {PRETRAINED_MODEL_FILE}")
    checkpoint = tf.train.latest_checkpoint(path)
    if checkpoint is None:
        raise PretrainedSourceError(f"{path}: a kerasbert-pretrain directory without "
                                    "checkpoints (ckpt-N)")
    tokenizer = None
    if description.get("tokenizer"):
        tokenizer = load_tokenizer(**description["tokenizer"])
    return description, checkpoint, tokenizer


def _model_from_pretraining(description, checkpoint):
    config = EncoderConfig.from_dict(description["encoder_config"])
    if description.get("generator_ratio"):
        model = ElectraPretrainer(config, generator_config(config, description["generator_ratio"]))
    else:
        model = PretrainingModel(build_encoder(config), description["heads"])
    encoder = encoder_of(model)
    # The prefix is read as it is: `tf.train.list_variables` first asks whether it names a
    # folder, which `ram://` answers yes for any prefix of stored names (`ckpt-4.index`).
    try:
        stored = set(tf.compat.v1.train.NewCheckpointReader(
            checkpoint).get_variable_to_shape_map())
    except tf.errors.OpError as error:  # TensorFlow's message names no file
        raise PretrainedSourceError(f"{checkpoint}: cannot be read as a checkpoint "
                                    f"({op_error_message(error)})") from None
    missing = [weight.path for weight in encoder.weights
               if _checkpoint_key(weight) not in stored]
    if missing:
        raise PretrainedSourceError(f"{checkpoint}: no values for the encoder weights {missing}; "
                                    f"was it written for this model ({PRETRAINED_MODEL_FILE})?")
    # Dropout seed states are numbered per process and do not matter for fine-tuning.
    try:
        tf.train.Checkpoint(model_variables=model_variables(model)).restore(
            checkpoint).expect_partial()
    except tf.errors.OpError as error:
        raise PretrainedSourceError(f"{checkpoint}: cannot be read as a checkpoint "
                                    f"({op_error_message(error)})") from None
    return model