"""RoBERTa: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

import dataclasses

from kerasbert.families import bert
from kerasbert.families.conversion_tables import (
    BYTE_PAIR, EMBEDDING, LAYER_NORM, LINEAR, OFFSET_POSITIONS, ConversionTables, EncoderRows,
    HuggingFaceTables, KerasHubTables)

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

# Hugging Face: BERT's encoder rows and config keys, its `<pad>` at 1, its own heads.
HF_CLASSIFICATION_HEAD = (("classifier.dense", "classifier_dense", LINEAR),
                          ("classifier.out_proj", "classifier", LINEAR))
_HF_CONFIG_KEYS = tuple(dataclasses.replace(key, default=1) if key.field == "pad_token_id" else key
                        for key in bert.HF_CONFIG_KEYS)

CONVERSION = ConversionTables(
    display_name="RoBERTa",
    positions_after_padding=True,
    hf=HuggingFaceTables(
        model_type="roberta", base_model_prefix="roberta", architecture_stem="Roberta",
        encoder=EncoderRows(embeddings=bert.HF_EMBEDDINGS, layer=bert.HF_LAYER,
                            pooler=bert.HF_POOLER),
        config_keys=_HF_CONFIG_KEYS + (bert.HF_EMBEDDING_SIZE_READ_ONLY,),
        pretraining_architectures={"RobertaForMaskedLM": ("mlm",)},
        heads={"mlm": (("lm_head.dense", "mlm_head/dense", LINEAR),
                       ("lm_head.layer_norm", "mlm_head/layer_norm", LAYER_NORM))},
        mlm_bias="lm_head.bias", tied_decoder="lm_head.decoder",
        task_heads=bert.hf_task_heads("classifier_dropout",
                                      sequence_classification=HF_CLASSIFICATION_HEAD)),
    # keras-hub's RobertaBackbone has no token types and numbers positions from 0: kerasbert
    # keeps one token type row of zeros (adding zeros is what keras-hub computes) and its offset.
    keras_hub=KerasHubTables(
        backbone_class="RobertaBackbone",
        config_keys={field: key for field, key in bert.KERAS_HUB_CONFIG_KEYS.items()
                     if field != "type_vocab_size"},
        encoder=EncoderRows(
            embeddings=(
                ("embeddings/token_embedding", "embeddings/token_embedding", EMBEDDING),
                ("embeddings/position_embedding", "embeddings/position_embedding",
                 OFFSET_POSITIONS),
                ("embeddings_layer_norm", "embeddings/layer_norm", LAYER_NORM)),
            layer=bert.KERAS_HUB_LAYER,
            zeros=("embeddings/segment_embedding/embeddings",)),
        default_pad_token_id=1, tokenizer_class="RobertaTokenizer", tokenizer_format=BYTE_PAIR,
        fixed_fields={"type_vocab_size": 1}),
)


FAMILY = Family(name="roberta", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
