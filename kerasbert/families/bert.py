"""BERT: its differences from the generic encoder, all in this file."""

from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

from kerasbert.families.conversion_tables import (
    DENSE, EMBEDDING, HEADS_IN, HEADS_OUT, LAYER_NORM, LINEAR, OUTPUT_LAYER, VARIABLE, WORDPIECE,
    ConfigKey, ConversionTables, EncoderRows, GoogleTables, HFTaskHead, HuggingFaceTables,
    KerasHubTables)

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

# Hugging Face (`transformers`' BertModel, BertForPreTraining, ...).
HF_EMBEDDINGS = (
    ("embeddings.word_embeddings", "embeddings/token_embedding", EMBEDDING),
    ("embeddings.position_embeddings", "embeddings/position_embedding", EMBEDDING),
    ("embeddings.token_type_embeddings", "embeddings/segment_embedding", EMBEDDING),
    ("embeddings.LayerNorm", "embeddings/layer_norm", LAYER_NORM),
)
HF_LAYER = (
    ("encoder.layer.{n}.attention.self.query", "transformer_layer_{n}/attention/query", LINEAR),
    ("encoder.layer.{n}.attention.self.key", "transformer_layer_{n}/attention/key", LINEAR),
    ("encoder.layer.{n}.attention.self.value", "transformer_layer_{n}/attention/value", LINEAR),
    ("encoder.layer.{n}.attention.output.dense", "transformer_layer_{n}/attention/output", LINEAR),
    ("encoder.layer.{n}.attention.output.LayerNorm", "transformer_layer_{n}/attention_layer_norm",
     LAYER_NORM),
    ("encoder.layer.{n}.intermediate.dense", "transformer_layer_{n}/intermediate", LINEAR),
    ("encoder.layer.{n}.output.dense", "transformer_layer_{n}/output", LINEAR),
    ("encoder.layer.{n}.output.LayerNorm", "transformer_layer_{n}/output_layer_norm", LAYER_NORM),
)
HF_POOLER = (("pooler.dense", "pooler/dense", LINEAR),)
# `config.json` keys, as BertConfig names them (RoBERTa, ALBERT and ELECTRA share them).
HF_CONFIG_KEYS = (
    ConfigKey("vocab_size", "vocab_size"),
    ConfigKey("hidden_size", "hidden_size"),
    ConfigKey("num_layers", "num_hidden_layers"),
    ConfigKey("num_heads", "num_attention_heads"),
    ConfigKey("intermediate_size", "intermediate_size"),
    ConfigKey("hidden_activation", "hidden_act", "gelu"),
    ConfigKey("max_positions", "max_position_embeddings", 512),
    ConfigKey("type_vocab_size", "type_vocab_size", 2),
    ConfigKey("pad_token_id", "pad_token_id", 0),
    ConfigKey("layer_norm_epsilon", "layer_norm_eps", 1e-12),
    ConfigKey("dropout", "hidden_dropout_prob", 0.1),
    ConfigKey("attention_dropout", "attention_probs_dropout_prob", 0.1),
    ConfigKey("initializer_range", "initializer_range", 0.02),
)
# BertConfig has no `embedding_size`; one that is there is read (and a projection that makes
# is then refused by to_hf), never written.
HF_EMBEDDING_SIZE_READ_ONLY = ConfigKey("embedding_size", "embedding_size", None, written=False)
HF_CLASSIFIER = (("classifier", "classifier", LINEAR),)
HF_SPAN = (("qa_outputs", "qa_outputs", LINEAR),)


def hf_task_heads(dropout_key, **rows_of_task):
    """The four `*For<Task>` heads reading their dropout from `dropout_key`: a linear
    `classifier` (a span `qa_outputs` for question answering) unless `rows_of_task` says."""
    rows = {"sequence_classification": HF_CLASSIFIER, "multiple_choice": HF_CLASSIFIER,
            "token_classification": HF_CLASSIFIER, "question_answering": HF_SPAN,
            **rows_of_task}
    return {task: HFTaskHead(task_rows, dropout_key) for task, task_rows in rows.items()}


# Google TF1 (google-research/bert).
GOOGLE_EMBEDDINGS = (
    ("{embeddings}/embeddings/word_embeddings", "embeddings/token_embedding", EMBEDDING),
    ("{embeddings}/embeddings/position_embeddings", "embeddings/position_embedding", EMBEDDING),
    ("{embeddings}/embeddings/token_type_embeddings", "embeddings/segment_embedding", EMBEDDING),
    ("{embeddings}/embeddings/LayerNorm", "embeddings/layer_norm", LAYER_NORM),
)
GOOGLE_LAYER = (
    ("{scope}/encoder/layer_{n}/attention/self/query", "transformer_layer_{n}/attention/query",
     DENSE),
    ("{scope}/encoder/layer_{n}/attention/self/key", "transformer_layer_{n}/attention/key", DENSE),
    ("{scope}/encoder/layer_{n}/attention/self/value", "transformer_layer_{n}/attention/value",
     DENSE),
    ("{scope}/encoder/layer_{n}/attention/output/dense", "transformer_layer_{n}/attention/output",
     DENSE),
    ("{scope}/encoder/layer_{n}/attention/output/LayerNorm",
     "transformer_layer_{n}/attention_layer_norm", LAYER_NORM),
    ("{scope}/encoder/layer_{n}/intermediate/dense", "transformer_layer_{n}/intermediate", DENSE),
    ("{scope}/encoder/layer_{n}/output/dense", "transformer_layer_{n}/output", DENSE),
    ("{scope}/encoder/layer_{n}/output/LayerNorm", "transformer_layer_{n}/output_layer_norm",
     LAYER_NORM),
)
GOOGLE_POOLER = (("{scope}/pooler/dense", "pooler/dense", DENSE),)
# `bert_config.json` keys (`hidden_act` is read apart); ALBERT's and ELECTRA's share them.
GOOGLE_CONFIG_KEYS = (
    ConfigKey("vocab_size", "vocab_size"),
    ConfigKey("hidden_size", "hidden_size"),
    ConfigKey("num_layers", "num_hidden_layers"),
    ConfigKey("num_heads", "num_attention_heads"),
    ConfigKey("intermediate_size", "intermediate_size"),
    ConfigKey("max_positions", "max_position_embeddings", 512),
    ConfigKey("type_vocab_size", "type_vocab_size", 2),
    ConfigKey("dropout", "hidden_dropout_prob", 0.1),
    ConfigKey("attention_dropout", "attention_probs_dropout_prob", 0.1),
    ConfigKey("initializer_range", "initializer_range", 0.02),
)
# `run_pretraining.py`'s masked-LM head (ALBERT's is named the same).
GOOGLE_MLM_HEAD = (("cls/predictions/transform/dense", "mlm_head/dense", DENSE),
                   ("cls/predictions/transform/LayerNorm", "mlm_head/layer_norm", LAYER_NORM),
                   ("cls/predictions/output_bias", "mlm_head/bias", VARIABLE))

# keras-hub (BertBackbone).
KERAS_HUB_EMBEDDINGS = (
    ("token_embedding", "embeddings/token_embedding", EMBEDDING),
    ("position_embedding", "embeddings/position_embedding", EMBEDDING),
    ("segment_embedding", "embeddings/segment_embedding", EMBEDDING),
    ("embeddings_layer_norm", "embeddings/layer_norm", LAYER_NORM),
)
KERAS_HUB_POOLER = (("pooled_dense", "pooler/dense", DENSE),)
# EncoderConfig field -> BertBackbone argument (RoBERTa's and DistilBERT's lack `num_segments`).
KERAS_HUB_CONFIG_KEYS = {
    "num_layers": "num_layers", "num_heads": "num_heads", "hidden_size": "hidden_dim",
    "intermediate_size": "intermediate_dim", "dropout": "dropout", "attention_dropout": "dropout",
    "vocab_size": "vocabulary_size", "max_positions": "max_sequence_length",
    "type_vocab_size": "num_segments"}


def keras_hub_layer(prefix):
    """The rows of one keras-hub `TransformerEncoder` layer named `prefix`."""
    return (
        (prefix + "/self_attention_layer/query", "transformer_layer_{n}/attention/query", HEADS_IN),
        (prefix + "/self_attention_layer/key", "transformer_layer_{n}/attention/key", HEADS_IN),
        (prefix + "/self_attention_layer/value", "transformer_layer_{n}/attention/value", HEADS_IN),
        (prefix + "/self_attention_layer/attention_output",
         "transformer_layer_{n}/attention/output", HEADS_OUT),
        (prefix + "/self_attention_layer_norm", "transformer_layer_{n}/attention_layer_norm",
         LAYER_NORM),
        (prefix + "/feedforward_intermediate_dense", "transformer_layer_{n}/intermediate", DENSE),
        (prefix + "/feedforward_output_dense", "transformer_layer_{n}/output", DENSE),
        (prefix + "/feedforward_layer_norm", "transformer_layer_{n}/output_layer_norm", LAYER_NORM),
    )


KERAS_HUB_LAYER = keras_hub_layer("transformer_layer_{n}")

CONVERSION = ConversionTables(
    display_name="BERT",
    hf=HuggingFaceTables(
        model_type="bert", base_model_prefix="bert", architecture_stem="Bert",
        encoder=EncoderRows(embeddings=HF_EMBEDDINGS, layer=HF_LAYER, pooler=HF_POOLER),
        config_keys=HF_CONFIG_KEYS + (HF_EMBEDDING_SIZE_READ_ONLY,),
        pretraining_architectures={"BertForPreTraining": ("mlm", "nsp"),
                                   "BertForMaskedLM": ("mlm",)},
        heads={"mlm": (("cls.predictions.transform.dense", "mlm_head/dense", LINEAR),
                       ("cls.predictions.transform.LayerNorm", "mlm_head/layer_norm", LAYER_NORM)),
               "nsp": (("cls.seq_relationship", "nsp_head", LINEAR),)},
        mlm_bias="cls.predictions.bias", tied_decoder="cls.predictions.decoder",
        task_heads=hf_task_heads("classifier_dropout")),
    google=GoogleTables(
        scope="bert", markers=("bert/",),
        encoder=EncoderRows(embeddings=GOOGLE_EMBEDDINGS, layer=GOOGLE_LAYER,
                            pooler=GOOGLE_POOLER),
        config_keys=GOOGLE_CONFIG_KEYS,
        heads={"mlm": GOOGLE_MLM_HEAD,
               "nsp": (("cls/seq_relationship", "nsp_head", OUTPUT_LAYER),)}),
    keras_hub=KerasHubTables(
        backbone_class="BertBackbone", config_keys=KERAS_HUB_CONFIG_KEYS,
        encoder=EncoderRows(embeddings=KERAS_HUB_EMBEDDINGS, layer=KERAS_HUB_LAYER,
                            pooler=KERAS_HUB_POOLER),
        default_pad_token_id=0, tokenizer_class="BertTokenizer", tokenizer_format=WORDPIECE),
)


FAMILY = Family(name="bert", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
