"""`from_hf`: a kerasbert model from a Hugging Face model directory."""

import os

from kerasbert import families, file_system
from kerasbert.convert.checkpoint_files import read_state_dict
from kerasbert.convert.hf_config import (encoder_config_from_hf, read_hf_config,
                                         task_settings_from_hf)
from kerasbert.convert.hf_names import (IGNORED_BUFFERS, encoder_name_map, head_name_map,
                                        hf_tables, normalize_hf_name, task_head_name_map)
from kerasbert.convert.sentence_transformers_folder import read_sentence_transformers_folder
from kerasbert.convert.weights import WeightMismatchError, assign_weights
from kerasbert.models.embedding import TextEmbeddingModel
from kerasbert.models.encoder import build_encoder
from kerasbert.models.pretraining import PretrainingModel
from kerasbert.models.tasks import TaskModel, needs_pooler, with_pooler
from kerasbert.tokenizers.sentence_transformers_modules import is_sentence_transformers_folder

# The bare-encoder architecture of each family.
ENCODER_ARCHITECTURES = {name: hf_tables(name).encoder_architecture for name in families.NAMES}


# Architectures with pretraining heads -> the heads of the `PretrainingModel` they give.
PRETRAINING_ARCHITECTURES = {architecture: heads for name in families.NAMES
                             for architecture, heads
                             in hf_tables(name).pretraining_architectures.items()}


# Architectures with fine-tuning heads -> the task of the `TaskModel` they give.
TASK_SUFFIXES = {
    "ForSequenceClassification": "sequence_classification",
    "ForTokenClassification": "token_classification",
    "ForQuestionAnswering": "question_answering",
    "ForMultipleChoice": "multiple_choice",
}
TASK_ARCHITECTURES = {
    hf_tables(name).architecture_stem + suffix: task
    for name in families.NAMES
    for suffix, task in TASK_SUFFIXES.items()
}


class UnsupportedArchitectureError(ValueError):
    """A checkpoint whose architecture kerasbert cannot import (yet)."""


def from_hf(directory, encoder_only=False):
    """Import a Hugging Face checkpoint as a kerasbert model with its weights.

    `directory` (local, or a TensorFlow file-system URL such as `gs://...`)
    holds `config.json` and `model.safetensors` (or sharded safetensors, or
    `pytorch_model.bin`; the shards an index names must be in `directory`). The architecture that `config.json`
    names decides the model returned: `BertModel`, `RobertaModel`,
    `AlbertModel` and `ElectraModel` give an `Encoder`; the architectures of
    `PRETRAINING_ARCHITECTURES` (`BertForPreTraining`, `*ForMaskedLM`,
    `ElectraForPreTraining`, ...) give a `PretrainingModel` with those heads
    (ELECTRA's `ForMaskedLM` is the generator, `ForPreTraining` the
    discriminator); those of `TASK_ARCHITECTURES` (`*ForSequenceClassification`,
    `*ForTokenClassification`, `*ForQuestionAnswering`, `*ForMultipleChoice`)
    give a `TaskModel` with the head, its label names (`id2label`; one label is
    regression) and its dropout. A sentence-transformers folder (one with
    `modules.json`: a Transformer module, Pooling, optional Dense layers and
    Normalize) gives a `TextEmbeddingModel` whose `embedding` output is what
    `SentenceTransformer(directory).encode` returns (with `encoder_only=True`,
    the encoder of its Transformer module). With
    `encoder_only=True`, any architecture of those families gives just its
    encoder, and its head weights are deliberately left out. A checkpoint
    without pooler weights (`*ForMaskedLM` models have none) gives an encoder
    without a pooler rather than one with a random pooler.

    Every checkpoint tensor must find a variable and every variable a tensor
    of the same shape; otherwise a `WeightMismatchError` lists the differences.

    Example (with a directory written by `transformers`' `save_pretrained`):

        encoder = kerasbert.convert.from_hf("/models/bert-base-uncased", encoder_only=True)
        outputs = encoder({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    """
    directory = os.fspath(directory)
    if is_sentence_transformers_folder(directory):
        folder = read_sentence_transformers_folder(directory)
        encoder = _import_checkpoint(folder.transformer_dir, encoder_only=True)
        return encoder if encoder_only else _text_embedding_model(with_pooler(encoder, False),
                                                                  folder)
    return _import_checkpoint(directory, encoder_only)


def _text_embedding_model(encoder, folder):
    """The `TextEmbeddingModel` a `SentenceTransformersModel` describes, on `encoder`."""
    if folder.embedding_dimension != encoder.config.hidden_size:
        raise WeightMismatchError(
            f"{folder.transformer_dir}: the Pooling module expects token vectors of size "
            f"{folder.embedding_dimension}, the encoder's hidden size is "
            f"{encoder.config.hidden_size}")
    max_seq_length = folder.max_seq_length
    if max_seq_length is not None:
        max_seq_length = min(max_seq_length, encoder.config.max_sequence_length)
    model = TextEmbeddingModel(encoder, pooling=folder.pooling,
                               dense_layers=list(folder.dense_layers), normalize=folder.normalize,
                               similarity=folder.similarity, prompts=folder.prompts,
                               default_prompt_name=folder.default_prompt_name,
                               max_seq_length=max_seq_length)
    for index, (kernel, bias) in enumerate(folder.dense_weights):
        layer = model.get_layer(f"dense_{index}")
        if tuple(layer.kernel.shape) != kernel.shape:
            raise WeightMismatchError(
                f"{folder.transformer_dir}: dense layer {index} takes {kernel.shape[0]} inputs, "
                f"its input has {layer.kernel.shape[0]}")
        layer.set_weights([kernel] if bias is None else [kernel, bias])
    return model


def _import_checkpoint(directory, encoder_only):
    """`from_hf` of a Hugging Face checkpoint folder (not a sentence-transformers folder)."""
    hf_config = read_hf_config(directory)
    config_path = file_system.join(directory, "config.json")
    config = encoder_config_from_hf(hf_config, source=config_path)
    hf = hf_tables(config.family)
    architectures = hf_config.get("architectures") or [hf.encoder_architecture]
    architecture = architectures[0]
    if not architecture.startswith(hf.architecture_stem):
        raise UnsupportedArchitectureError(
            f"{config_path}: architecture {architecture!r} does not belong to model_type "
            f"{config.family!r}")
    is_encoder = architecture == hf.encoder_architecture
    heads = PRETRAINING_ARCHITECTURES.get(architecture)
    task = TASK_ARCHITECTURES.get(architecture)
    if not (is_encoder or encoder_only or heads or task):
        raise UnsupportedArchitectureError(
            f"{config_path}: architecture {architecture!r} is not importable with its head; "
            f"supported: {sorted(ENCODER_ARCHITECTURES.values())}, "
            f"{sorted(PRETRAINING_ARCHITECTURES)} and {sorted(TASK_ARCHITECTURES)}. Pass "
            "encoder_only=True to import just its encoder (the head weights are then left out).")

    full_state = {normalize_hf_name(name): value
                  for name, value in read_state_dict(directory).items()}
    prefix = hf.base_model_prefix
    state = _encoder_tensors(full_state, prefix, keep_heads=is_encoder)
    if task and not encoder_only:
        # The pooler exactly when the head reads it; a stored but unread pooler is dropped.
        if not needs_pooler(config.family, task):
            state = {name: value for name, value in state.items()
                     if not name.startswith("pooler.")}
        config = config.replace(use_pooler=needs_pooler(config.family, task))
    elif config.use_pooler and not any(name.startswith("pooler.") for name in state):
        config = config.replace(use_pooler=False)  # e.g. *ForMaskedLM encoders have no pooler
    encoder = build_encoder(config)
    source = f"checkpoint in {directory}"
    if is_encoder or encoder_only:
        assign_weights(encoder, state, encoder_name_map(config), ignored=IGNORED_BUFFERS,
                       source=source)
        return encoder
    name_map = {f"{prefix}.{name}": target for name, target in encoder_name_map(config).items()}
    if task:
        model = TaskModel(encoder, task, **task_settings_from_hf(hf_config, task))
        head_state = {name: value for name, value in full_state.items()
                      if not name.startswith(prefix + ".")}
        name_map.update(task_head_name_map(config.family, task))
    else:
        model = PretrainingModel(encoder, heads)
        head_state = _untied_head_tensors(full_state, hf, source)
        name_map.update(head_name_map(config.family, heads))
    assign_weights(model, {**{f"{prefix}.{name}": value for name, value in state.items()},
                           **head_state}, name_map,
                   ignored=tuple(f"{prefix}.{name}" for name in IGNORED_BUFFERS), source=source)
    return model


def _encoder_tensors(state, prefix, keep_heads):
    """The encoder's tensors with the base-model prefix (`bert.` etc.) removed.

    A bare-encoder checkpoint keeps everything (so unexpected tensors are
    reported); a checkpoint with heads keeps only the prefixed encoder part.
    """
    marker = prefix + "."
    if not any(name.startswith(marker) for name in state):
        return state
    encoder = {name[len(marker):]: value for name, value in state.items() if name.startswith(marker)}
    if keep_heads:
        encoder.update({name: value for name, value in state.items() if not name.startswith(marker)})
    return encoder


def _untied_head_tensors(state, hf, source):
    """The head tensors, with the tied decoder copies some checkpoints store checked and dropped
    (the decoder weight must be the word embeddings; its bias stands in for a missing MLM bias)."""
    prefix, decoder = hf.base_model_prefix, hf.tied_decoder
    heads = {name: value for name, value in state.items() if not name.startswith(prefix + ".")}
    weight = heads.pop(f"{decoder}.weight", None)
    table = next(f"{prefix}.{theirs}.weight" for theirs, ours, _ in hf.encoder.embeddings
                 if ours == "embeddings/token_embedding")
    embeddings = state.get(table)
    if weight is not None and embeddings is not None and (
            weight.shape != embeddings.shape or abs(weight - embeddings).max() > 0):
        raise WeightMismatchError(
            f"{source}: {decoder}.weight differs from {table}; kerasbert ties the MLM decoder "
            "to the token embedding and cannot import an untied one")
    bias = heads.pop(f"{decoder}.bias", None)
    if bias is not None:
        heads.setdefault(hf.mlm_bias, bias)
    return heads
