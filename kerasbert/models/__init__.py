"""Functional Keras models: the encoder, the pretraining and fine-tuning models built on it, and
feature extraction from its layers."""

from kerasbert.models.embedding import TextEmbeddingModel
from kerasbert.models.electra import ElectraPretrainer, generator_config
from kerasbert.models.encoder import INPUT_NAMES, Encoder, InputDtypeError, build_encoder
from kerasbert.models.features import (LayerCombination, WordPooling, extract_features,
                                       feature_extractor)
from kerasbert.models.inference import inference_function
from kerasbert.models.pretraining import (FAMILY_HEADS, HEADS, PretrainingModel,
                                          build_pretraining_model)
from kerasbert.models.tasks import IGNORED_LABEL, TASK_MODEL_KINDS, TaskModel, build_task_model
# A compiled model's .keras file (kerasbert-finetune's model.keras) names kerasbert's optimizer and
# learning-rate schedule: importing the models registers those too, so that
# keras.models.load_model needs no custom objects.
from kerasbert.training import optimizers as _registers_the_optimizers  # noqa: F401

__all__ = ["ElectraPretrainer", "Encoder", "FAMILY_HEADS", "HEADS", "INPUT_NAMES",
           "IGNORED_LABEL", "InputDtypeError", "LayerCombination", "PretrainingModel",
           "TASK_MODEL_KINDS", "TaskModel", "TextEmbeddingModel", "WordPooling", "build_encoder", "build_pretraining_model",
           "build_task_model", "extract_features", "feature_extractor", "generator_config",
           "inference_function"]
