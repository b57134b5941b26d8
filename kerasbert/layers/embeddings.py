"""Token + segment + position embeddings, LayerNorm, dropout and an optional E->H projection."""

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from kerasbert.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="kerasbert")
class Embeddings(keras.layers.Layer):
    """The input embeddings of a BERT-family encoder.

    Sums token, segment and position embeddings of width `embedding_size`,
    normalizes them, applies dropout and, when `projection_size` is set,
    projects them to that width (ALBERT, ELECTRA small).

    With `shared_tables` (another `Embeddings` of the same vocabulary,
    width, positions and segments), its three tables and LayerNorm are used
    instead of new ones, and only the projection is this layer's own
    (ELECTRA's generator shares the discriminator's embeddings). Sharing is a
    link between live layers: it is not part of the config; the model that
    shares rebuilds it.

    Positions are `0..seq-1` when `position_offset` is 0. A positive offset
    numbers them RoBERTa's way: non-padding tokens (those that are not
    `pad_token_id`) count up from `position_offset`, padding tokens get
    `position_offset - 1`.

    With `type_vocab_size=0` there is no segment table and `segment_ids` are
    ignored (DistilBERT). With `sinusoidal_positions` the position table holds
    fixed sines and cosines (`sinusoidal_position_table`) and is not trained. With
    `position_table=False` there is no position table at all (positions enter the attention
    instead, as rotary embeddings); `use_bias=False`: a LayerNorm without bias.

    Example:
    >>> import numpy as np
    >>> layer = Embeddings(vocab_size=100, embedding_size=16, max_positions=32,
    ...                    type_vocab_size=2, projection_size=32)
    >>> ids = np.array([[5, 6, 7, 0]], dtype="int32")
    >>> tuple(layer(ids, np.zeros_like(ids)).shape)
    (1, 4, 32)
    """

    def __init__(
        self,
        vocab_size,
        embedding_size,
        max_positions,
        type_vocab_size,
        pad_token_id=0,
        position_offset=0,
        projection_size=None,
        layer_norm_epsilon=1e-12,
        dropout=0.0,
        initializer_range=0.02,
        sinusoidal_positions=False,
        position_table=True,
        use_bias=True,
        shared_tables=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_positions = max_positions
        self.type_vocab_size = type_vocab_size
        self.pad_token_id = pad_token_id
        self.position_offset = position_offset
        self.projection_size = projection_size
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.sinusoidal_positions = sinusoidal_positions
        self.position_table = position_table
        self.use_bias = use_bias

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        if shared_tables is not None:
            shape = (vocab_size, embedding_size, max_positions, type_vocab_size)
            theirs = (shared_tables.vocab_size, shared_tables.embedding_size,
                      shared_tables.max_positions, shared_tables.type_vocab_size)
            if shape != theirs:
                raise ValueError(
                    f"shared_tables must have the same (vocab_size, embedding_size, "
                    f"max_positions, type_vocab_size): {theirs} != {shape}")
            self.token_embedding = shared_tables.token_embedding
            self.position_embedding = shared_tables.position_embedding
            self.segment_embedding = shared_tables.segment_embedding
            self.layer_norm = shared_tables.layer_norm
        else:
            self.token_embedding = keras.layers.Embedding(
                vocab_size, embedding_size, embeddings_initializer=initializer,
                dtype=self.dtype_policy, name="token_embedding")
            self.position_embedding = None
            if position_table:
                self.position_embedding = keras.layers.Embedding(
                    max_positions, embedding_size, embeddings_initializer=initializer,
                    dtype=self.dtype_policy, name="position_embedding")
            self.segment_embedding = None
            if type_vocab_size:
                self.segment_embedding = keras.layers.Embedding(
                    type_vocab_size, embedding_size, embeddings_initializer=initializer,
                    dtype=self.dtype_policy, name="segment_embedding")
            if sinusoidal_positions:
                self.position_embedding.trainable = False
            self.layer_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, center=use_bias, dtype=self.dtype_policy,
                name="layer_norm")
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.projection = None
        if projection_size is not None:
            self.projection = keras.layers.Dense(
                projection_size, kernel_initializer=initializer,
                dtype=self.dtype_policy, name="projection")

    def build(self, token_ids_shape, segment_ids_shape=None):
        # Shared tables are built already (by the layer that owns them).
        for table in (self.token_embedding, self.position_embedding, self.segment_embedding):
            if table is not None and not table.built:
                table.build(token_ids_shape)
                if table is self.position_embedding and self.sinusoidal_positions:
                    table.embeddings.assign(
                        sinusoidal_position_table(self.max_positions, self.embedding_size))
        if not self.layer_norm.built:
            self.layer_norm.build(tuple(token_ids_shape) + (self.embedding_size,))
        if self.projection is not None:
            self.projection.build(tuple(token_ids_shape) + (self.embedding_size,))
        self.built = True

    def position_ids(self, token_ids):
        """Position ids for `token_ids` ([batch, seq] int)."""
        seq_length = ops.shape(token_ids)[1]
        max_length = self.max_positions - self.position_offset
        if isinstance(seq_length, int):
            if seq_length > max_length:
                raise ValueError(
                    f"Sequence length {seq_length} exceeds the {max_length} positions this "
                    f"encoder can number (max_positions={self.max_positions}, "
                    f"position_offset={self.position_offset})")
        else:
            tf.debugging.assert_less_equal(
                seq_length, max_length,
                message=f"Sequence length exceeds the {max_length} positions this encoder "
                        f"can number (max_positions={self.max_positions}, "
                        f"position_offset={self.position_offset})")
        if self.position_offset == 0:
            return ops.expand_dims(ops.arange(seq_length, dtype="int32"), 0)
        is_token = ops.cast(ops.not_equal(token_ids, self.pad_token_id), "int32")
        return ops.cumsum(is_token, axis=1) * is_token + (self.position_offset - 1)

    def call(self, token_ids, segment_ids, training=None):
        embeddings = self.token_embedding(token_ids)
        if self.position_embedding is not None:
            embeddings = embeddings + self.position_embedding(self.position_ids(token_ids))
        if self.segment_embedding is not None:
            embeddings = embeddings + self.segment_embedding(segment_ids)
        embeddings = self.layer_norm(embeddings)
        embeddings = self.dropout_layer(embeddings, training=training)
        if self.projection is not None:
            embeddings = self.projection(embeddings)
        return embeddings

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        width = self.projection_size or self.embedding_size
        return tuple(token_ids_shape) + (width,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "max_positions": self.max_positions,
            "type_vocab_size": self.type_vocab_size,
            "pad_token_id": self.pad_token_id,
            "position_offset": self.position_offset,
            "projection_size": self.projection_size,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
            "sinusoidal_positions": self.sinusoidal_positions,
            "position_table": self.position_table,
            "use_bias": self.use_bias,
        })
        return config


def sinusoidal_position_table(num_positions, width):
    """DistilBERT's fixed position table (Vaswani et al.): row `p`, columns `2i` and `2i + 1`
    hold `sin` and `cos` of `p / 10000 ** (2i / width)`.

    >>> table = sinusoidal_position_table(4, 6)
    >>> table.shape, float(table[0, 1]), bool(np.isclose(table[1, 0], np.sin(1.0)))
    ((4, 6), 1.0, True)
    """
    positions = np.arange(num_positions, dtype="float64")[:, None]
    exponents = 2 * (np.arange(width) // 2) / width
    angles = positions / np.power(10000.0, exponents)[None, :]
    table = np.where(np.arange(width) % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype("float32")
