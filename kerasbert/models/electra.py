"""ELECTRA pretraining: a small generator fills the masked positions, the discriminator
learns which tokens were replaced; they share the input embeddings."""

from collections.abc import Mapping

import keras
import tensorflow as tf
from keras import ops

from kerasbert.config import EncoderConfig
from kerasbert.layers.heads import MaskedLMHead, ReplacedTokenHead
from kerasbert.layers.replaced_tokens import ReplacedTokenSampler
from kerasbert.models.encoder import INPUT_NAMES, Encoder
from kerasbert.models.batch_dicts import restore_compile

LABEL_NAMES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def generator_config(discriminator_config, ratio=0.25):
    """The generator for a discriminator: hidden and FFN sizes and heads times `ratio`
    (ELECTRA: 1/4 for small, 1/3 for base and large), same embeddings and depth.

    >>> import kerasbert
    >>> config = generator_config(kerasbert.zoo.get_config("electra_small_discriminator"))
    >>> config.hidden_size, config.num_heads, config.intermediate_size, config.embedding_size
    (64, 1, 256, 128)
    """
    if not 0 < ratio <= 1:
        raise ValueError(f"generator ratio must be in (0, 1], got {ratio}")
    config = discriminator_config
    return config.replace(
        hidden_size=max(1, round(config.hidden_size * ratio)),
        num_heads=max(1, round(config.num_heads * ratio)),
        intermediate_size=max(1, round(config.intermediate_size * ratio)),
        embedding_size=config.embedding_size or config.hidden_size)


@keras.saving.register_keras_serializable(package="kerasbert")
class ElectraPretrainer(keras.Model):
    """ELECTRA's generator + discriminator, trained together with `fit`.

    Inputs: a pretraining batch (`kerasbert.data.pretraining_dataset` with
    `PretrainingDataConfig(objective="electra")`): `token_ids` (masked), `segment_ids`,
    `padding_mask`, `masked_lm_positions`, `masked_lm_ids`,
    `masked_lm_weights`. The generator predicts the masked tokens
    (`mlm_logits`); replacements are sampled from its softmax (no gradient
    through the sample) and the discriminator scores every token
    (`rtd_logits`) against `rtd_labels` (1 = replaced). The generator shares
    the discriminator's token, position and segment embeddings and their
    LayerNorm; its MLM decoder is tied to the shared token embedding.

    Loss: generator MLM cross-entropy (mean over real predictions) +
    `rtd_loss_weight` (50) x the discriminator's sigmoid cross-entropy (mean
    over non-padding tokens). `fit` logs `mlm_loss`, `mlm_accuracy`,
    `rtd_loss`, `rtd_accuracy`, `rtd_precision` and `rtd_recall`.

    Example:
    >>> import numpy as np, kerasbert
    >>> config = kerasbert.zoo.get_config("electra_small_discriminator").replace(
    ...     num_layers=1, vocab_size=50)
    >>> model = ElectraPretrainer(config, generator_config(config))
    >>> ids = np.array([[2, 4, 7, 3, 0]], "int32")
    >>> outputs = model({"token_ids": ids, "segment_ids": np.zeros_like(ids),
    ...                  "padding_mask": (ids != 0).astype("int32"),
    ...                  "masked_lm_positions": np.array([[1]], "int32"),
    ...                  "masked_lm_ids": np.array([[9]], "int32"),
    ...                  "masked_lm_weights": np.array([[1.0]], "float32")})
    >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["rtd_logits"].shape)
    ((1, 1, 50), (1, 5))
    """

    def __init__(self, discriminator_config, generator_config, rtd_loss_weight=50.0, seed=None,
                 **kwargs):
        discriminator_config = _as_config(discriminator_config)
        generator_config = _as_config(generator_config)

        # === Layers ===
        discriminator = Encoder(discriminator_config, name="discriminator")
        with keras.name_scope("generator"):
            generator = Encoder(generator_config, shared_embeddings=discriminator.embeddings,
                                name="generator")
            mlm_head = MaskedLMHead(
                discriminator.token_embedding, activation="gelu",
                layer_norm_epsilon=generator_config.layer_norm_epsilon,
                initializer_range=generator_config.initializer_range, name="mlm_head")
        rtd_head = ReplacedTokenHead(discriminator_config.hidden_size,
                                     discriminator_config.hidden_activation,
                                     discriminator_config.initializer_range, name="rtd_head")
        sampler = ReplacedTokenSampler(seed=seed, name="sampler")

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES + LABEL_NAMES[:2]}
        inputs["masked_lm_weights"] = keras.Input(shape=(None,), dtype="float32",
                                                  name="masked_lm_weights")
        encoder_inputs = {name: inputs[name] for name in INPUT_NAMES}
        mlm_logits = mlm_head(generator(encoder_inputs)["sequence_output"],
                              inputs["masked_lm_positions"])
        corrupted, replaced = sampler(mlm_logits, inputs["token_ids"],
                                      *(inputs[name] for name in LABEL_NAMES))
        scored = discriminator({**encoder_inputs, "token_ids": corrupted})
        outputs = {"mlm_logits": mlm_logits, "rtd_logits": rtd_head(scored["sequence_output"]),
                   "rtd_labels": replaced}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self._input_names = list(inputs)
        self.discriminator = discriminator
        self.generator = generator
        self.rtd_loss_weight = rtd_loss_weight
        self.seed = seed
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.rtd_loss_tracker = keras.metrics.Mean(name="rtd_loss")
        self.mlm_accuracy = keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        self.rtd_accuracy = keras.metrics.BinaryAccuracy(name="rtd_accuracy")
        self.rtd_precision = keras.metrics.Precision(name="rtd_precision")
        self.rtd_recall = keras.metrics.Recall(name="rtd_recall")

    def compile(self, optimizer="adam", **kwargs):
        """`keras.Model.compile`; the losses are ELECTRA's own (see the class docstring)."""
        if kwargs.get("loss") is not None:
            raise ValueError("ElectraPretrainer computes its own loss; compile without `loss`")
        super().compile(optimizer=optimizer, **kwargs)

    def compile_from_config(self, config):
        restore_compile(self, config)

    def __call__(self, inputs, *args, **kwargs):
        if isinstance(inputs, dict) and hasattr(self, "_input_names"):
            # A whole pretraining batch: keys that are not inputs (NSP labels) are left out.
            inputs = {name: value for name, value in inputs.items() if name in self._input_names}
        return super().__call__(inputs, *args, **kwargs)

    def _inputs_only(self, data):
        """A pretraining batch without the keys the model does not take (NSP labels)."""
        if isinstance(data, dict):
            return {name: data[name] for name in self._input_names}
        return data

    def train_step(self, data):
        return super().train_step(self._inputs_only(data))

    def test_step(self, data):
        return super().test_step(self._inputs_only(data))

    def predict_step(self, data):
        return super().predict_step(self._inputs_only(data))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        mlm_loss, rtd_loss = self._pretraining_losses(x, y_pred)
        self.mlm_loss_tracker.update_state(mlm_loss)
        self.rtd_loss_tracker.update_state(rtd_loss)
        total = mlm_loss + self.rtd_loss_weight * rtd_loss
        # Gradients are summed over replicas: each replica's loss is its share.
        return total / tf.distribute.get_strategy().num_replicas_in_sync

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        weights = ops.cast(x["masked_lm_weights"], "float32")
        self.mlm_accuracy.update_state(x["masked_lm_ids"], y_pred["mlm_logits"],
                                       sample_weight=weights)
        mask = ops.cast(x["padding_mask"], "float32")
        probabilities = ops.sigmoid(ops.cast(y_pred["rtd_logits"], "float32"))
        for metric in (self.rtd_accuracy, self.rtd_precision, self.rtd_recall):
            metric.update_state(y_pred["rtd_labels"], probabilities, sample_weight=mask)
        return {metric.name: metric.result() for metric in self.metrics}

    @property
    def metrics(self):
        own = [self.mlm_loss_tracker, self.mlm_accuracy, self.rtd_loss_tracker,
               self.rtd_accuracy, self.rtd_precision, self.rtd_recall]
        total = getattr(self, "_loss_tracker", None)  # Keras' total loss, once compiled
        return own if total is None else [total, *own]

    def _pretraining_losses(self, x, y_pred):
        weights = ops.cast(x["masked_lm_weights"], "float32")
        mlm = keras.losses.sparse_categorical_crossentropy(
            x["masked_lm_ids"], ops.cast(y_pred["mlm_logits"], "float32"), from_logits=True)
        mlm_loss = ops.sum(mlm * weights) / ops.maximum(ops.sum(weights), 1e-5)
        mask = ops.cast(x["padding_mask"], "float32")
        labels = ops.cast(y_pred["rtd_labels"], "float32")
        rtd = ops.binary_crossentropy(labels, ops.cast(y_pred["rtd_logits"], "float32"),
                                      from_logits=True)
        rtd_loss = ops.sum(rtd * mask) / ops.maximum(ops.sum(mask), 1.0)
        return mlm_loss, rtd_loss

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "discriminator_config": self.discriminator.config.to_dict(),
            "generator_config": self.generator.config.to_dict(),
            "rtd_loss_weight": self.rtd_loss_weight,
            "seed": self.seed,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _as_config(config):
    if isinstance(config, Mapping):
        return EncoderConfig.from_dict(dict(config))
    if not isinstance(config, EncoderConfig):
        raise TypeError(f"expected an EncoderConfig, got {type(config).__name__}")
    return config
