"""The kerasbert model zoo: the exact architectures of the public checkpoints, by name."""

from kerasbert.zoo.registry import (
    UnknownPresetError,
    build,
    get_config,
    list_presets,
    source_checkpoint,
)
from kerasbert.zoo.tokenizers import TokenizerSpec, build_tokenizer, tokenizer_spec

__all__ = ["TokenizerSpec", "UnknownPresetError", "build", "build_tokenizer", "get_config",
           "list_presets", "source_checkpoint", "tokenizer_spec"]
