"""ModernBERT (Answer.AI and LightOn, 2024): its differences from the generic encoder, all here.

No position or segment tables (rotary positions instead, base 160,000 on the global layers and
10,000 on the local ones), local layers attending within 128 tokens between global layers
(every third, from the first), pre-LayerNorm blocks with a final norm, GeGLU feed-forward, no
biases, a fused `Wqkv` projection, and fine-tuning heads behind a dense -> GELU -> LayerNorm
transform. Read from `transformers`' `modular_modernbert.py`.
"""

from kerasbert.families import bert
from kerasbert.families.conversion_tables import (
    EMBEDDING, LAYER_NORM_NO_BIAS, LINEAR, LINEAR_NO_BIAS, ConfigKey, ConversionTables,
    EncoderRows, HFTaskHead, HuggingFaceTables)
from kerasbert.families.family import Family
from kerasbert.families.model_traits import (ModelTraits, SummaryHead, TokenizerTraits,
                                              encoder_shape)

# The model and its tokenizer: presets, config defaults and checks, heads, special tokens.

GLOBAL_ROPE_THETA, LOCAL_ROPE_THETA = 160000.0, 10000.0

# The encoder switches every ModernBERT config has unless it says otherwise.
ENCODER_DEFAULTS = dict(rotary_theta=GLOBAL_ROPE_THETA, local_rotary_theta=LOCAL_ROPE_THETA,
                        local_attention_window=128, global_attention_every=3, gated_mlp=True,
                        pre_norm=True, use_bias=False)

_DEFAULTS = dict(family="modernbert", hidden_activation="gelu", max_positions=8192,
                 type_vocab_size=0, pad_token_id=50283, layer_norm_epsilon=1e-5, dropout=0.0,
                 attention_dropout=0.0)

MODEL = ModelTraits(
    presets={
        "modernbert_base": ("answerdotai/ModernBERT-base",
                            dict(_DEFAULTS, vocab_size=50368,
                                 **encoder_shape(22, 768, 12, 1152))),
        "modernbert_large": ("answerdotai/ModernBERT-large",
                             dict(_DEFAULTS, vocab_size=50368,
                                  **encoder_shape(28, 1024, 16, 2624))),
    },
    pretraining_heads=("mlm",),
    # The first token (or, with `pooling="mean"`, the mean) -> head transform -> dropout.
    summary_heads={"sequence_classification": SummaryHead("first_token", dropout_first=False),
                   "multiple_choice": SummaryHead("first_token", dropout_first=False)},
    has_segment_embeddings=False,
    has_pooler_by_default=False,
    may_have_pooler=False,
    may_project_embeddings=False,
    mlm_activation="gelu",
    dropout_before_span_head=True,  # head -> dropout -> classifier, for spans too
    fused_attention_projection=True,
    head_transform="gelu",
    encoder_defaults=ENCODER_DEFAULTS,
)

# OLMo's byte-level BPE with BERT's special-token strings and layout: `[CLS] A [SEP] B [SEP]`.
TOKENIZER = TokenizerTraits(kind="byte_pair", options={
    "add_prefix_space": False, "lstrip_tokens": ["[MASK]"], "pair_separators": 1})


# Conversion: Hugging Face weight names and config keys (Google released no TF1 checkpoints
# and keras-hub has no ModernBERT backbone).

# BERT's five size keys, then ModernBERT's own names and defaults.
HF_CONFIG_KEYS = bert.HF_CONFIG_KEYS[:5] + (
    ConfigKey("hidden_activation", "hidden_activation", "gelu"),
    ConfigKey("max_positions", "max_position_embeddings", 8192),
    ConfigKey("pad_token_id", "pad_token_id", 50283),
    ConfigKey("layer_norm_epsilon", "norm_eps", 1e-5),
    ConfigKey("dropout", "embedding_dropout", 0.0),
    ConfigKey("attention_dropout", "attention_dropout", 0.0),
    ConfigKey("initializer_range", "initializer_range", 0.02),
    ConfigKey("local_attention_window", "local_attention", 128),
)
# Biases kerasbert's ModernBERT does not have: a config that switches one on is refused.
HF_BIAS_KEYS = ("attention_bias", "mlp_bias", "norm_bias")


def read_hf_config(hf_config):
    """The `EncoderConfig` fields of a ModernBERT `config.json` that no flat key holds: the
    rotary bases (`rope_parameters`, or the older `global_rope_theta` / `local_rope_theta`) and
    which layers are global (`layer_types`, or `global_attn_every_n_layers`). `ValueError`
    naming the key for what kerasbert cannot build (biases, a head activation other than GELU,
    an irregular layer pattern, rotary scaling)."""
    for key in HF_BIAS_KEYS + ("classifier_bias",):
        if hf_config.get(key):
            raise ValueError(f"{key} is true; kerasbert's ModernBERT has no biases")
    if hf_config.get("decoder_bias") is False:
        raise ValueError("decoder_bias is false; kerasbert's masked-LM decoder has a bias")
    if hf_config.get("classifier_activation", "gelu") != "gelu":
        raise ValueError(f"classifier_activation {hf_config['classifier_activation']!r} is not "
                         "supported (the heads' transform is GELU)")
    rope = hf_config.get("rope_parameters") or {}
    thetas = {}
    for layer_type, old_key, default in (("full_attention", "global_rope_theta",
                                          GLOBAL_ROPE_THETA),
                                         ("sliding_attention", "local_rope_theta",
                                          LOCAL_ROPE_THETA)):
        parameters = rope.get(layer_type) or {}
        if parameters.get("rope_type", "default") != "default":
            raise ValueError(f"rope_parameters.{layer_type}.rope_type "
                             f"{parameters['rope_type']!r} is not supported (only 'default')")
        thetas[layer_type] = float(parameters.get("rope_theta",
                                                  hf_config.get(old_key, default)))
    every = hf_config.get("global_attn_every_n_layers", 3)
    layer_types = hf_config.get("layer_types")
    if layer_types:
        globals_at = [index for index, kind in enumerate(layer_types) if kind == "full_attention"]
        every = globals_at[1] if len(globals_at) > 1 else len(layer_types)
        expected = ["sliding_attention" if index % every else "full_attention"
                    for index in range(len(layer_types))]
        if layer_types != expected:
            raise ValueError(f"layer_types {layer_types} is not a global layer every n layers "
                             "from the first, the pattern kerasbert builds")
    return dict(rotary_theta=thetas["full_attention"],
                local_rotary_theta=thetas["sliding_attention"], global_attention_every=every)


def write_hf_config(config):
    """The `config.json` fields `read_hf_config` reads, for `config`."""
    return {
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": config.rotary_theta},
            "sliding_attention": {"rope_type": "default",
                                  "rope_theta": config.local_rotary_theta}},
        "global_attn_every_n_layers": config.global_attention_every,
        "layer_types": ["sliding_attention" if index % config.global_attention_every
                        else "full_attention" for index in range(config.num_layers)],
        **{key: False for key in HF_BIAS_KEYS},
        "classifier_bias": False,
        "decoder_bias": True,
        "classifier_activation": "gelu",
        # ModernBertConfig's defaults name ids of its own vocabulary; kerasbert keeps none.
        "bos_token_id": None, "eos_token_id": None, "cls_token_id": None, "sep_token_id": None,
    }


HF_EMBEDDINGS = (
    ("embeddings.tok_embeddings", "embeddings/token_embedding", EMBEDDING),
    ("embeddings.norm", "embeddings/layer_norm", LAYER_NORM_NO_BIAS),
)
HF_LAYER = (
    ("layers.{n}.attn.Wqkv", "transformer_layer_{n}/attention/qkv", LINEAR_NO_BIAS),
    ("layers.{n}.attn.Wo", "transformer_layer_{n}/attention/output", LINEAR_NO_BIAS),
    ("layers.{n}.mlp_norm", "transformer_layer_{n}/output_layer_norm", LAYER_NORM_NO_BIAS),
    ("layers.{n}.mlp.Wi", "transformer_layer_{n}/intermediate", LINEAR_NO_BIAS),
    ("layers.{n}.mlp.Wo", "transformer_layer_{n}/output", LINEAR_NO_BIAS),
)
# The first layer's attention norm is the identity (the embedding norm stands in).
HF_LAYER_AFTER_FIRST = (
    ("layers.{n}.attn_norm", "transformer_layer_{n}/attention_layer_norm", LAYER_NORM_NO_BIAS),
)
HF_HEAD_TRANSFORM = (("head.dense", "head_dense", LINEAR_NO_BIAS),
                     ("head.norm", "head_layer_norm", LAYER_NORM_NO_BIAS))


def _task_head(output_layer):
    return HFTaskHead(HF_HEAD_TRANSFORM + (("classifier", output_layer, LINEAR),),
                      "classifier_dropout", dropout_default=0.0)


CONVERSION = ConversionTables(
    display_name="ModernBERT",
    hf=HuggingFaceTables(
        model_type="modernbert", base_model_prefix="model", architecture_stem="ModernBert",
        encoder=EncoderRows(embeddings=HF_EMBEDDINGS, layer=HF_LAYER,
                            after_first_layer=HF_LAYER_AFTER_FIRST,
                            final=(("final_norm", "final_layer_norm", LAYER_NORM_NO_BIAS),)),
        config_keys=HF_CONFIG_KEYS,
        pretraining_architectures={"ModernBertForMaskedLM": ("mlm",)},
        heads={"mlm": (("head.dense", "mlm_head/dense", LINEAR_NO_BIAS),
                       ("head.norm", "mlm_head/layer_norm", LAYER_NORM_NO_BIAS))},
        mlm_bias="decoder.bias", tied_decoder="decoder",
        task_heads={"sequence_classification": _task_head("classifier"),
                    "multiple_choice": _task_head("classifier"),
                    "token_classification": _task_head("classifier"),
                    "question_answering": _task_head("qa_outputs")},
        fixed_fields=dict(type_vocab_size=0, use_pooler=False, gated_mlp=True, pre_norm=True,
                          use_bias=False),
        read_extra_config=read_hf_config, write_extra_config=write_hf_config,
        pooling_key="classifier_pooling"),
    keras_hub=None,
)


FAMILY = Family(name="modernbert", model=MODEL, tokenizer=TOKENIZER, conversion=CONVERSION)
