"""`Family`: the record that states one family's differences from the generic encoder."""

import dataclasses

from kerasbert.families.conversion_tables import ConversionTables
from kerasbert.families.model_traits import ModelTraits, TokenizerTraits


@dataclasses.dataclass(frozen=True)
class Family:
    """Everything that differs in one family, in three parts.

    - `model`: presets, config defaults and checks, behaviour switches, heads.
    - `tokenizer`: the tokenizer kind, its settings and special-token layout.
    - `conversion`: Hugging Face / Google TF1 / keras-hub weight names and config keys.

    Example:
    >>> from kerasbert import families
    >>> isinstance(families.get("bert"), Family)
    True
    """

    name: str
    model: ModelTraits
    tokenizer: TokenizerTraits
    conversion: ConversionTables
