"""What a family changes in the model and its tokenizer: `ModelTraits`, `TokenizerTraits`.

Both are frozen records of named fields, read by the generic code (`EncoderConfig`, the
encoder and head builders, the zoo) through `families.get(config.family)`. Every family states
its presets and heads; a behaviour switch defaults to what BERT does, and a family file names
only the switches where it differs.
"""

import dataclasses
from typing import Mapping, Optional


@dataclasses.dataclass(frozen=True)
class SummaryHead:
    """How a family's sequence-level head (classification, multiple choice) reads a sequence.

    `source`: `"pooled_output"` (the encoder's tanh pooler) or `"first_token"`
    (the last layer at [CLS] / `<s>`). `inner_activation`: with a name, a dense
    layer of the hidden size and that activation comes before the output layer
    (RoBERTa's tanh, ELECTRA's GELU, DistilBERT's ReLU). `dropout_first`: dropout on the summary
    before the inner layer as well as after it.

    Example:
    >>> head = SummaryHead("first_token", "gelu")
    >>> head
    SummaryHead(source='first_token', inner_activation='gelu', dropout_first=True)
    >>> head.reads_pooler
    False
    """

    source: str
    inner_activation: Optional[str] = None
    dropout_first: bool = True

    @property
    def reads_pooler(self) -> bool:
        return self.source == "pooled_output"


def encoder_shape(layers, hidden, heads, intermediate):
    """The four size fields of an `EncoderConfig`, as a preset lists them.

    Example:
    >>> encoder_shape(2, 128, 2, 512)
    {'num_layers': 2, 'hidden_size': 128, 'num_heads': 2, 'intermediate_size': 512}
    """
    return dict(num_layers=layers, hidden_size=hidden, num_heads=heads,
                intermediate_size=intermediate)


@dataclasses.dataclass(frozen=True)
class ModelTraits:
    """A family's presets, config defaults and checks, behaviour switches and heads.

    - `presets`: kerasbert name -> (public checkpoint, `EncoderConfig` fields),
      in the order `kerasbert.zoo` lists them.
    - `pretraining_heads`: the heads of the family's original pretraining recipe.
    - `summary_heads`: task -> `SummaryHead` of its sequence-level heads.
    - `has_segment_embeddings`: whether the encoder has a segment (token type)
      table: default `type_vocab_size` 2, else 0 (and it must stay 0).
    - `has_pooler_by_default`: the default of `EncoderConfig.use_pooler`;
      `may_have_pooler`: whether `use_pooler=True` is allowed at all.
    - `may_project_embeddings`: whether `embedding_size` may differ from
      `hidden_size`; `always_projects_embeddings`: the E -> H projection is
      there even when they are equal (ALBERT).
    - `shares_layers`: layers shared in `num_hidden_groups` groups of
      `inner_group_num` layers (ALBERT); every other family has one weight set
      per layer.
    - `may_use_sinusoidal_positions`: `sinusoidal_positions=True` is allowed.
    - `dropout_after_attention`: dropout on the attention output before its
      residual LayerNorm (all but DistilBERT).
    - `mlm_activation`: the MLM transform's activation, or None for the
      encoder's `hidden_activation`.
    - `dropout_before_span_head`: dropout on the sequence before the span
      (question answering) output layer.
    - `fused_attention_projection`: one `qkv` projection in each attention layer, as the
      family's checkpoints store it (ModernBERT's `Wqkv`).
    - `encoder_defaults`: `EncoderConfig` switches the family sets unless a config gives
      them (ModernBERT's rotary bases, window, gated MLP, pre-norm, no biases).
    - `head_transform`: with an activation name, every fine-tuning head first maps the
      encoder's output through dense -> that activation -> LayerNorm (ModernBERT's
      prediction head; bias-free when the encoder is).

    Example:
    >>> from kerasbert import families
    >>> model = families.get("albert").model
    >>> model.shares_layers, model.pretraining_heads, "albert_base_v2" in model.presets
    (True, ('mlm', 'sop'), True)
    """

    presets: Mapping[str, tuple]
    pretraining_heads: tuple
    summary_heads: Mapping[str, SummaryHead]
    has_segment_embeddings: bool = True
    has_pooler_by_default: bool = True
    may_have_pooler: bool = True
    may_project_embeddings: bool = True
    always_projects_embeddings: bool = False
    shares_layers: bool = False
    may_use_sinusoidal_positions: bool = False
    dropout_after_attention: bool = True
    mlm_activation: Optional[str] = None
    dropout_before_span_head: bool = False
    fused_attention_projection: bool = False
    head_transform: Optional[str] = None
    encoder_defaults: Mapping[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TokenizerTraits:
    """A family's tokenizer kind, settings and special tokens.

    - `kind`: `"wordpiece"`, `"byte_pair"` or `"sentence_piece"`.
    - `special_tokens`: role (`pad`, `unk`, `cls`, `sep`, `mask`) -> token.
    - `options`: the tokenizer's constructor settings that are the same for
      every preset of the family.
    - `lowercase_when_uncased`: the tokenizer lowercases exactly when the
      preset's name says `uncased` (setting `lowercase` first in the options).

    Example:
    >>> from kerasbert import families
    >>> tokenizer = families.get("roberta").tokenizer
    >>> tokenizer.kind, tokenizer.special_tokens["cls"]
    ('byte_pair', '<s>')
    """

    kind: str = "wordpiece"
    special_tokens: Mapping[str, str] = dataclasses.field(default_factory=lambda: {
        "pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"})
    options: Mapping[str, object] = dataclasses.field(default_factory=dict)
    lowercase_when_uncased: bool = False
