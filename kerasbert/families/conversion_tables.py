"""What a family's checkpoints call things: the records its CONVERSION section fills.

Three checkpoint formats, one record each: `HuggingFaceTables` (`transformers`), `GoogleTables`
(the original TF1 checkpoints of google-research/bert, albert and electra) and `KerasHubTables`
(keras-hub presets). `kerasbert.convert` holds the generic code that reads them: it expands the
row tables to variable names, reads and writes the config keys, and copies the weights.

A row is `(their_layer, kerasbert_layer, kind)`. `kind` (one of the constants below) fixes the
variable names on both sides and how a value is laid out; `kerasbert.convert` expands it. In
`their_layer` and `kerasbert_layer`, `{n}` stands for a distinct transformer layer, ALBERT's
`{group}` / `{inner}` for its group and the layer within it, and in Google's rows `{scope}` for
the encoder's variable scope and `{embeddings}` for the scope holding the embedding tables.

Example:
>>> from kerasbert import families
>>> hf = families.get("roberta").conversion.hf
>>> hf.encoder_architecture, hf.base_model_prefix
('RobertaModel', 'roberta')
>>> hf.encoder.layer[0]
('encoder.layer.{n}.attention.self.query', 'transformer_layer_{n}/attention/query', 'linear')
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional, Tuple

# Row kinds. Hugging Face: `LINEAR` (a PyTorch weight, stored `[out, in]`), `LAYER_NORM`,
# `EMBEDDING`, `LINEAR_NO_BIAS` / `LAYER_NORM_NO_BIAS` (a weight only). Google TF1: `DENSE`
# (stored `[in, out]`), `LAYER_NORM`, `OUTPUT_LAYER` (`output_weights` / `output_bias` of
# `run_pretraining.py`), `EMBEDDING` (the scope is the table), `VARIABLE` (the scope is one
# variable). keras-hub: `EMBEDDING`, `LAYER_NORM`, `DENSE`,
# `HEADS_IN` / `HEADS_OUT` (attention kernels with a heads axis), `OFFSET_POSITIONS` (a position
# table numbered from 0 where kerasbert numbers from `position_offset`).
LINEAR, DENSE, LAYER_NORM, EMBEDDING = "linear", "dense", "layer_norm", "embedding"
# Hugging Face layers without a bias (ModernBERT's): a weight only.
LINEAR_NO_BIAS, LAYER_NORM_NO_BIAS = "linear_no_bias", "layer_norm_no_bias"
OUTPUT_LAYER, VARIABLE = "output_layer", "variable"
HEADS_IN, HEADS_OUT, OFFSET_POSITIONS = "heads_in", "heads_out", "offset_positions"

# A config key without a default: reading a config that lacks it is an error.
REQUIRED = "required"

# keras-hub tokenizer asset formats.
WORDPIECE, BYTE_PAIR, SENTENCE_PIECE = "wordpiece", "byte_pair", "sentence_piece"

Row = Tuple[str, str, str]
Rows = Tuple[Row, ...]


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    """One `EncoderConfig` field as a checkpoint's config file names it.

    `default` is used when the key is missing or null (`REQUIRED`: an error; None: the
    `EncoderConfig` default). `written=False`: read when present, never written.

    >>> from kerasbert import families
    >>> families.get("albert").conversion.hf.config_keys[-1]
    ConfigKey(field='inner_group_num', key='inner_group_num', default=1, written=True)
    """

    field: str
    key: str
    default: Any = REQUIRED
    written: bool = True


@dataclasses.dataclass(frozen=True)
class EncoderRows:
    """An encoder's rows: the embeddings, the embedding projection (only where the config has
    one), one transformer layer (repeated per distinct layer; `after_first_layer`: rows of
    every layer but the first, such as ModernBERT's attention norm), the rows after the stack
    (`final`: a pre-norm encoder's final LayerNorm), the pooler (only where the config has
    one), and the kerasbert variables the format has no weights for (zero-filled).

    >>> from kerasbert import families
    >>> families.get("roberta").conversion.keras_hub.encoder.zeros
    ('embeddings/segment_embedding/embeddings',)
    """

    embeddings: Rows
    layer: Rows
    projection: Rows = ()
    pooler: Rows = ()
    zeros: Tuple[str, ...] = ()
    after_first_layer: Rows = ()
    final: Rows = ()


@dataclasses.dataclass(frozen=True)
class HFTaskHead:
    """A `*For<Task>` head of `transformers`: its rows and the `config.json` key of its dropout.

    `dropout_default`: the value when the key is missing (None: the encoder's
    `hidden_dropout_prob`, else 0.1). `extra_fields`: written as they are into `config.json`.

    >>> from kerasbert import families
    >>> families.get("albert").conversion.hf.task_heads["question_answering"].dropout_key
    'classifier_dropout_prob'
    """

    rows: Rows
    dropout_key: str
    dropout_default: Optional[float] = None
    extra_fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class HuggingFaceTables:
    """A family as `transformers` has it.

    - `model_type` / `base_model_prefix`: `config.json`'s `model_type`; the prefix of the
      encoder's weights in a model with heads (`bert.` in `bert.embeddings...`).
    - `architecture_stem`: `Bert` of `BertModel`, `BertForMaskedLM`, ...
    - `config_keys`: the `EncoderConfig` fields `config.json` holds; `fixed_fields`: those
      `transformers` fixes (not in `config.json`).
    - `pretraining_architectures`: class name -> the pretraining heads it has.
    - `heads`: pretraining head -> rows; `mlm_bias`: the MLM output bias (a parameter of its
      own); `tied_decoder`: the decoder module some checkpoints also store (its weight is the
      word embeddings, its bias the MLM bias).
    - `task_heads`: fine-tuning task -> `HFTaskHead`.
    - `read_extra_config(hf_config, source)` -> `EncoderConfig` fields that no flat key holds
      (ModernBERT's rotary bases and layer types); `write_extra_config(config)` -> the
      `config.json` fields for them. `pooling_key`: the key naming how sequence-level heads
      pool (`classifier_pooling`: "cls" or "mean").

    >>> from kerasbert import families
    >>> hf = families.get("bert").conversion.hf
    >>> hf.pretraining_architectures["BertForPreTraining"], hf.mlm_bias
    (('mlm', 'nsp'), 'cls.predictions.bias')
    """

    model_type: str
    base_model_prefix: str
    architecture_stem: str
    encoder: EncoderRows
    config_keys: Tuple[ConfigKey, ...]
    pretraining_architectures: Mapping[str, Tuple[str, ...]]
    heads: Mapping[str, Rows]
    mlm_bias: str
    tied_decoder: str
    task_heads: Mapping[str, HFTaskHead]
    fixed_fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    read_extra_config: Optional[Callable] = None
    write_extra_config: Optional[Callable] = None
    pooling_key: Optional[str] = None

    @property
    def encoder_architecture(self):
        """The bare encoder's class name (`BertModel`)."""
        return self.architecture_stem + "Model"


@dataclasses.dataclass(frozen=True)
class ModelSizes:
    """Pretraining hyperparameters from which a family's code derives the encoder (ELECTRA's
    `model_size`): the hidden size and depth of each size, the embedding size of the small
    one, the default vocabulary, and the generator's default size fractions.

    >>> from kerasbert import families
    >>> families.get("electra").conversion.google.model_sizes.sizes["base"]
    (768, 12)
    """

    sizes: Mapping[str, Tuple[int, int]]
    small_embedding_size: int
    default_vocab_size: int
    generator_fractions: Mapping[str, float]


@dataclasses.dataclass(frozen=True)
class GoogleTables:
    """A family as Google's original TF1 code saves it.

    - `scope`: the encoder's variable scope; `markers`: variable-name beginnings that tell the
      family (the longest matching one decides: ALBERT's encoder is under `bert/` too).
    - `config_keys`: the `EncoderConfig` fields of its config file (`hidden_act` apart);
      `activation_names`: its `hidden_act` names that mean another kerasbert activation;
      `unused_features`: config keys of variants kerasbert does not build -> the value that
      means "not used".
    - `heads`: pretraining head -> rows.
    - `model_sizes`: when its config may give hyperparameters instead of sizes.
    - `generator_scope` / `other_model_scopes`: a checkpoint holding a second model (ELECTRA's
      generator): its scope, and for each model the scopes of the other, left out.

    >>> from kerasbert import families
    >>> google = families.get("albert").conversion.google
    >>> google.scope, google.activation_names
    ('bert', {'gelu': 'gelu_new'})
    """

    scope: str
    markers: Tuple[str, ...]
    encoder: EncoderRows
    config_keys: Tuple[ConfigKey, ...]
    heads: Mapping[str, Rows]
    activation_names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    unused_features: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    model_sizes: Optional[ModelSizes] = None
    generator_scope: Optional[str] = None
    other_model_scopes: Mapping[str, Tuple[str, ...]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class KerasHubTables:
    """A family as keras-hub has it: its backbone class, constructor arguments
    (`EncoderConfig` field -> argument), the rows of its variables, the padding id of its
    tokenizer, its tokenizer class and asset format (and whether it gives token types), and
    the `EncoderConfig` fields kerasbert fixes to hold what keras-hub computes.

    >>> from kerasbert import families
    >>> keras_hub = families.get("electra").conversion.keras_hub
    >>> keras_hub.backbone_class, keras_hub.config_keys["vocab_size"]
    ('ElectraBackbone', 'vocab_size')
    """

    backbone_class: str
    config_keys: Mapping[str, str]
    encoder: EncoderRows
    default_pad_token_id: int
    tokenizer_class: str
    tokenizer_format: str
    tokenizer_has_segments: bool = True
    fixed_fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ConversionTables:
    """A family's Hugging Face / Google TF1 / keras-hub weight-name tables and config keys.

    `display_name` names the family in messages; `positions_after_padding`: its checkpoints
    number positions from `pad_token_id + 1` (RoBERTa's), not from 0. `google` is None for a
    family Google released no TF1 checkpoints of, `keras_hub` for one keras-hub has no backbone
    of.

    >>> from kerasbert import families
    >>> roberta = families.get("roberta").conversion
    >>> roberta.display_name, roberta.positions_after_padding, roberta.google
    ('RoBERTa', True, None)
    """

    display_name: str
    hf: HuggingFaceTables
    keras_hub: Optional[KerasHubTables]
    google: Optional[GoogleTables] = None
    positions_after_padding: bool = False


def without_rows(rows, kerasbert_layer):
    """`rows` without the one(s) of `kerasbert_layer` (a family that lacks that layer).

    >>> without_rows((("a", "x", LINEAR), ("b", "y", LINEAR)), "x")
    (('b', 'y', 'linear'),)
    """
    return tuple(row for row in rows if row[1] != kerasbert_layer)
