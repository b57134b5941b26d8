"""Text embedding models: an encoder, sentence pooling, optional dense layers and L2 normalization."""

from collections.abc import Mapping

import keras

from kerasbert.layers.sentence_pooling import SentencePooling, pooling_modes
from kerasbert.models.batch_dicts import BatchDictTraining, restore_compile
from kerasbert.models.encoder import INPUT_NAMES, Encoder
from kerasbert.training.contrastive_loss import MultipleNegativesRankingLoss

# The columns of a contrastive batch, in the order `MultipleNegativesRankingLoss` reads them.
CONTRASTIVE_COLUMNS = ("anchor", "positive", "negative")
SIMILARITY_FUNCTIONS = ("cosine", "dot", "euclidean", "manhattan")  # sentence-transformers' names
DENSE_ACTIVATIONS = ("linear", "tanh", "relu", "gelu", "sigmoid", "silu")


def _dense_settings(dense_layers):
    """`dense_layers` as a list of `{"units", "activation", "use_bias"}` dicts, checked."""
    settings = []
    for index, layer in enumerate(dense_layers or ()):
        if not isinstance(layer, Mapping) or "units" not in layer:
            raise ValueError(f"dense_layers[{index}] must be a dict with 'units' (and optional "
                             f"'activation', 'use_bias'), got {layer!r}")
        unknown = sorted(set(layer) - {"units", "activation", "use_bias"})
        units, activation = layer["units"], layer.get("activation", "tanh")
        if unknown:
            raise ValueError(f"dense_layers[{index}] has unknown keys {unknown}")
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError(f"dense_layers[{index}]['units'] must be a positive integer, "
                             f"got {units!r}")
        if activation not in DENSE_ACTIVATIONS:
            raise ValueError(f"dense_layers[{index}]['activation'] must be one of "
                             f"{DENSE_ACTIVATIONS}, got {activation!r}")
        settings.append({"units": units, "activation": activation,
                         "use_bias": bool(layer.get("use_bias", True))})
    return settings


@keras.saving.register_keras_serializable(package="kerasbert")
class TextEmbeddingModel(BatchDictTraining, keras.Model):
    """An encoder that returns one vector per text: `{"embedding": [batch, dim]}` float32.

    The encoder's token vectors are pooled over the unpadded tokens
    (`pooling`: one of `SentencePooling`'s modes, or several concatenated),
    passed through `dense_layers` (each `{"units", "activation", "use_bias"}`,
    sentence-transformers' `Dense` modules) and, with `normalize`, scaled to
    unit length: a sentence-transformers model as one Keras model.
    `similarity` (cosine, dot, euclidean or manhattan), `prompts` (`{name:
    prefix}`), `default_prompt_name` (a key of `prompts` that `encode`
    prepends when no other prompt is named) and `max_seq_length` describe how
    the model is meant to be used and are saved with it (and written back to a
    sentence-transformers folder). Calls, `predict` and the exported files take
    the texts' ids as they are: a prompt is part of the text given to them.

    Training with `fit`: batches are dicts of columns, `{"anchor": inputs,
    "positive": inputs}` and optionally `"negative": inputs` (each the
    encoder's three inputs); the default loss is `MultipleNegativesRankingLoss`
    (in-batch negatives). `predict` and calls take the encoder's inputs.

    Example:
    >>> import numpy as np, kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> model = TextEmbeddingModel(encoder, pooling="mean", normalize=True)
    >>> ids = np.array([[2, 7, 8, 3, 0]], "int32")
    >>> vector = model({"token_ids": ids, "segment_ids": np.zeros_like(ids),
    ...                 "padding_mask": (ids != 0).astype("int32")})["embedding"]
    >>> tuple(vector.shape), round(float(np.linalg.norm(vector)), 4)
    ((1, 128), 1.0)
    """

    def __init__(self, encoder, pooling="mean", dense_layers=None, normalize=False,
                 similarity="cosine", prompts=None, max_seq_length=None, default_prompt_name=None,
                 **kwargs):
        if not isinstance(encoder, Encoder):
            raise TypeError(f"encoder must be a kerasbert Encoder, got {type(encoder).__name__}")
        modes = pooling_modes(pooling)
        dense_layers = _dense_settings(dense_layers)
        if similarity not in SIMILARITY_FUNCTIONS:
            raise ValueError(f"similarity must be one of {SIMILARITY_FUNCTIONS}, "
                             f"got {similarity!r}")
        prompts = dict(prompts or {})
        if not all(isinstance(key, str) and isinstance(value, str)
                   for key, value in prompts.items()):
            raise ValueError(f"prompts must map names to prefix strings, got {prompts!r}")
        if default_prompt_name is not None and default_prompt_name not in prompts:
            raise ValueError(f"default_prompt_name {default_prompt_name!r} is not a key of "
                             f"prompts {sorted(prompts)}")
        if max_seq_length is not None and (isinstance(max_seq_length, bool) or not isinstance(
                max_seq_length, int) or not 2 < max_seq_length <= encoder.config.max_sequence_length):
            raise ValueError(f"max_seq_length must be an integer in [3, "
                             f"{encoder.config.max_sequence_length}], got {max_seq_length!r}")

        # === Layers ===
        pooling_layer = SentencePooling(modes, name="pooling")
        dense = [keras.layers.Dense(layer["units"], activation=layer["activation"],
                                    use_bias=layer["use_bias"], dtype="float32",
                                    name=f"dense_{index}")
                 for index, layer in enumerate(dense_layers)]

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        vectors = pooling_layer(encoder(inputs)["sequence_output"], inputs["padding_mask"])
        for layer in dense:
            vectors = layer(vectors)
        if normalize:
            vectors = keras.layers.UnitNormalization(dtype="float32", name="normalize")(vectors)
        super().__init__(inputs=inputs, outputs={"embedding": vectors}, **kwargs)

        # === Config ===
        self._input_names = list(INPUT_NAMES)
        self.encoder = encoder
        self.task = "text_embedding"
        self.pooling = modes[0] if len(modes) == 1 else modes
        self.dense_layers = dense_layers
        self.normalize = bool(normalize)
        self.similarity = similarity
        self.prompts = prompts
        self.default_prompt_name = default_prompt_name
        self.max_seq_length = max_seq_length

    @property
    def embedding_size(self):
        """The length of the output vectors."""
        return int(self.output["embedding"].shape[-1])

    def encode(self, texts, tokenizer, batch_size=32, max_seq_length=None, prompt_name=None):
        """The vectors of `texts` (float32 `[len(texts), dim]`, in their order), embedded as
        `SentenceTransformer.encode` embeds them: each text after the prompt `prompt_name`
        (default: `default_prompt_name`'s, if any), sorted by length, each batch padded to
        its longest text rounded up to 8 tokens
        (`kerasbert.models.embedding_encode.encode_texts`)."""
        from kerasbert.models.embedding_encode import encode_texts

        prompt_name = prompt_name or self.default_prompt_name
        if prompt_name is not None and prompt_name not in self.prompts:
            raise ValueError(f"prompt_name {prompt_name!r}: {self.name} has the prompts "
                             f"{sorted(self.prompts)}")
        prefix = self.prompts[prompt_name] if prompt_name is not None else ""
        if prefix:
            texts = [prefix + text for text in ([texts] if isinstance(texts, str) else texts)]
        return encode_texts(self, tokenizer, texts, batch_size, max_seq_length)

    # === Training: contrastive batches straight into `fit` ===

    def compile(self, optimizer="adam", loss="auto", **kwargs):
        """`keras.Model.compile` with `MultipleNegativesRankingLoss` (scale 20) by default."""
        if loss == "auto":
            loss = {"embedding": MultipleNegativesRankingLoss()}
        super().compile(optimizer=optimizer, loss=loss, **kwargs)

    def compile_from_config(self, config):
        restore_compile(self, config)

    def split_batch(self, batch):
        """A contrastive batch dict -> `(inputs, labels)` for Keras.

        The columns (`anchor`, `positive`, optional `negative`) are padded to
        the longest of them and stacked along the batch axis, so one call
        embeds them all; the labels are `range(batch)`: anchor `i`'s positive
        is candidate `i`. Anything else is returned as it is.
        """
        if not isinstance(batch, dict) or "anchor" not in batch:
            return batch
        missing = [name for name in CONTRASTIVE_COLUMNS[:2] if name not in batch]
        if missing:
            raise ValueError(f"A contrastive batch needs the columns {CONTRASTIVE_COLUMNS[:2]}; "
                             f"missing {missing}")
        columns = [batch[name] for name in CONTRASTIVE_COLUMNS if name in batch]
        width = keras.ops.max(keras.ops.stack(
            [keras.ops.shape(column["token_ids"])[1] for column in columns]))
        stacked = {name: keras.ops.concatenate(
            [_pad_to(column[name], width) for column in columns], axis=0)
            for name in INPUT_NAMES}
        labels = keras.ops.arange(keras.ops.shape(columns[0]["token_ids"])[0], dtype="int32")
        return stacked, {"embedding": labels}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.layers.serialize(self.encoder),
            "pooling": self.pooling if isinstance(self.pooling, str) else list(self.pooling),
            "dense_layers": [dict(layer) for layer in self.dense_layers],
            "normalize": self.normalize,
            "similarity": self.similarity,
            "prompts": dict(self.prompts),
            "max_seq_length": self.max_seq_length,
            "default_prompt_name": self.default_prompt_name,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)


def _pad_to(ids, width):
    """`[batch, seq]` ids padded with zeros on the right to `[batch, width]`."""
    return keras.ops.pad(ids, [[0, 0], [0, width - keras.ops.shape(ids)[1]]])
