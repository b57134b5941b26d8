"""ELECTRA: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families.conversion_tables import ConversionTables

# The model and its tokenizer: presets, config defaults and checks, heads, special tokens.

_DEFAULTS = dict(family="electra", vocab_size=30522, hidden_activation="gelu", max_positions=512,
                 type_vocab_size=2, pad_token_id=0, layer_norm_epsilon=1e-12, dropout=0.1,
                 attention_dropout=0.1)

MODEL = ModelTraits(
    presets={
        "electra_small_discriminator": ("google/electra-small-discriminator",
                                        dict(_DEFAULTS, embedding_size=128,
                                             **encoder_shape(12, 256, 4, 1024))),
        "electra_small_generator": ("google/electra-small-generator",
                                    dict(_DEFAULTS, embedding_size=128,
                                         **encoder_shape(12, 256, 4, 1024))),
        "electra_base_discriminator": ("google/electra-base-discriminator",
                                       dict(_DEFAULTS, embedding_size=768,
                                            **encoder_shape(12, 768, 12, 3072))),
        "electra_base_generator": ("google/electra-base-generator",
                                   dict(_DEFAULTS, embedding_size=768,
                                        **encoder_shape(12, 256, 4, 1024))),
        "electra_large_discriminator": ("google/electra-large-discriminator",
                                        dict(_DEFAULTS, embedding_size=1024,
                                             **encoder_shape(24, 1024, 16, 4096))),
        "electra_large_generator": ("google/electra-large-generator",
                                    dict(_DEFAULTS, embedding_size=1024,
                                         **encoder_shape(24, 256, 4, 1024))),
    },
    has_pooler_by_default=False,
    pretraining_heads=("rtd",),
    mlm_activation="gelu",  # the generator's head always uses the exact GELU
    summary_heads={"sequence_classification": SummaryHead("first_token", "gelu"),
                   "multiple_choice": SummaryHead("first_token", "gelu", dropout_first=False)},
)

# The public ELECTRA vocabularies are uncased, whatever the preset's name says.
TOKENIZER = TokenizerTraits(kind="wordpiece", options={"lowercase": True, "second_segment_id": 1})


# Conversion: Hugging Face, Google TF1 and keras-hub weight names and config keys.

CONVERSION = ConversionTables()


FAMILY = Family(name="electra", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
