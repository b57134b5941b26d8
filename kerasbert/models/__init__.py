"""Functional Keras models: the encoder (pretraining and task models come with later work)."""

from kerasbert.models.encoder import INPUT_NAMES, Encoder, InputDtypeError, build_encoder
from kerasbert.models.inference import inference_function

__all__ = ["Encoder", "INPUT_NAMES", "InputDtypeError", "build_encoder", "inference_function"]
