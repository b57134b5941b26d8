"""ELECTRA: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families import bert, roberta
from kerasbert.families.conversion_tables import (
    DENSE, LAYER_NORM, LINEAR, VARIABLE, WORDPIECE, ConfigKey, ConversionTables, EncoderRows,
    GoogleTables, HFTaskHead, HuggingFaceTables, KerasHubTables, ModelSizes)

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

# BERT's layers, an embedding projection, no pooler, and two models: the generator (masked LM)
# and the discriminator (replaced-token detection).
_EMBEDDING_SIZE = ConfigKey("embedding_size", "embedding_size", None)

CONVERSION = ConversionTables(
    display_name="ELECTRA",
    hf=HuggingFaceTables(
        model_type="electra", base_model_prefix="electra", architecture_stem="Electra",
        encoder=EncoderRows(
            embeddings=bert.HF_EMBEDDINGS,
            projection=(("embeddings_project", "embeddings/projection", LINEAR),),
            layer=bert.HF_LAYER),
        config_keys=bert.HF_CONFIG_KEYS + (_EMBEDDING_SIZE,),
        pretraining_architectures={"ElectraForPreTraining": ("rtd",),
                                   "ElectraForMaskedLM": ("mlm",)},
        heads={"mlm": (("generator_predictions.dense", "mlm_head/dense", LINEAR),
                       ("generator_predictions.LayerNorm", "mlm_head/layer_norm", LAYER_NORM)),
               "rtd": (("discriminator_predictions.dense", "rtd_head/dense", LINEAR),
                       ("discriminator_predictions.dense_prediction", "rtd_head/prediction",
                        LINEAR))},
        mlm_bias="generator_lm_head.bias", tied_decoder="generator_lm_head",
        task_heads={
            **bert.hf_task_heads("classifier_dropout",
                                 sequence_classification=roberta.HF_CLASSIFICATION_HEAD),
            # The multiple-choice summary: first token, dense, GELU, then its own dropout.
            "multiple_choice": HFTaskHead(
                (("sequence_summary.summary", "classifier_dense", LINEAR),
                 ("classifier", "classifier", LINEAR)),
                dropout_key="summary_last_dropout", dropout_default=0.1,
                extra_fields={"summary_type": "first", "summary_use_proj": True,
                              "summary_activation": "gelu"}),
        }),
    google=GoogleTables(
        scope="electra",
        markers=("electra/", "generator/", "discriminator_predictions/", "generator_predictions/"),
        encoder=EncoderRows(
            embeddings=bert.GOOGLE_EMBEDDINGS,
            projection=(("{scope}/embeddings_project", "embeddings/projection", DENSE),),
            layer=bert.GOOGLE_LAYER),
        config_keys=bert.GOOGLE_CONFIG_KEYS + (_EMBEDDING_SIZE,),
        heads={
            # The generator's masked-LM head.
            "mlm": (("generator_predictions/dense", "mlm_head/dense", DENSE),
                    ("generator_predictions/LayerNorm", "mlm_head/layer_norm", LAYER_NORM),
                    ("generator_predictions/output_bias", "mlm_head/bias", VARIABLE)),
            # The discriminator's head: dense -> activation -> dense_1 (one logit per token).
            "rtd": (("discriminator_predictions/dense", "rtd_head/dense", DENSE),
                    ("discriminator_predictions/dense_1", "rtd_head/prediction", DENSE)),
        },
        # `model_size` -> (hidden_size, num_hidden_layers), as its pretraining code sets them.
        model_sizes=ModelSizes(
            sizes={"small": (256, 12), "base": (768, 12), "large": (1024, 24)},
            small_embedding_size=128, default_vocab_size=30522,
            generator_fractions={"generator_hidden_size": 0.25, "generator_layers": 1.0}),
        generator_scope="generator",
        other_model_scopes={"discriminator": ("generator/", "generator_predictions/"),
                            "generator": ("electra/", "discriminator_predictions/")}),
    keras_hub=KerasHubTables(
        backbone_class="ElectraBackbone",
        config_keys={**bert.KERAS_HUB_CONFIG_KEYS, "vocab_size": "vocab_size",
                     "embedding_size": "embedding_dim"},
        encoder=EncoderRows(
            embeddings=bert.KERAS_HUB_EMBEDDINGS,
            projection=(("embeddings_projection", "embeddings/projection", DENSE),),
            layer=bert.KERAS_HUB_LAYER, pooler=bert.KERAS_HUB_POOLER),
        default_pad_token_id=0, tokenizer_class="ElectraTokenizer", tokenizer_format=WORDPIECE),
)


FAMILY = Family(name="electra", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
