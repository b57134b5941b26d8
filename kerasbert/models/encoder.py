"""The encoder: one functional model for BERT, RoBERTa, ALBERT, ELECTRA and DistilBERT."""

from collections.abc import Mapping

import keras

from kerasbert.config import EncoderConfig
from kerasbert.layers import Embeddings, Pooler, TransformerLayer
from kerasbert.layers.chunked_attention import QUERY_CHUNK
from kerasbert.layers.heads import gather_positions

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


class InputDtypeError(TypeError, ValueError):
    """An encoder input has a dtype other than integer.

    It is both a `TypeError` (what it is) and a `ValueError` (what Keras
    raises for incompatible inputs), so callers may catch either.
    """


@keras.saving.register_keras_serializable(package="kerasbert")
class Encoder(keras.Model):
    """A BERT-family encoder as a functional `keras.Model`.

    Inputs: a dict of int32 `[batch, seq]` tensors `token_ids`, `segment_ids`
    and `padding_mask` (1 for tokens, 0 for padding). Outputs: a dict with
    `sequence_output` `[batch, seq, hidden]`, `pooled_output` `[batch, hidden]`
    (every family but ELECTRA and DistilBERT) and, with `output_hidden_states=True`,
    `hidden_states`: the embedding output (after any projection) followed by
    the output of every applied transformer layer (the last one after the final LayerNorm
    of a pre-norm encoder, as `transformers` reports it).

    Args:
        config: an `EncoderConfig` (or its dict form).
        output_hidden_states: also return every layer's hidden states.
        dtype: a dtype policy for every layer, e.g. `"mixed_float16"`.
        shared_embeddings: another encoder's `Embeddings` whose tables and
            LayerNorm this encoder uses (see `Embeddings`; not serialized).

    Example:
    >>> import numpy as np
    >>> from kerasbert import EncoderConfig
    >>> cfg = EncoderConfig(family="bert", vocab_size=100, hidden_size=32,
    ...                     num_layers=2, num_heads=2, intermediate_size=64)
    >>> encoder = Encoder(cfg)
    >>> ids = np.array([[2, 7, 9, 3, 0]], dtype="int32")
    >>> out = encoder({"token_ids": ids, "segment_ids": np.zeros_like(ids),
    ...                "padding_mask": (ids != 0).astype("int32")})
    >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
    ((1, 5, 32), (1, 32))
    """

    def __init__(self, config, output_hidden_states=False, dtype=None, shared_embeddings=None,
                 **kwargs):
        if isinstance(config, Mapping):
            config = EncoderConfig.from_dict(dict(config))
        if not isinstance(config, EncoderConfig):
            raise TypeError(f"config must be an EncoderConfig, got {type(config).__name__}")

        # === Layers ===
        embeddings = Embeddings(
            vocab_size=config.vocab_size,
            embedding_size=config.embedding_size,
            max_positions=config.max_positions,
            type_vocab_size=config.type_vocab_size,
            pad_token_id=config.pad_token_id,
            position_offset=config.position_offset,
            projection_size=config.hidden_size if config.has_embedding_projection else None,
            layer_norm_epsilon=config.layer_norm_epsilon,
            dropout=config.dropout,
            initializer_range=config.initializer_range,
            sinusoidal_positions=config.sinusoidal_positions,
            position_table=config.has_position_table,
            use_bias=config.use_bias,
            dtype=dtype,
            shared_tables=shared_embeddings,
            name="embeddings",
        )
        transformer_layers = [
            TransformerLayer(
                num_heads=config.num_heads,
                hidden_size=config.hidden_size,
                intermediate_size=config.intermediate_size,
                hidden_activation=config.hidden_activation,
                layer_norm_epsilon=config.layer_norm_epsilon,
                dropout=config.dropout,
                attention_dropout=config.attention_dropout,
                initializer_range=config.initializer_range,
                dropout_after_attention=config.family_traits.dropout_after_attention,
                pre_norm=config.pre_norm,
                normalize_attention_input=not (config.pre_norm and index == 0),
                gated_mlp=config.gated_mlp,
                use_bias=config.use_bias,
                fused_projection=config.family_traits.fused_attention_projection,
                rotary_theta=config.layer_attention(index)[0],
                local_window=config.layer_attention(index)[1],
                query_chunk_size=QUERY_CHUNK if config.max_positions > QUERY_CHUNK else None,
                dtype=dtype,
                name=f"transformer_layer_{index}",
            )
            for index in range(config.num_distinct_layers)
        ]
        final_layer_norm = None
        if config.pre_norm:
            final_layer_norm = keras.layers.LayerNormalization(
                epsilon=config.layer_norm_epsilon, center=config.use_bias, dtype=dtype,
                name="final_layer_norm")
        pooler = None
        if config.use_pooler:
            pooler = Pooler(config.hidden_size, config.initializer_range, dtype=dtype, name="pooler")

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        hidden = embeddings(inputs["token_ids"], inputs["segment_ids"])
        hidden_states = [hidden]
        for index in config.layer_schedule:
            hidden = transformer_layers[index](hidden, inputs["padding_mask"])
            hidden_states.append(hidden)
        if final_layer_norm is not None:
            hidden = final_layer_norm(hidden)
            hidden_states[-1] = hidden  # as transformers' ModernBERT reports it
        outputs = {"sequence_output": hidden}
        if pooler is not None:
            outputs["pooled_output"] = pooler(hidden)
        if output_hidden_states:
            outputs["hidden_states"] = hidden_states
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.config = config
        self.output_hidden_states = output_hidden_states
        self.embeddings = embeddings
        self.transformer_layers = transformer_layers
        self.final_layer_norm = final_layer_norm
        self.pooler = pooler
        if dtype is not None:
            self.dtype_policy = keras.dtype_policies.get(dtype)

    def outputs_at_positions(self, inputs, positions):
        """The encoder's outputs where pretraining heads read them, computing no more.

        Every layer but the last runs on the whole sequence; the last one only
        for the first token and `positions` (`[batch, n]`), attending to all
        tokens. Returns `sequence_output` at `positions` (`[batch, n, hidden]`,
        equal to `gather(outputs["sequence_output"], positions)`) and, with a
        pooler, `pooled_output`. Works on symbolic inputs too, for building
        functional models on top of the encoder's layers.

        Example:
        >>> import numpy as np
        >>> from kerasbert import EncoderConfig
        >>> encoder = build_encoder(EncoderConfig(family="bert", vocab_size=100, hidden_size=32,
        ...                                       num_layers=2, num_heads=2, intermediate_size=64))
        >>> ids = np.array([[2, 7, 9, 3, 0]], dtype="int32")
        >>> inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
        ...           "padding_mask": (ids != 0).astype("int32")}
        >>> full = encoder(inputs)["sequence_output"]
        >>> at = encoder.outputs_at_positions(inputs, np.array([[3, 1]], "int32"))
        >>> bool(np.allclose(at["sequence_output"][0], np.asarray(full)[0, [3, 1]], atol=1e-5))
        True
        """
        hidden = self.embeddings(inputs["token_ids"], inputs["segment_ids"])
        *first_layers, last_layer = [self.transformer_layers[index]
                                     for index in self.config.layer_schedule]
        for layer in first_layers:
            hidden = layer(hidden, inputs["padding_mask"])
        positions = keras.ops.cast(positions, "int32")
        first_token = keras.ops.zeros_like(keras.ops.cast(inputs["token_ids"][:, :1], "int32"))
        read = keras.ops.concatenate([first_token, positions], axis=1)
        selected = last_layer(hidden, inputs["padding_mask"],
                              queries=gather_positions(hidden, read), query_positions=read)
        if self.final_layer_norm is not None:
            selected = self.final_layer_norm(selected)
        outputs = {"sequence_output": selected[:, 1:]}
        if self.pooler is not None:
            outputs["pooled_output"] = self.pooler(selected)
        return outputs

    @property
    def token_embedding(self):
        """The token embedding layer (MLM heads tie their decoder to it)."""
        return self.embeddings.token_embedding

    def __call__(self, inputs, *args, **kwargs):
        check_encoder_inputs(inputs, self.config)
        if not any(keras.backend.is_keras_tensor(inputs[name]) for name in INPUT_NAMES):
            inputs = {name: keras.ops.cast(inputs[name], "int32") for name in INPUT_NAMES}
        return super().__call__(inputs, *args, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "config": self.config.to_dict(),
            "output_hidden_states": self.output_hidden_states,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


def check_encoder_inputs(inputs, config):
    """Raise a clear error unless `inputs` is a valid encoder input dict for `config`."""
    if not isinstance(inputs, Mapping):
        raise ValueError(
            f"Encoder inputs must be a dict with keys {list(INPUT_NAMES)}, "
            f"got {type(inputs).__name__}")
    missing = [name for name in INPUT_NAMES if name not in inputs]
    unexpected = sorted(set(inputs) - set(INPUT_NAMES))
    if missing or unexpected:
        raise ValueError(
            f"Encoder inputs must have exactly the keys {list(INPUT_NAMES)}; "
            f"missing {missing}, unexpected {unexpected}")
    shapes = {}
    for name in INPUT_NAMES:
        value = inputs[name]
        shape = getattr(value, "shape", None)
        dtype = getattr(value, "dtype", None)
        if shape is None or dtype is None:
            raise ValueError(f"Encoder input '{name}' must be a tensor or array, got {type(value).__name__}")
        dtype = keras.backend.standardize_dtype(dtype)
        if not (dtype.startswith("int") or dtype.startswith("uint")):
            raise InputDtypeError(f"Encoder input '{name}' must have an integer dtype (int32), got {dtype}")
        if len(shape) != 2:
            raise ValueError(
                f"Encoder input '{name}' must have rank 2 [batch, seq], got shape {tuple(shape)}")
        shapes[name] = tuple(shape)
    for axis, label in ((0, "batch size"), (1, "sequence length")):
        sizes = {name: shape[axis] for name, shape in shapes.items() if shape[axis] is not None}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"Encoder inputs disagree on {label}: {sizes}")
    seq_length = shapes["token_ids"][1]
    if seq_length is not None and seq_length > config.max_sequence_length:
        raise ValueError(
            f"Encoder input 'token_ids' has sequence length {seq_length}, longer than the "
            f"{config.max_sequence_length} positions this encoder supports "
            f"(max_positions={config.max_positions}, position_offset={config.position_offset})")


def build_encoder(config, output_hidden_states=False, dtype=None, name=None):
    """Build a randomly initialized `Encoder` for `config` (an `EncoderConfig`).

    Example:
    >>> from kerasbert import EncoderConfig
    >>> cfg = EncoderConfig(family="electra", vocab_size=100, hidden_size=32,
    ...                     embedding_size=16, num_layers=2, num_heads=2,
    ...                     intermediate_size=64)
    >>> sorted(build_encoder(cfg).output)
    ['sequence_output']
    """
    kwargs = {"name": name} if name else {}
    return Encoder(config, output_hidden_states=output_hidden_states, dtype=dtype, **kwargs)
