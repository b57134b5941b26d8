"""The name table: variables of Google's original TF1 checkpoints -> kerasbert variable paths.

A table row is `(google_scope, kerasbert_layer, kind)`; `kind` fixes the
variable names on both sides:

- `DENSE`: `kernel`/`bias` -> `kernel`/`bias`. TF1 dense kernels are stored
  `[in, out]`, as Keras keeps them: no transpose.
- `LAYER_NORM`: `gamma`/`beta` -> `gamma`/`beta`.
- `OUTPUT_LAYER`: the hand-made classifier of `run_pretraining.py`,
  `output_weights` (stored `[out, in]`, so transposed) / `output_bias` -> `kernel`/`bias`.
- `EMBEDDING`: the scope is the table itself -> `embeddings`.
- `VARIABLE`: the scope is one variable, the layer path one variable.

`{scope}` stands for the encoder's variable scope (`bert` for BERT and ALBERT,
`electra` for ELECTRA's discriminator, `generator` for its generator),
`{embeddings}` for the scope holding the embedding tables (ELECTRA's generator
reads the discriminator's `electra/embeddings` unless trained with untied
embeddings), `{n}` for a distinct transformer layer, `{group}`/`{inner}` for
ALBERT's group and layer within it.
"""

DENSE, LAYER_NORM, OUTPUT_LAYER, EMBEDDING, VARIABLE = (
    "dense", "layer_norm", "output_layer", "embedding", "variable")

# kind -> ((google variable, kerasbert variable, transpose), ...); None: the row names it whole.
PARAMETERS = {
    DENSE: (("kernel", "kernel", False), ("bias", "bias", False)),
    LAYER_NORM: (("gamma", "gamma", False), ("beta", "beta", False)),
    OUTPUT_LAYER: (("output_weights", "kernel", True), ("output_bias", "bias", False)),
    EMBEDDING: ((None, "embeddings", False),),
    VARIABLE: ((None, None, False),),
}

# Training state, not model weights: read past without a word.
SKIPPED_SUFFIXES = ("/adam_m", "/adam_v")
SKIPPED_NAMES = ("global_step",)

_EMBEDDINGS = (
    ("{embeddings}/embeddings/word_embeddings", "embeddings/token_embedding", EMBEDDING),
    ("{embeddings}/embeddings/position_embeddings", "embeddings/position_embedding", EMBEDDING),
    ("{embeddings}/embeddings/token_type_embeddings", "embeddings/segment_embedding", EMBEDDING),
    ("{embeddings}/embeddings/LayerNorm", "embeddings/layer_norm", LAYER_NORM),
)

_BERT_LAYER = (
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

_ALBERT_LAYER_SCOPE = "{scope}/encoder/transformer/group_{group}/inner_group_{inner}"
_ALBERT_LAYER = (
    (_ALBERT_LAYER_SCOPE + "/attention_1/self/query", "transformer_layer_{n}/attention/query",
     DENSE),
    (_ALBERT_LAYER_SCOPE + "/attention_1/self/key", "transformer_layer_{n}/attention/key", DENSE),
    (_ALBERT_LAYER_SCOPE + "/attention_1/self/value", "transformer_layer_{n}/attention/value",
     DENSE),
    (_ALBERT_LAYER_SCOPE + "/attention_1/output/dense", "transformer_layer_{n}/attention/output",
     DENSE),
    (_ALBERT_LAYER_SCOPE + "/LayerNorm", "transformer_layer_{n}/attention_layer_norm",
     LAYER_NORM),
    (_ALBERT_LAYER_SCOPE + "/ffn_1/intermediate/dense", "transformer_layer_{n}/intermediate",
     DENSE),
    (_ALBERT_LAYER_SCOPE + "/ffn_1/intermediate/output/dense", "transformer_layer_{n}/output",
     DENSE),
    (_ALBERT_LAYER_SCOPE + "/LayerNorm_1", "transformer_layer_{n}/output_layer_norm", LAYER_NORM),
)

_POOLER = (("{scope}/pooler/dense", "pooler/dense", DENSE),)

ENCODER_TABLES = {
    "bert": {"embeddings": _EMBEDDINGS, "projection": (), "layer": _BERT_LAYER,
             "pooler": _POOLER},
    "albert": {"embeddings": _EMBEDDINGS,
               "projection": (("{scope}/encoder/embedding_hidden_mapping_in",
                               "embeddings/projection", DENSE),),
               "layer": _ALBERT_LAYER, "pooler": _POOLER},
    "electra": {"embeddings": _EMBEDDINGS,
                "projection": (("{scope}/embeddings_project", "embeddings/projection", DENSE),),
                "layer": _BERT_LAYER, "pooler": ()},
}

# The encoder's scope: BERT and ALBERT keep `bert`; ELECTRA's two encoders have their own.
ENCODER_SCOPES = {"bert": "bert", "albert": "bert", "electra": "electra"}
ELECTRA_GENERATOR_SCOPE = "generator"
# An ELECTRA checkpoint holds both models; importing one leaves the other's scopes out.
ELECTRA_OTHER_MODEL_SCOPES = {"discriminator": ("generator/", "generator_predictions/"),
                              "generator": ("electra/", "discriminator_predictions/")}

# Variable-name beginnings that tell the family, checked in this order (ALBERT's
# encoder lives under `bert/` too, but only it has `transformer/` groups and the projection).
FAMILY_MARKERS = (
    ("electra", ("electra/", "generator/", "discriminator_predictions/",
                 "generator_predictions/")),
    ("albert", ("bert/encoder/transformer/", "bert/encoder/embedding_hidden_mapping_in/")),
    ("bert", ("bert/",)),
)


def encoder_name_map(config, scope=None, embeddings_scope=None):
    """`{google_variable: (kerasbert_variable_path, transpose)}` for an encoder of `config`
    under `scope` (default: the family's), its embedding tables under `embeddings_scope`
    (default: `scope`).

    >>> from kerasbert import EncoderConfig
    >>> config = EncoderConfig(family="albert", vocab_size=50, hidden_size=8, num_layers=4,
    ...                        num_heads=2, intermediate_size=16, embedding_size=4,
    ...                        num_hidden_groups=2)
    >>> names = encoder_name_map(config)
    >>> names["bert/encoder/transformer/group_1/inner_group_0/ffn_1/intermediate/dense/kernel"]
    ('transformer_layer_1/intermediate/kernel', False)
    """
    fields = {"scope": scope or ENCODER_SCOPES[config.family]}
    fields["embeddings"] = embeddings_scope or fields["scope"]
    table = ENCODER_TABLES[config.family]
    rows = [(row, fields) for row in table["embeddings"]]
    if config.has_embedding_projection:
        rows += [(row, fields) for row in table["projection"]]
    for n in range(config.num_distinct_layers):
        group, inner = divmod(n, config.inner_group_num)
        rows += [(row, dict(fields, n=n, group=group, inner=inner)) for row in table["layer"]]
    if config.use_pooler:
        rows += [(row, fields) for row in table["pooler"]]
    return expand_modules([(google.format(**values), ours.format(**values), kind)
                           for (google, ours, kind), values in rows])


def expand_modules(modules):
    """Expand `(google_scope, kerasbert_layer, kind)` rows to variable-level name pairs."""
    names = {}
    for google_scope, our_layer, kind in modules:
        for google_variable, our_variable, transpose in PARAMETERS[kind]:
            google_name = f"{google_scope}/{google_variable}" if google_variable else google_scope
            path = f"{our_layer}/{our_variable}" if our_variable else our_layer
            names[google_name] = (path, transpose)
    return names


# Pretraining heads, as Google's `run_pretraining.py` scripts name them.
HEAD_TABLES = {
    "bert": {
        "mlm": (("cls/predictions/transform/dense", "mlm_head/dense", DENSE),
                ("cls/predictions/transform/LayerNorm", "mlm_head/layer_norm", LAYER_NORM),
                ("cls/predictions/output_bias", "mlm_head/bias", VARIABLE)),
        "nsp": (("cls/seq_relationship", "nsp_head", OUTPUT_LAYER),),
    },
    "albert": {
        "mlm": (("cls/predictions/transform/dense", "mlm_head/dense", DENSE),
                ("cls/predictions/transform/LayerNorm", "mlm_head/layer_norm", LAYER_NORM),
                ("cls/predictions/output_bias", "mlm_head/bias", VARIABLE)),
        "sop": (("cls/seq_relationship", "sop_head", OUTPUT_LAYER),),
    },
    "electra": {
        # The generator's masked-LM head.
        "mlm": (("generator_predictions/dense", "mlm_head/dense", DENSE),
                ("generator_predictions/LayerNorm", "mlm_head/layer_norm", LAYER_NORM),
                ("generator_predictions/output_bias", "mlm_head/bias", VARIABLE)),
        # The discriminator's head: dense -> activation -> dense_1 (one logit per token).
        "rtd": (("discriminator_predictions/dense", "rtd_head/dense", DENSE),
                ("discriminator_predictions/dense_1", "rtd_head/prediction", DENSE)),
    },
}


def head_name_map(family, heads):
    """`{google_variable: (kerasbert_variable_path, transpose)}` for pretraining heads.

    >>> head_name_map("bert", ("nsp",))["cls/seq_relationship/output_weights"]
    ('nsp_head/kernel', True)
    """
    return expand_modules([row for head in heads for row in HEAD_TABLES[family][head]])


def head_scopes(family, head):
    """The variable scopes of one head's rows (a variable under one means the head is there)."""
    return tuple(google for google, _, _ in HEAD_TABLES[family][head])


def is_skipped(name):
    """Whether a checkpoint variable is training state (optimizer slots, the step counter)."""
    return name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES)


def query_kernel_name(scope, n):
    """The query kernel of BERT-style layer `n` under `scope` (`[hidden, hidden]`).

    >>> query_kernel_name("generator", 3)
    'generator/encoder/layer_3/attention/self/query/kernel'
    """
    return _BERT_LAYER[0][0].format(scope=scope, n=n) + "/kernel"
