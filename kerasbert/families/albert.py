"""ALBERT: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families.conversion_tables import ConversionTables

# The model and its tokenizer: presets, config defaults and checks, heads, special tokens.

_DEFAULTS = dict(family="albert", vocab_size=30000, embedding_size=128,
                 hidden_activation="gelu_new", max_positions=512, type_vocab_size=2,
                 pad_token_id=0, layer_norm_epsilon=1e-12, dropout=0.0, attention_dropout=0.0,
                 num_hidden_groups=1, inner_group_num=1)

MODEL = ModelTraits(
    presets={
        "albert_base_v2": ("albert/albert-base-v2",
                           dict(_DEFAULTS, **encoder_shape(12, 768, 12, 3072))),
        "albert_large_v2": ("albert/albert-large-v2",
                            dict(_DEFAULTS, **encoder_shape(24, 1024, 16, 4096))),
        "albert_xlarge_v2": ("albert/albert-xlarge-v2",
                             dict(_DEFAULTS, **encoder_shape(24, 2048, 16, 8192))),
        "albert_xxlarge_v2": ("albert/albert-xxlarge-v2",
                              dict(_DEFAULTS, **encoder_shape(12, 4096, 64, 16384))),
    },
    always_projects_embeddings=True,
    shares_layers=True,
    pretraining_heads=("mlm", "sop"),
    summary_heads={"sequence_classification": SummaryHead("pooled_output"),
                   "multiple_choice": SummaryHead("pooled_output")},
)

TOKENIZER = TokenizerTraits(
    kind="sentence_piece",
    special_tokens={"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]",
                    "mask": "[MASK]"},
    options={"lowercase": True, "keep_accents": False})


# Conversion: Hugging Face, Google TF1 and keras-hub weight names and config keys.

CONVERSION = ConversionTables()


FAMILY = Family(name="albert", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
