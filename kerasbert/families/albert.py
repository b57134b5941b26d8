"""ALBERT: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families import bert
from kerasbert.families.conversion_tables import (
    DENSE, LAYER_NORM, LINEAR, OUTPUT_LAYER, SENTENCE_PIECE, ConfigKey, ConversionTables,
    EncoderRows, GoogleTables, HuggingFaceTables, KerasHubTables)

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

# ALBERT's embedding size and layer groups, in every format's config.
_EMBEDDING_SIZE = ConfigKey("embedding_size", "embedding_size", None)
_GROUPS = (ConfigKey("num_hidden_groups", "num_hidden_groups", 1),
           ConfigKey("inner_group_num", "inner_group_num", 1))

# Hugging Face: layers shared within groups, `{group}` and `{inner}` of layer `{n}`.
_HF_LAYER_PREFIX = "encoder.albert_layer_groups.{group}.albert_layers.{inner}"
HF_LAYER = (
    (_HF_LAYER_PREFIX + ".attention.query", "transformer_layer_{n}/attention/query", LINEAR),
    (_HF_LAYER_PREFIX + ".attention.key", "transformer_layer_{n}/attention/key", LINEAR),
    (_HF_LAYER_PREFIX + ".attention.value", "transformer_layer_{n}/attention/value", LINEAR),
    (_HF_LAYER_PREFIX + ".attention.dense", "transformer_layer_{n}/attention/output", LINEAR),
    (_HF_LAYER_PREFIX + ".attention.LayerNorm", "transformer_layer_{n}/attention_layer_norm",
     LAYER_NORM),
    (_HF_LAYER_PREFIX + ".ffn", "transformer_layer_{n}/intermediate", LINEAR),
    (_HF_LAYER_PREFIX + ".ffn_output", "transformer_layer_{n}/output", LINEAR),
    (_HF_LAYER_PREFIX + ".full_layer_layer_norm", "transformer_layer_{n}/output_layer_norm",
     LAYER_NORM),
)

# Google TF1 (google-research/albert): the encoder under `bert/`, in groups.
_GOOGLE_LAYER_SCOPE = "{scope}/encoder/transformer/group_{group}/inner_group_{inner}"
GOOGLE_LAYER = (
    (_GOOGLE_LAYER_SCOPE + "/attention_1/self/query", "transformer_layer_{n}/attention/query",
     DENSE),
    (_GOOGLE_LAYER_SCOPE + "/attention_1/self/key", "transformer_layer_{n}/attention/key", DENSE),
    (_GOOGLE_LAYER_SCOPE + "/attention_1/self/value", "transformer_layer_{n}/attention/value",
     DENSE),
    (_GOOGLE_LAYER_SCOPE + "/attention_1/output/dense", "transformer_layer_{n}/attention/output",
     DENSE),
    (_GOOGLE_LAYER_SCOPE + "/LayerNorm", "transformer_layer_{n}/attention_layer_norm",
     LAYER_NORM),
    (_GOOGLE_LAYER_SCOPE + "/ffn_1/intermediate/dense", "transformer_layer_{n}/intermediate",
     DENSE),
    (_GOOGLE_LAYER_SCOPE + "/ffn_1/intermediate/output/dense", "transformer_layer_{n}/output",
     DENSE),
    (_GOOGLE_LAYER_SCOPE + "/LayerNorm_1", "transformer_layer_{n}/output_layer_norm", LAYER_NORM),
)

CONVERSION = ConversionTables(
    display_name="ALBERT",
    hf=HuggingFaceTables(
        model_type="albert", base_model_prefix="albert", architecture_stem="Albert",
        encoder=EncoderRows(
            embeddings=bert.HF_EMBEDDINGS,
            projection=(("encoder.embedding_hidden_mapping_in", "embeddings/projection", LINEAR),),
            layer=HF_LAYER, pooler=(("pooler", "pooler/dense", LINEAR),)),
        config_keys=bert.HF_CONFIG_KEYS + (_EMBEDDING_SIZE,) + _GROUPS,
        pretraining_architectures={"AlbertForPreTraining": ("mlm", "sop"),
                                   "AlbertForMaskedLM": ("mlm",)},
        heads={"mlm": (("predictions.dense", "mlm_head/dense", LINEAR),
                       ("predictions.LayerNorm", "mlm_head/layer_norm", LAYER_NORM)),
               "sop": (("sop_classifier.classifier", "sop_head", LINEAR),)},
        mlm_bias="predictions.bias", tied_decoder="predictions.decoder",
        task_heads=bert.hf_task_heads("classifier_dropout_prob")),
    google=GoogleTables(
        scope="bert",
        markers=("bert/encoder/transformer/", "bert/encoder/embedding_hidden_mapping_in/"),
        encoder=EncoderRows(
            embeddings=bert.GOOGLE_EMBEDDINGS,
            projection=(("{scope}/encoder/embedding_hidden_mapping_in", "embeddings/projection",
                         DENSE),),
            layer=GOOGLE_LAYER, pooler=bert.GOOGLE_POOLER),
        config_keys=bert.GOOGLE_CONFIG_KEYS + (_EMBEDDING_SIZE,) + _GROUPS,
        heads={"mlm": bert.GOOGLE_MLM_HEAD,
               "sop": (("cls/seq_relationship", "sop_head", OUTPUT_LAYER),)},
        # ALBERT's code computes "gelu" as the tanh approximation.
        activation_names={"gelu": "gelu_new"},
        unused_features={"net_structure_type": 0, "down_scale_factor": 1, "gap_size": 0,
                         "num_memory_blocks": 0, "layers_to_keep": []}),
    keras_hub=KerasHubTables(
        backbone_class="AlbertBackbone",
        config_keys={**bert.KERAS_HUB_CONFIG_KEYS, "embedding_size": "embedding_dim",
                     "num_hidden_groups": "num_groups",
                     "inner_group_num": "num_inner_repetitions"},
        encoder=EncoderRows(
            embeddings=bert.KERAS_HUB_EMBEDDINGS,
            projection=(("embedding_projection", "embeddings/projection", DENSE),),
            layer=bert.keras_hub_layer("group_{group}_inner_layer_{inner}"),
            pooler=bert.KERAS_HUB_POOLER),
        default_pad_token_id=0, tokenizer_class="AlbertTokenizer",
        tokenizer_format=SENTENCE_PIECE),
)


FAMILY = Family(name="albert", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
