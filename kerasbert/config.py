"""`EncoderConfig`: the one architecture description shared by all five families."""

import dataclasses
from typing import Optional

from kerasbert import families
from kerasbert.families.model_traits import ModelTraits
from kerasbert.layers.activations import ACTIVATION_NAMES


# The encoder switches' values when neither the caller nor the family sets them: BERT's.
SWITCH_DEFAULTS = dict(global_attention_every=1, gated_mlp=False, pre_norm=False, use_bias=True)


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Architecture of a BERT, RoBERTa, ALBERT, ELECTRA or DistilBERT encoder.

    Family differences are fields, so one builder serves all five families; a
    family's defaults and which values it allows are its `families.get(family).model`
    traits:

    - `embedding_size`: width of the embedding tables; when it differs from
      `hidden_size` (ALBERT, ELECTRA small) a dense projection maps it to the
      hidden size. ALBERT always has that projection, even when equal.
    - `num_hidden_groups` / `inner_group_num`: ALBERT's parameter sharing;
      `num_layers` layer applications draw on `num_hidden_groups` groups of
      `inner_group_num` distinct layers each.
    - `position_offset`: 0 for plain positions `0..seq-1`; RoBERTa uses
      `pad_token_id + 1`, numbering non-padding tokens from the offset and
      giving padding tokens the position `position_offset - 1`.
    - `use_pooler`: whether the encoder has the tanh pooler over [CLS];
      by default every family but ELECTRA and DistilBERT has one.
    - `type_vocab_size`: rows of the segment embedding; 0, DistilBERT's and
      its default, means no segment embeddings (`segment_ids` are accepted
      and ignored). Every other family has at least one row (default 2).
    - `sinusoidal_positions`: DistilBERT's fixed sine/cosine position table
      (not trained) instead of a learned one.
    - `rotary_theta`: rotary position embeddings of that base on queries and keys
      instead of a position table (ModernBERT: 160,000); `local_rotary_theta`: the
      base on local-window layers (default: `rotary_theta`; ModernBERT: 10,000).
    - `local_attention_window`: layers other than every `global_attention_every`-th
      (layers 0, n, 2n, ... are global) attend only within this many tokens in total
      (`|i - j| <= window // 2`), in blocks: linear time and memory in length.
    - `gated_mlp`: GeGLU feed-forward (`W2 (act(x W1a) * x W1b)`); `pre_norm`:
      pre-LayerNorm blocks and a final LayerNorm after the stack (the first
      layer's attention reads the embedding LayerNorm's output as it is);
      `use_bias=False`: no biases in any projection or LayerNorm of the encoder.
      A switch left unset takes its family's value (`ModelTraits.encoder_defaults`:
      ModernBERT's are all on), else the BERT behaviour (off, biases on).

    Every field is validated on creation; a bad value raises `ValueError`
    naming the field.

    Example:
    >>> cfg = EncoderConfig(family="bert", vocab_size=100, hidden_size=32,
    ...                     num_layers=2, num_heads=2, intermediate_size=64)
    >>> cfg.head_size
    16
    >>> cfg.replace(num_layers=4).num_layers
    4
    """

    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    hidden_activation: str = "gelu"
    embedding_size: Optional[int] = None
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    max_positions: int = 512
    type_vocab_size: Optional[int] = None
    pad_token_id: int = 0
    position_offset: int = 0
    layer_norm_epsilon: float = 1e-12
    dropout: float = 0.1
    attention_dropout: float = 0.1
    initializer_range: float = 0.02
    use_pooler: Optional[bool] = None
    sinusoidal_positions: bool = False
    rotary_theta: Optional[float] = None
    local_rotary_theta: Optional[float] = None
    local_attention_window: Optional[int] = None
    global_attention_every: Optional[int] = None
    gated_mlp: Optional[bool] = None
    pre_norm: Optional[bool] = None
    use_bias: Optional[bool] = None

    def __post_init__(self):
        if self.family not in families.NAMES:
            raise ValueError(
                f"EncoderConfig.family must be one of {families.NAMES}, got {self.family!r}")
        traits = self.family_traits
        if self.embedding_size is None:
            object.__setattr__(self, "embedding_size", self.hidden_size)
        if self.use_pooler is None:
            object.__setattr__(self, "use_pooler", traits.has_pooler_by_default)
        if self.type_vocab_size is None:
            object.__setattr__(self, "type_vocab_size", 2 if traits.has_segment_embeddings else 0)
        for name, value in {**SWITCH_DEFAULTS, **traits.encoder_defaults}.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if self.local_rotary_theta is None and self.rotary_theta is not None:
            object.__setattr__(self, "local_rotary_theta", self.rotary_theta)
        self._validate()
        self._validate_attention_switches()

    def _validate(self):
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                     "embedding_size", "num_hidden_groups", "inner_group_num", "max_positions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"EncoderConfig.{name} must be a positive integer, got {value!r}")
        self._validate_family_fields()
        for name in ("pad_token_id", "position_offset"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"EncoderConfig.{name} must be a non-negative integer, got {value!r}")
        if self.hidden_activation not in ACTIVATION_NAMES:
            raise ValueError(
                f"EncoderConfig.hidden_activation must be one of {ACTIVATION_NAMES}, "
                f"got {self.hidden_activation!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"EncoderConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_heads ({self.num_heads})")
        if self.num_layers % self.num_hidden_groups:
            raise ValueError(
                f"EncoderConfig.num_layers ({self.num_layers}) must be divisible by "
                f"num_hidden_groups ({self.num_hidden_groups})")
        if not self.family_traits.shares_layers and (self.num_hidden_groups != 1 or
                                                     self.inner_group_num != 1):
            raise ValueError(
                "EncoderConfig.num_hidden_groups and inner_group_num must be 1 unless "
                f"family is 'albert' (family={self.family!r})")
        if self.pad_token_id >= self.vocab_size:
            raise ValueError(
                f"EncoderConfig.pad_token_id ({self.pad_token_id}) must be below "
                f"vocab_size ({self.vocab_size})")
        if self.position_offset >= self.max_positions:
            raise ValueError(
                f"EncoderConfig.position_offset ({self.position_offset}) leaves no positions "
                f"of max_positions ({self.max_positions})")
        for name in ("layer_norm_epsilon", "initializer_range"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"EncoderConfig.{name} must be a positive number, got {value!r}")
        if not isinstance(self.use_pooler, bool):
            raise ValueError(f"EncoderConfig.use_pooler must be True or False, got {self.use_pooler!r}")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(f"EncoderConfig.{name} must be in [0, 1), got {value!r}")

    def _validate_family_fields(self):
        traits = self.family_traits
        value = self.type_vocab_size
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(
                f"EncoderConfig.type_vocab_size must be a non-negative integer, got {value!r}")
        if not traits.has_segment_embeddings and value != 0:
            raise ValueError(
                f"EncoderConfig.type_vocab_size must be 0 for family {self.family!r} "
                f"(it has no segment embeddings), got {value}")
        if not traits.may_have_pooler and self.use_pooler:
            raise ValueError(
                f"EncoderConfig.use_pooler must be False for family {self.family!r} "
                "(it has no pooler)")
        if not traits.may_project_embeddings and self.embedding_size != self.hidden_size:
            raise ValueError(
                f"EncoderConfig.embedding_size ({self.embedding_size}) must equal hidden_size "
                f"({self.hidden_size}) for family {self.family!r}")
        if traits.has_segment_embeddings and value == 0:
            raise ValueError(
                f"EncoderConfig.type_vocab_size must be positive for family {self.family!r}, "
                "got 0 (only DistilBERT has no segment embeddings)")
        if not isinstance(self.sinusoidal_positions, bool):
            raise ValueError(f"EncoderConfig.sinusoidal_positions must be True or False, "
                             f"got {self.sinusoidal_positions!r}")
        if self.sinusoidal_positions and not traits.may_use_sinusoidal_positions:
            raise ValueError(
                f"EncoderConfig.sinusoidal_positions is only DistilBERT's option; family "
                f"{self.family!r} learns its positions")

    def _validate_attention_switches(self):
        for name in ("gated_mlp", "pre_norm", "use_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"EncoderConfig.{name} must be True or False, "
                                 f"got {getattr(self, name)!r}")
        for name in ("rotary_theta", "local_rotary_theta"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, (int, float)) or value <= 0):
                raise ValueError(f"EncoderConfig.{name} must be a positive number or None, "
                                 f"got {value!r}")
        if self.rotary_theta is None and self.local_rotary_theta is not None:
            raise ValueError("EncoderConfig.local_rotary_theta needs rotary_theta (rotary "
                             "positions)")
        if self.rotary_theta is not None and self.head_size % 2:
            raise ValueError(f"EncoderConfig.rotary_theta needs an even head size, got "
                             f"{self.head_size}")
        if self.rotary_theta is not None and self.sinusoidal_positions:
            raise ValueError("EncoderConfig.rotary_theta and sinusoidal_positions exclude each "
                             "other (rotary positions have no position table)")
        window, every = self.local_attention_window, self.global_attention_every
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                                   or window < 2):
            raise ValueError(f"EncoderConfig.local_attention_window must be an integer >= 2 "
                             f"or None, got {window!r}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"EncoderConfig.global_attention_every must be a positive integer, "
                             f"got {every!r}")

    @property
    def has_position_table(self) -> bool:
        """Whether positions come from a table added to the embeddings (not rotary)."""
        return self.rotary_theta is None

    def layer_attention(self, index) -> tuple:
        """`(rotary_theta, local_window)` of distinct layer `index`: a global layer (every
        `global_attention_every`-th from 0, or every layer without a window) has
        `(rotary_theta, None)`, a local one `(local_rotary_theta, local_attention_window)`.

        >>> cfg = EncoderConfig(family="bert", vocab_size=100, hidden_size=32, num_layers=4,
        ...                     num_heads=2, intermediate_size=64, rotary_theta=160000.0,
        ...                     local_rotary_theta=10000.0, local_attention_window=8,
        ...                     global_attention_every=3)
        >>> [cfg.layer_attention(index) for index in (0, 1, 3)]
        [(160000.0, None), (10000.0, 8), (160000.0, None)]
        """
        if self.local_attention_window is None or index % self.global_attention_every == 0:
            return self.rotary_theta, None
        return self.local_rotary_theta, self.local_attention_window

    @property
    def family_traits(self) -> ModelTraits:
        """What this config's family changes in the model (`families.get(family).model`)."""
        return families.get(self.family).model

    @property
    def has_segment_embeddings(self) -> bool:
        return self.type_vocab_size > 0

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def max_sequence_length(self) -> int:
        """The longest input sequence the position table can number."""
        return self.max_positions - self.position_offset

    @property
    def has_embedding_projection(self) -> bool:
        return (self.family_traits.always_projects_embeddings
                or self.embedding_size != self.hidden_size)

    @property
    def num_distinct_layers(self) -> int:
        """How many transformer layers own weights (fewer than applied ones for ALBERT)."""
        if self.family_traits.shares_layers:
            return self.num_hidden_groups * self.inner_group_num
        return self.num_layers

    @property
    def layer_schedule(self) -> tuple:
        """Which distinct layer each application uses, in order.

        ALBERT applies its group `i * num_hidden_groups // num_layers` at
        step `i`, and a group runs its `inner_group_num` layers in turn.
        """
        if not self.family_traits.shares_layers:
            return tuple(range(self.num_layers))
        steps_per_group = self.num_layers // self.num_hidden_groups
        return tuple(
            (step // steps_per_group) * self.inner_group_num + inner
            for step in range(self.num_layers)
            for inner in range(self.inner_group_num))

    def replace(self, **changes) -> "EncoderConfig":
        """A copy with some fields changed, validated again."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"EncoderConfig has no field(s) {unknown}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "EncoderConfig":
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"EncoderConfig has no field(s) {unknown}")
        return cls(**values)
