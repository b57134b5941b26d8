"""What a family changes in the model and its tokenizer (filled by the families refactor)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class ModelTraits:
    """A family's presets, config defaults and checks, behaviour switches and heads."""


@dataclasses.dataclass(frozen=True)
class TokenizerTraits:
    """A family's tokenizer kind, settings and special tokens."""
