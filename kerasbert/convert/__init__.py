"""Import weights from local Hugging Face checkpoints into kerasbert models."""

from kerasbert.convert.checkpoint_files import CheckpointFileError, read_state_dict
from kerasbert.convert.from_google import from_google
from kerasbert.convert.from_hf import UnsupportedArchitectureError, from_hf
from kerasbert.convert.from_keras_hub import KerasHubPresetError, from_keras_hub
from kerasbert.convert.google_config import GoogleCheckpointError
from kerasbert.convert.hf_config import HFConfigError, encoder_config_from_hf
from kerasbert.convert.to_hf import UnsupportedModelError, to_hf
from kerasbert.convert.weights import WeightMismatchError

__all__ = [
    "CheckpointFileError",
    "GoogleCheckpointError",
    "HFConfigError",
    "KerasHubPresetError",
    "UnsupportedArchitectureError",
    "UnsupportedModelError",
    "WeightMismatchError",
    "encoder_config_from_hf",
    "from_google",
    "from_hf",
    "from_keras_hub",
    "read_state_dict",
    "to_hf",
]
