"""What a family's checkpoints call things (filled by the families refactor)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class ConversionTables:
    """A family's Hugging Face / Google TF1 / keras-hub weight-name tables and config keys."""
