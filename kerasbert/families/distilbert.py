"""DistilBERT: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families import bert
from kerasbert.families.conversion_tables import (
    EMBEDDING, LAYER_NORM, LINEAR, WORDPIECE, ConfigKey, ConversionTables, EncoderRows,
    HFTaskHead, HuggingFaceTables, KerasHubTables, without_rows)

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

# No token types, no pooler, config keys of its own.
_HF_LAYER_PREFIX = "transformer.layer.{n}"
HF_LAYER = (
    (_HF_LAYER_PREFIX + ".attention.q_lin", "transformer_layer_{n}/attention/query", LINEAR),
    (_HF_LAYER_PREFIX + ".attention.k_lin", "transformer_layer_{n}/attention/key", LINEAR),
    (_HF_LAYER_PREFIX + ".attention.v_lin", "transformer_layer_{n}/attention/value", LINEAR),
    (_HF_LAYER_PREFIX + ".attention.out_lin", "transformer_layer_{n}/attention/output", LINEAR),
    (_HF_LAYER_PREFIX + ".sa_layer_norm", "transformer_layer_{n}/attention_layer_norm",
     LAYER_NORM),
    (_HF_LAYER_PREFIX + ".ffn.lin1", "transformer_layer_{n}/intermediate", LINEAR),
    (_HF_LAYER_PREFIX + ".ffn.lin2", "transformer_layer_{n}/output", LINEAR),
    (_HF_LAYER_PREFIX + ".output_layer_norm", "transformer_layer_{n}/output_layer_norm",
     LAYER_NORM),
)
# DistilBertConfig's keys; its LayerNorm epsilon is fixed (not in config.json).
HF_CONFIG_KEYS = (
    ConfigKey("vocab_size", "vocab_size"),
    ConfigKey("hidden_size", "dim"),
    ConfigKey("num_layers", "n_layers"),
    ConfigKey("num_heads", "n_heads"),
    ConfigKey("intermediate_size", "hidden_dim"),
    ConfigKey("hidden_activation", "activation", "gelu"),
    ConfigKey("max_positions", "max_position_embeddings", 512),
    ConfigKey("sinusoidal_positions", "sinusoidal_pos_embds", False),
    ConfigKey("pad_token_id", "pad_token_id", 0),
    ConfigKey("dropout", "dropout", 0.1),
    ConfigKey("attention_dropout", "attention_dropout", 0.1),
    ConfigKey("initializer_range", "initializer_range", 0.02),
)
_HF_PRE_CLASSIFIER = (("pre_classifier", "classifier_dense", LINEAR),
                      ("classifier", "classifier", LINEAR))

CONVERSION = ConversionTables(
    display_name="DistilBERT",
    hf=HuggingFaceTables(
        model_type="distilbert", base_model_prefix="distilbert", architecture_stem="DistilBert",
        encoder=EncoderRows(
            embeddings=without_rows(bert.HF_EMBEDDINGS, "embeddings/segment_embedding"),
            layer=HF_LAYER),
        config_keys=HF_CONFIG_KEYS,
        fixed_fields={"layer_norm_epsilon": 1e-12},
        pretraining_architectures={"DistilBertForMaskedLM": ("mlm",)},
        heads={"mlm": (("vocab_transform", "mlm_head/dense", LINEAR),
                       ("vocab_layer_norm", "mlm_head/layer_norm", LAYER_NORM))},
        mlm_bias="vocab_projector.bias", tied_decoder="vocab_projector",
        # Each head's dropout under its own key; the token head reads the encoder's `dropout`.
        task_heads={
            "sequence_classification": HFTaskHead(_HF_PRE_CLASSIFIER, "seq_classif_dropout", 0.1),
            "multiple_choice": HFTaskHead(_HF_PRE_CLASSIFIER, "seq_classif_dropout", 0.1),
            "token_classification": HFTaskHead(bert.HF_CLASSIFIER, "dropout", 0.1),
            "question_answering": HFTaskHead(bert.HF_SPAN, "qa_dropout", 0.1),
        }),
    # keras-hub keeps the token and position tables in one layer; its tokenizer gives no
    # segment ids.
    keras_hub=KerasHubTables(
        backbone_class="DistilBertBackbone",
        config_keys={field: key for field, key in bert.KERAS_HUB_CONFIG_KEYS.items()
                     if field != "type_vocab_size"},
        encoder=EncoderRows(
            embeddings=(
                ("token_and_position_embedding/token_embedding", "embeddings/token_embedding",
                 EMBEDDING),
                ("token_and_position_embedding/position_embedding",
                 "embeddings/position_embedding", EMBEDDING),
                ("embeddings_layer_norm", "embeddings/layer_norm", LAYER_NORM)),
            layer=bert.KERAS_HUB_LAYER),
        default_pad_token_id=0, tokenizer_class="DistilBertTokenizer",
        tokenizer_format=WORDPIECE, tokenizer_has_segments=False),
)


FAMILY = Family(name="distilbert", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
