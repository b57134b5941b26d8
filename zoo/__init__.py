"""The kerasbert model zoo: the exact architectures of the public checkpoints, by name."""

from kerasbert.zoo.registry import (
    UnknownPresetError,
    build,
    get_config,
    list_presets,
    source_checkpoint,
)

__all__ = ["UnknownPresetError", "build", "get_config", "list_presets", "source_checkpoint"]
