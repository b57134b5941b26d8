"""The name tables: Hugging Face module names -> kerasbert layer paths, one table per family.

A table row is `(hf_module, kerasbert_layer, kind)`; `kind` fixes the
parameter names on both sides (`LINEAR`: weight/bias -> kernel (transposed)/bias,
`LAYER_NORM`: weight/bias -> gamma/beta, `EMBEDDING`: weight -> embeddings).
`{n}` stands for a distinct transformer layer; ALBERT's rows use `{group}` and
`{inner}` of that layer instead.
"""

LINEAR, LAYER_NORM, EMBEDDING = "linear", "layer_norm", "embedding"

PARAMETERS = {
    LINEAR: (("weight", "kernel"), ("bias", "bias")),
    LAYER_NORM: (("weight", "gamma"), ("bias", "beta")),
    EMBEDDING: (("weight", "embeddings"),),
}

# Checkpoint entries that are buffers, not weights: read and deliberately dropped.
IGNORED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")

_EMBEDDINGS = (
    ("embeddings.word_embeddings", "embeddings/token_embedding", EMBEDDING),
    ("embeddings.position_embeddings", "embeddings/position_embedding", EMBEDDING),
    ("embeddings.token_type_embeddings", "embeddings/segment_embedding", EMBEDDING),
    ("embeddings.LayerNorm", "embeddings/layer_norm", LAYER_NORM),
)

_BERT_LAYER = (
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

_ALBERT_LAYER_PREFIX = "encoder.albert_layer_groups.{group}.albert_layers.{inner}"
_ALBERT_LAYER = (
    (_ALBERT_LAYER_PREFIX + ".attention.query", "transformer_layer_{n}/attention/query", LINEAR),
    (_ALBERT_LAYER_PREFIX + ".attention.key", "transformer_layer_{n}/attention/key", LINEAR),
    (_ALBERT_LAYER_PREFIX + ".attention.value", "transformer_layer_{n}/attention/value", LINEAR),
    (_ALBERT_LAYER_PREFIX + ".attention.dense", "transformer_layer_{n}/attention/output", LINEAR),
    (_ALBERT_LAYER_PREFIX + ".attention.LayerNorm", "transformer_layer_{n}/attention_layer_norm",
     LAYER_NORM),
    (_ALBERT_LAYER_PREFIX + ".ffn", "transformer_layer_{n}/intermediate", LINEAR),
    (_ALBERT_LAYER_PREFIX + ".ffn_output", "transformer_layer_{n}/output", LINEAR),
    (_ALBERT_LAYER_PREFIX + ".full_layer_layer_norm", "transformer_layer_{n}/output_layer_norm",
     LAYER_NORM),
)

_DISTILBERT_LAYER_PREFIX = "transformer.layer.{n}"
_DISTILBERT_LAYER = (
    (_DISTILBERT_LAYER_PREFIX + ".attention.q_lin", "transformer_layer_{n}/attention/query", LINEAR),
    (_DISTILBERT_LAYER_PREFIX + ".attention.k_lin", "transformer_layer_{n}/attention/key", LINEAR),
    (_DISTILBERT_LAYER_PREFIX + ".attention.v_lin", "transformer_layer_{n}/attention/value", LINEAR),
    (_DISTILBERT_LAYER_PREFIX + ".attention.out_lin", "transformer_layer_{n}/attention/output",
     LINEAR),
    (_DISTILBERT_LAYER_PREFIX + ".sa_layer_norm", "transformer_layer_{n}/attention_layer_norm",
     LAYER_NORM),
    (_DISTILBERT_LAYER_PREFIX + ".ffn.lin1", "transformer_layer_{n}/intermediate", LINEAR),
    (_DISTILBERT_LAYER_PREFIX + ".ffn.lin2", "transformer_layer_{n}/output", LINEAR),
    (_DISTILBERT_LAYER_PREFIX + ".output_layer_norm", "transformer_layer_{n}/output_layer_norm",
     LAYER_NORM),
)

ENCODER_TABLES = {
    "bert": {"embeddings": _EMBEDDINGS, "layer": _BERT_LAYER,
             "pooler": (("pooler.dense", "pooler/dense", LINEAR),)},
    "roberta": {"embeddings": _EMBEDDINGS, "layer": _BERT_LAYER,
                "pooler": (("pooler.dense", "pooler/dense", LINEAR),)},
    "albert": {"embeddings": _EMBEDDINGS + (
                   ("encoder.embedding_hidden_mapping_in", "embeddings/projection", LINEAR),),
               "layer": _ALBERT_LAYER,
               "pooler": (("pooler", "pooler/dense", LINEAR),)},
    "electra": {"embeddings": _EMBEDDINGS + (
                    ("embeddings_project", "embeddings/projection", LINEAR),),
                "layer": _BERT_LAYER,
                "pooler": ()},
    "distilbert": {"embeddings": tuple(row for row in _EMBEDDINGS
                                       if row[1] != "embeddings/segment_embedding"),
                   "layer": _DISTILBERT_LAYER,
                   "pooler": ()},
}


def encoder_modules(table, config):
    """The `(their_module, kerasbert_layer, kind)` rows of an encoder of `config`, from a family
    table shaped like `ENCODER_TABLES[family]` (`embeddings`, `layer` with `{n}` / `{group}` /
    `{inner}` placeholders, `pooler`); other checkpoint formats' tables reuse it."""
    modules = [row for row in table["embeddings"]
               if row[1] != "embeddings/projection" or config.has_embedding_projection]
    for n in range(config.num_distinct_layers):
        group, inner = divmod(n, config.inner_group_num)
        modules += [(theirs.format(n=n, group=group, inner=inner), ours.format(n=n), kind)
                    for theirs, ours, kind in table["layer"]]
    if config.use_pooler:
        modules += list(table["pooler"])
    return modules


def encoder_name_map(config):
    """`{hf_parameter_name: (kerasbert_variable_path, transpose)}` for an encoder of `config`."""
    return expand_modules(encoder_modules(ENCODER_TABLES[config.family], config))


def expand_modules(modules):
    """Expand `(hf_module, kerasbert_layer, kind)` rows to parameter-level name pairs."""
    names = {}
    for hf_module, our_layer, kind in modules:
        for hf_parameter, our_variable in PARAMETERS[kind]:
            names[f"{hf_module}.{hf_parameter}"] = (f"{our_layer}/{our_variable}", kind == LINEAR
                                                    and our_variable == "kernel")
    return names


def normalize_hf_name(name):
    """Map legacy parameter names (`LayerNorm.gamma`/`beta`) to the current ones."""
    if name.endswith(".gamma"):
        return name[: -len("gamma")] + "weight"
    if name.endswith(".beta"):
        return name[: -len("beta")] + "bias"
    return name


# Pretraining heads: `(hf_module, kerasbert_layer, kind)` rows per family and head, the MLM output
# bias (a parameter of its own), and the tied decoder tensors older checkpoints also store.
HEAD_TABLES = {
    "bert": {
        "mlm": (("cls.predictions.transform.dense", "mlm_head/dense", LINEAR),
                ("cls.predictions.transform.LayerNorm", "mlm_head/layer_norm", LAYER_NORM)),
        "nsp": (("cls.seq_relationship", "nsp_head", LINEAR),),
    },
    "roberta": {
        "mlm": (("lm_head.dense", "mlm_head/dense", LINEAR),
                ("lm_head.layer_norm", "mlm_head/layer_norm", LAYER_NORM)),
    },
    "albert": {
        "mlm": (("predictions.dense", "mlm_head/dense", LINEAR),
                ("predictions.LayerNorm", "mlm_head/layer_norm", LAYER_NORM)),
        "sop": (("sop_classifier.classifier", "sop_head", LINEAR),),
    },
    "electra": {
        "mlm": (("generator_predictions.dense", "mlm_head/dense", LINEAR),
                ("generator_predictions.LayerNorm", "mlm_head/layer_norm", LAYER_NORM)),
        "rtd": (("discriminator_predictions.dense", "rtd_head/dense", LINEAR),
                ("discriminator_predictions.dense_prediction", "rtd_head/prediction", LINEAR)),
    },
    "distilbert": {
        "mlm": (("vocab_transform", "mlm_head/dense", LINEAR),
                ("vocab_layer_norm", "mlm_head/layer_norm", LAYER_NORM)),
    },
}
MLM_BIAS = {"bert": "cls.predictions.bias", "roberta": "lm_head.bias",
            "albert": "predictions.bias", "electra": "generator_lm_head.bias",
            "distilbert": "vocab_projector.bias"}
# Tied copies: the decoder's weight is the word embedding matrix, its bias the MLM bias.
TIED_DECODER = {"bert": "cls.predictions.decoder", "roberta": "lm_head.decoder",
                "albert": "predictions.decoder", "electra": "generator_lm_head",
                "distilbert": "vocab_projector"}


def head_name_map(family, heads):
    """`{hf_parameter_name: (kerasbert_variable_path, transpose)}` for the heads of a family."""
    modules = [row for head in heads for row in HEAD_TABLES[family].get(head, ())]
    names = expand_modules(modules)
    if "mlm" in heads:
        names[MLM_BIAS[family]] = ("mlm_head/bias", False)
    return names


# Fine-tuning heads: `(hf_module, kerasbert_layer, kind)` rows per family and task.
_CLASSIFIER = (("classifier", "classifier", LINEAR),)
_CLASSIFICATION_HEAD = (("classifier.dense", "classifier_dense", LINEAR),
                        ("classifier.out_proj", "classifier", LINEAR))
_SPAN = (("qa_outputs", "qa_outputs", LINEAR),)
_PRE_CLASSIFIER = (("pre_classifier", "classifier_dense", LINEAR),
                   ("classifier", "classifier", LINEAR))
TASK_HEAD_TABLES = {
    ("sequence_classification", "bert"): _CLASSIFIER,
    ("sequence_classification", "albert"): _CLASSIFIER,
    ("sequence_classification", "roberta"): _CLASSIFICATION_HEAD,
    ("sequence_classification", "electra"): _CLASSIFICATION_HEAD,
    ("multiple_choice", "bert"): _CLASSIFIER,
    ("multiple_choice", "albert"): _CLASSIFIER,
    ("multiple_choice", "roberta"): _CLASSIFIER,
    ("multiple_choice", "electra"): (("sequence_summary.summary", "classifier_dense", LINEAR),
                                     ("classifier", "classifier", LINEAR)),
    ("sequence_classification", "distilbert"): _PRE_CLASSIFIER,
    ("multiple_choice", "distilbert"): _PRE_CLASSIFIER,
    **{("token_classification", family): _CLASSIFIER for family in ENCODER_TABLES},
    **{("question_answering", family): _SPAN for family in ENCODER_TABLES},
}


def task_head_name_map(family, task):
    """`{hf_parameter_name: (kerasbert_variable_path, transpose)}` for a fine-tuning head."""
    return expand_modules(TASK_HEAD_TABLES[(task, family)])
