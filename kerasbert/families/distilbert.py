"""DistilBERT: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families.conversion_tables import ConversionTables

# The model and its tokenizer: presets, config defaults and checks, heads, special tokens.

# No segment embeddings, no pooler, learned positions in the public checkpoints.
_DEFAULTS = dict(family="distilbert", hidden_activation="gelu", max_positions=512,
                 pad_token_id=0, layer_norm_epsilon=1e-12, dropout=0.1, attention_dropout=0.1,
                 sinusoidal_positions=False)

MODEL = ModelTraits(
    presets={
        "distilbert_base_uncased": ("distilbert/distilbert-base-uncased",
                                    dict(_DEFAULTS, vocab_size=30522,
                                         **encoder_shape(6, 768, 12, 3072))),
        "distilbert_base_cased": ("distilbert/distilbert-base-cased",
                                  dict(_DEFAULTS, vocab_size=28996,
                                       **encoder_shape(6, 768, 12, 3072))),
        "distilbert_base_multilingual_cased": ("distilbert/distilbert-base-multilingual-cased",
                                               dict(_DEFAULTS, vocab_size=119547,
                                                    **encoder_shape(6, 768, 12, 3072))),
    },
    has_segment_embeddings=False,
    has_pooler_by_default=False,
    may_have_pooler=False,
    may_project_embeddings=False,
    may_use_sinusoidal_positions=True,
    dropout_after_attention=False,
    pretraining_heads=("mlm",),
    summary_heads={"sequence_classification": SummaryHead("first_token", "relu",
                                                          dropout_first=False),
                   "multiple_choice": SummaryHead("first_token", "relu", dropout_first=False)},
    dropout_before_span_head=True,
)

# DistilBERT's tokenizer gives no token types: pairs are all segment 0.
TOKENIZER = TokenizerTraits(kind="wordpiece", options={"second_segment_id": 0},
                            lowercase_when_uncased=True)


# Conversion: Hugging Face, Google TF1 and keras-hub weight names and config keys.

CONVERSION = ConversionTables()


FAMILY = Family(name="distilbert", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
