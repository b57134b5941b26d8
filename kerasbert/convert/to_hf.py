"""`to_hf`: a kerasbert model -> a Hugging Face model directory that `transformers` loads."""

import json
import os

import numpy as np
import safetensors.numpy

from kerasbert import file_system
from kerasbert.atomic_files import TemporarySibling
from kerasbert.convert.from_hf import TASK_SUFFIXES
from kerasbert.convert.hf_config_writer import (UnsupportedModelError, hf_config_fields,
                                                task_config_fields)
from kerasbert.convert.hf_names import (encoder_name_map, head_name_map, hf_tables,
                                        task_head_name_map)
from kerasbert.convert.hf_tokenizer_files import tokenizer_files
from kerasbert.convert.sentence_transformers_files import sentence_transformers_files
from kerasbert.convert.weights import variables_by_path
from kerasbert.models.electra import ElectraPretrainer
from kerasbert.models.embedding import TextEmbeddingModel
from kerasbert.models.encoder import Encoder
from kerasbert.models.pretraining import PretrainingModel, default_mlm_activation
from kerasbert.models.tasks import TaskModel
from kerasbert.tokenizers.base import Tokenizer

POOLER_PATH = "pooler/"


def to_hf(model, directory, tokenizer=None):
    """Write `model` (and `tokenizer`) as a Hugging Face model directory; return its path.

    `directory` gets `config.json` and `model.safetensors` (float32), which
    `transformers`' `from_pretrained` loads with no missing or unexpected
    weights, into the class `from_hf` maps back to the same model:

    - an `Encoder` -> `BertModel`, `RobertaModel`, `AlbertModel`, `ElectraModel`.
      A BERT, RoBERTa or ALBERT encoder without a pooler (e.g. imported from a
      `*ForMaskedLM` with `encoder_only=True`) is written without one: load it
      with `from_pretrained(directory, add_pooling_layer=False)`, as
      `transformers` would otherwise add a randomly initialised pooler;
    - a `PretrainingModel` -> the class of `from_hf.PRETRAINING_ARCHITECTURES`
      with the same heads (`BertForPreTraining` for MLM + NSP,
      `RobertaForMaskedLM`, `ElectraForPreTraining` for RTD, ...). The MLM
      decoder is tied to the word embeddings, so only those are written, as
      `save_pretrained` does; a pooler that none of the heads reads (an MLM-only
      or RTD model) is left out, as the `transformers` class has none;
    - a `TaskModel` -> `*ForSequenceClassification`, `*ForTokenClassification`,
      `*ForQuestionAnswering`, `*ForMultipleChoice`, with `id2label` /
      `label2id` (`problem_type: "regression"` for one output) and the head's
      dropout;
    - a `TextEmbeddingModel` -> a sentence-transformers folder: its encoder as
      above in `directory` itself, with `modules.json` and the Pooling, Dense
      and Normalize modules, which `SentenceTransformer(directory)` loads to
      the same vectors (and `from_hf` back to the same model).

    With a kerasbert `tokenizer` (kerasbert models do not carry one), its files
    are written too (see `hf_tokenizer_files.tokenizer_files`), so that
    `transformers.AutoTokenizer.from_pretrained(directory)` gives its ids; its
    pad id must be the model's and its vocabulary must fit the model's.

    Everything is written into a temporary directory beside `directory` and
    renamed into place when complete; a `directory` on a TensorFlow file
    system (`gs://...`) is written locally, then copied there, `config.json`
    last. `directory` must not exist or be empty
    (`FileExistsError` otherwise). A model `transformers` cannot express (heads
    no class has, an ELECTRA pooler, an `ElectraPretrainer`'s two encoders, ...)
    raises `UnsupportedModelError` before anything is written.

    >>> import os, tempfile, kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1, vocab_size=100)
    >>> path = to_hf(encoder, os.path.join(tempfile.mkdtemp(), "tiny-bert"))
    >>> sorted(os.listdir(path))
    ['config.json', 'model.safetensors']
    >>> json.load(open(os.path.join(path, "config.json")))["architectures"]
    ['BertModel']
    """
    directory = file_system.absolute(directory)
    _check_target(directory)
    config, architecture, name_map, extra_fields = _describe(model)
    config_json = {"architectures": [architecture], **hf_config_fields(config), **extra_fields}
    files = {}
    if tokenizer is not None:
        _check_tokenizer(tokenizer, config)
        files = tokenizer_files(tokenizer, model_max_length=config.max_sequence_length)
    files["config.json"] = json.dumps(config_json, indent=2, sort_keys=True) + "\n"
    if isinstance(model, TextEmbeddingModel):
        files.update(sentence_transformers_files(model))
        model = model.encoder
    tensors = _tensors(model, name_map)

    with TemporarySibling(directory, folder=True) as temporary:
        safetensors.numpy.save_file(tensors, os.path.join(temporary.path, "model.safetensors"),
                                    metadata={"format": "pt"})
        for name, content in files.items():
            os.makedirs(os.path.dirname(os.path.join(temporary.path, name)), exist_ok=True)
            with open(os.path.join(temporary.path, name), "wb") as file:
                file.write(content.encode("utf-8") if isinstance(content, str) else content)
    return directory


def _check_target(directory):
    if file_system.isdir(directory):
        if file_system.listdir(directory):
            raise FileExistsError(
                f"{directory} exists and is not empty; to_hf writes only a new or empty directory")
    elif file_system.exists(directory):
        raise FileExistsError(f"{directory} exists and is not a directory")


def _describe(model):
    """`(EncoderConfig, architecture, {hf name: (variable path, transpose)}, config fields)`
    of a model, or `UnsupportedModelError`."""
    if isinstance(model, TextEmbeddingModel):
        model = model.encoder
    if isinstance(model, Encoder):
        config = model.config
        return (config, hf_tables(config.family).encoder_architecture,
                encoder_name_map(config), {})
    if isinstance(model, PretrainingModel):
        config = model.encoder.config
        architecture = _pretraining_architecture(config.family, model.heads)
        if model.mlm_activation != default_mlm_activation(config):
            raise UnsupportedModelError(
                f"The MLM head's activation is {model.mlm_activation!r}, but {architecture} uses "
                f"{default_mlm_activation(config)!r}")
        # The pooler exactly when a head reads it, as in the transformers class.
        names = _prefixed(encoder_name_map(config.replace(
            use_pooler=bool({"nsp", "sop"} & set(model.heads)))), config.family)
        return config, architecture, {**names, **head_name_map(config.family, model.heads)}, {}
    if isinstance(model, TaskModel):
        config = model.encoder.config
        names = _prefixed(encoder_name_map(config), config.family)
        fields = task_config_fields(config.family, model.task, model.id2label,
                                    model.is_regression, model.dropout, model.pooling)
        return (config, _task_architecture(config.family, model.task),
                {**names, **task_head_name_map(config.family, model.task)}, fields)
    if isinstance(model, ElectraPretrainer):
        raise UnsupportedModelError(
            "An ElectraPretrainer holds a generator and a discriminator, two transformers "
            "models (ElectraForMaskedLM and ElectraForPreTraining); transformers has no class "
            "for the pair")
    raise UnsupportedModelError(
        f"to_hf takes a kerasbert Encoder, PretrainingModel, TaskModel or TextEmbeddingModel, got "
        f"{type(model).__name__}")


def _task_architecture(family, task):
    """The `*For<Task>` class of `family`'s `task` head: `from_hf.TASK_ARCHITECTURES` inverted."""
    suffix = next(suffix for suffix, its_task in TASK_SUFFIXES.items() if its_task == task)
    return hf_tables(family).architecture_stem + suffix


def _pretraining_architecture(family, heads):
    candidates = hf_tables(family).pretraining_architectures
    for architecture, its_heads in candidates.items():
        if set(its_heads) == set(heads):
            return architecture
    offered = ", ".join(f"{architecture} {its_heads}" for architecture, its_heads
                        in candidates.items())
    raise UnsupportedModelError(
        f"No transformers class has a {family} encoder with the heads {tuple(heads)}; "
        f"there are {offered}")


def _prefixed(names, family):
    prefix = hf_tables(family).base_model_prefix
    return {f"{prefix}.{name}": target for name, target in names.items()}


def _tensors(model, name_map):
    """`{hf name: float32 array}`; every variable of `model` must be written, except a pooler
    that the architecture leaves out (only a `PretrainingModel`'s can be: an `Encoder` keeps
    its own, a `TaskModel` has one exactly when its head reads it)."""
    variables = variables_by_path(model)
    written = {path for path, _ in name_map.values()}
    unwritten = sorted(path for path in variables
                       if path not in written and not path.startswith(POOLER_PATH))
    absent = sorted(path for path in written if path not in variables)
    if unwritten or absent:
        raise UnsupportedModelError(
            f"{model.name}: the transformers names do not cover the model's weights; "
            f"variables no name takes: {unwritten}; names for variables the model lacks: {absent}")
    tensors = {}
    for name, (path, transpose) in name_map.items():
        value = np.asarray(variables[path].numpy(), dtype="float32")
        tensors[name] = np.ascontiguousarray(value.T if transpose else value)
    return tensors


def _check_tokenizer(tokenizer, config):
    if not isinstance(tokenizer, Tokenizer):
        raise UnsupportedModelError(
            f"tokenizer must be a kerasbert tokenizer, got {type(tokenizer).__name__}")
    if tokenizer.vocabulary_size() > config.vocab_size:
        raise UnsupportedModelError(
            f"The tokenizer has {tokenizer.vocabulary_size()} tokens, more than the model's "
            f"vocab_size {config.vocab_size}")
    if tokenizer.pad_token_id != config.pad_token_id:
        raise UnsupportedModelError(
            f"The tokenizer pads with id {tokenizer.pad_token_id} "
            f"({tokenizer.special_tokens['pad']!r}), the model's pad_token_id is "
            f"{config.pad_token_id}")
