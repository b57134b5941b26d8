"""RoBERTa: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families.conversion_tables import ConversionTables

# The model and its tokenizer: presets, config defaults and checks, heads, special tokens.

_DEFAULTS = dict(family="roberta", vocab_size=50265, hidden_activation="gelu", max_positions=514,
                 type_vocab_size=1, pad_token_id=1, position_offset=2, layer_norm_epsilon=1e-5,
                 dropout=0.1, attention_dropout=0.1)

MODEL = ModelTraits(
    presets={
        "roberta_base": ("FacebookAI/roberta-base",
                         dict(_DEFAULTS, **encoder_shape(12, 768, 12, 3072))),
        "roberta_large": ("FacebookAI/roberta-large",
                          dict(_DEFAULTS, **encoder_shape(24, 1024, 16, 4096))),
    },
    pretraining_heads=("mlm",),
    mlm_activation="gelu",  # RobertaLMHead always uses the exact GELU
    summary_heads={"sequence_classification": SummaryHead("first_token", "tanh"),
                   "multiple_choice": SummaryHead("pooled_output")},
)

TOKENIZER = TokenizerTraits(
    kind="byte_pair",
    special_tokens={"pad": "<pad>", "unk": "<unk>", "cls": "<s>", "sep": "</s>", "mask": "<mask>"},
    options={"add_prefix_space": False, "lstrip_tokens": ["<mask>"]})


# Conversion: Hugging Face, Google TF1 and keras-hub weight names and config keys.

CONVERSION = ConversionTables()


FAMILY = Family(name="roberta", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
