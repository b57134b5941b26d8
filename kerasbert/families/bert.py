"""BERT: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families.conversion_tables import ConversionTables

# The model and its tokenizer: presets, config defaults and checks, heads, special tokens.

_DEFAULTS = dict(family="bert", hidden_activation="gelu", max_positions=512, type_vocab_size=2,
                 pad_token_id=0, layer_norm_epsilon=1e-12, dropout=0.1, attention_dropout=0.1)

MODEL = ModelTraits(
    presets={
        "bert_tiny_uncased": ("google/bert_uncased_L-2_H-128_A-2",
                              dict(_DEFAULTS, vocab_size=30522, **encoder_shape(2, 128, 2, 512))),
        "bert_mini_uncased": ("google/bert_uncased_L-4_H-256_A-4",
                              dict(_DEFAULTS, vocab_size=30522, **encoder_shape(4, 256, 4, 1024))),
        "bert_small_uncased": ("google/bert_uncased_L-4_H-512_A-8",
                               dict(_DEFAULTS, vocab_size=30522, **encoder_shape(4, 512, 8, 2048))),
        "bert_medium_uncased": ("google/bert_uncased_L-8_H-512_A-8",
                                dict(_DEFAULTS, vocab_size=30522,
                                     **encoder_shape(8, 512, 8, 2048))),
        "bert_base_uncased": ("google-bert/bert-base-uncased",
                              dict(_DEFAULTS, vocab_size=30522,
                                   **encoder_shape(12, 768, 12, 3072))),
        "bert_base_cased": ("google-bert/bert-base-cased",
                            dict(_DEFAULTS, vocab_size=28996, **encoder_shape(12, 768, 12, 3072))),
        "bert_large_uncased": ("google-bert/bert-large-uncased",
                               dict(_DEFAULTS, vocab_size=30522,
                                    **encoder_shape(24, 1024, 16, 4096))),
        "bert_large_cased": ("google-bert/bert-large-cased",
                             dict(_DEFAULTS, vocab_size=28996,
                                  **encoder_shape(24, 1024, 16, 4096))),
        "bert_base_multilingual_cased": ("google-bert/bert-base-multilingual-cased",
                                         dict(_DEFAULTS, vocab_size=119547,
                                              **encoder_shape(12, 768, 12, 3072))),
    },
    pretraining_heads=("mlm", "nsp"),
    summary_heads={"sequence_classification": SummaryHead("pooled_output"),
                   "multiple_choice": SummaryHead("pooled_output")},
)

TOKENIZER = TokenizerTraits(kind="wordpiece", options={"second_segment_id": 1},
                            lowercase_when_uncased=True)


# Conversion: Hugging Face, Google TF1 and keras-hub weight names and config keys.

CONVERSION = ConversionTables()


FAMILY = Family(name="bert", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
