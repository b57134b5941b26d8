"""DistilBERT: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import ModelTraits, TokenizerTraits

from kerasbert.families.conversion_tables import ConversionTables

# The model and its tokenizer: presets, config defaults and checks, heads, special tokens.

MODEL = ModelTraits()

TOKENIZER = TokenizerTraits()


# Conversion: Hugging Face, Google TF1 and keras-hub weight names and config keys.

CONVERSION = ConversionTables()


FAMILY = Family(name="distilbert", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
