"""Pretraining models: an encoder with its masked-LM, next-sentence / sentence-order and
replaced-token-detection heads, as one functional Keras model."""

import keras

from kerasbert import families
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.heads import MaskedLMHead, ReplacedTokenHead
from kerasbert.models.batch_dicts import BatchDictTraining, restore_compile
from kerasbert.models.encoder import INPUT_NAMES, Encoder, build_encoder

HEADS = ("mlm", "nsp", "sop", "rtd")
# The pretraining heads of each family's original recipe (`ModelTraits.pretraining_heads`).
FAMILY_HEADS = {name: families.get(name).model.pretraining_heads for name in families.NAMES}


def default_mlm_activation(config):
    """The MLM head's activation as `transformers` has it (`ModelTraits.mlm_activation`):
    RoBERTa's and ELECTRA's generator head always use the exact GELU, BERT's and ALBERT's the
    encoder's activation."""
    return config.family_traits.mlm_activation or config.hidden_activation


@keras.saving.register_keras_serializable(package="kerasbert")
class PretrainingModel(BatchDictTraining, keras.Model):
    """An encoder with pretraining heads.

    Inputs: the encoder's `token_ids`, `segment_ids`, `padding_mask`, plus
    `masked_lm_positions` (int32 `[batch, predictions]`) when there is an MLM
    head. Outputs, by head: `mlm_logits` `[batch, predictions, vocab]` (decoder
    tied to the encoder's token embedding), `nsp_logits` / `sop_logits`
    `[batch, 2]` (on the pooled output), `rtd_logits` `[batch, seq]`.

    Without an `rtd` head the model is built on the encoder's layers with
    `Encoder.outputs_at_positions`: the last transformer layer runs only for
    [CLS] and the masked positions (the same logits, less work; the encoder
    stays `model.encoder`, sharing every weight).

    Args:
        encoder: a `kerasbert.models.Encoder`.
        heads: some of `HEADS`; `nsp` and `sop` need an encoder with a pooler.
        mlm_activation: the MLM transform's activation (default:
            `default_mlm_activation(encoder.config)`).

    Example:
    >>> import numpy as np, kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> model = PretrainingModel(encoder, heads=("mlm", "nsp"))
    >>> ids = np.array([[2, 7, 8, 3, 0]], "int32")
    >>> outputs = model({"token_ids": ids, "segment_ids": np.zeros_like(ids),
    ...                  "padding_mask": (ids != 0).astype("int32"),
    ...                  "masked_lm_positions": np.array([[1, 2]], "int32")})
    >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["nsp_logits"].shape)
    ((1, 2, 30522), (1, 2))
    """

    def __init__(self, encoder, heads=("mlm", "nsp"), mlm_activation=None, **kwargs):
        heads = tuple(heads)
        unknown = [head for head in heads if head not in HEADS]
        if unknown or not heads or len(set(heads)) != len(heads):
            raise ValueError(f"heads must be distinct names from {HEADS}, got {heads}")
        if not isinstance(encoder, Encoder):
            raise TypeError(f"encoder must be a kerasbert Encoder, got {type(encoder).__name__}")
        config = encoder.config
        if {"nsp", "sop"} & set(heads) and not config.use_pooler:
            raise ValueError(f"heads {heads} need the pooled output, but the encoder has no pooler")
        mlm_activation = mlm_activation or default_mlm_activation(config)

        # === Layers ===
        layers = {}
        if "mlm" in heads:
            layers["mlm"] = MaskedLMHead(
                encoder.token_embedding, activation=mlm_activation,
                layer_norm_epsilon=config.layer_norm_epsilon,
                initializer_range=config.initializer_range, use_bias=config.use_bias,
                name="mlm_head")
        for head in ("nsp", "sop"):
            if head in heads:
                layers[head] = keras.layers.Dense(
                    2, kernel_initializer=keras.initializers.TruncatedNormal(
                        stddev=config.initializer_range), name=f"{head}_head")
        if "rtd" in heads:
            layers["rtd"] = ReplacedTokenHead(config.hidden_size, config.hidden_activation,
                                              config.initializer_range, name="rtd_head")
        dropout = Dropout(config.dropout, name="pooled_dropout")

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        if "mlm" in heads:
            inputs["masked_lm_positions"] = keras.Input(
                shape=(None,), dtype="int32", name="masked_lm_positions")
        encoder_inputs = {name: inputs[name] for name in INPUT_NAMES}
        if "rtd" in heads:
            encoded = encoder(encoder_inputs)
        else:
            # Heads that read only [CLS] and the masked positions: the last layer runs there.
            positions = (inputs["masked_lm_positions"] if "mlm" in heads else
                         keras.ops.zeros_like(inputs["token_ids"][:, :0]))
            encoded = encoder.outputs_at_positions(encoder_inputs, positions)
        outputs = {}
        if "mlm" in heads:
            outputs["mlm_logits"] = layers["mlm"](
                encoded["sequence_output"],
                inputs["masked_lm_positions"] if "rtd" in heads else None)
        for head in ("nsp", "sop"):
            if head in heads:
                outputs[f"{head}_logits"] = layers[head](dropout(encoded["pooled_output"]))
        if "rtd" in heads:
            outputs["rtd_logits"] = layers["rtd"](encoded["sequence_output"])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self._input_names = list(inputs)
        self.encoder = encoder
        self.heads = heads
        self.mlm_activation = mlm_activation
        self.head_layers = layers

    # === Training: batches of `kerasbert.data.pretraining_dataset` straight into `fit` ===

    def compile(self, optimizer="adam", loss="auto", metrics="auto", weighted_metrics="auto",
                **kwargs):
        """`keras.Model.compile` with the pretraining losses and metrics by default.

        MLM: cross-entropy averaged over the real predictions (weights
        `masked_lm_weights`, as Google's BERT) and accuracy; NSP / SOP:
        cross-entropy and accuracy. Losses add up with weight 1. In `fit` logs:
        `mlm_logits_loss`, `mlm_logits_accuracy`, `nsp_logits_accuracy`, ...
        Pass any of the arguments to replace a default.
        """
        def cross_entropy(name, reduction="sum_over_batch_size"):
            return keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction=reduction, name=name)

        heads = [head for head in self.heads if head != "rtd"]
        if loss == "auto":
            loss = {f"{head}_logits": cross_entropy(
                f"{head}_loss", "mean_with_sample_weight" if head == "mlm" else
                "sum_over_batch_size") for head in heads}
        if weighted_metrics == "auto":
            weighted_metrics = ({"mlm_logits": [keras.metrics.SparseCategoricalAccuracy(
                name="accuracy")]} if "mlm" in heads else None)
        if metrics == "auto":
            metrics = {f"{head}_logits": [keras.metrics.SparseCategoricalAccuracy(
                name="accuracy")] for head in heads if head != "mlm"} or None
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                        weighted_metrics=weighted_metrics, **kwargs)

    def compile_from_config(self, config):
        restore_compile(self, config)

    def split_batch(self, batch):
        """A pretraining batch dict -> `(inputs, labels, sample_weights)` for Keras.

        Labels: `masked_lm_ids` (weights `masked_lm_weights`) for `mlm_logits`,
        `next_sentence_labels` for `nsp_logits` / `sop_logits`. Anything that
        is not such a dict is returned as it is.
        """
        if not isinstance(batch, dict) or "masked_lm_ids" not in batch and (
                "next_sentence_labels" not in batch):
            return batch
        inputs = {name: batch[name] for name in self._input_names}
        labels, weights = {}, {}
        if "mlm" in self.heads:
            labels["mlm_logits"] = batch["masked_lm_ids"]
            weights["mlm_logits"] = batch["masked_lm_weights"]
        for head in ("nsp", "sop"):
            if head in self.heads:
                labels[f"{head}_logits"] = batch["next_sentence_labels"]
                weights[f"{head}_logits"] = keras.ops.ones_like(
                    batch["next_sentence_labels"], dtype="float32")
        return inputs, labels, weights

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.layers.serialize(self.encoder),
            "heads": list(self.heads),
            "mlm_activation": self.mlm_activation,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)


def build_pretraining_model(config, heads=None, **kwargs):
    """A randomly initialised `PretrainingModel` for an `EncoderConfig`.

    `heads` defaults to the family's original recipe (`ModelTraits.pretraining_heads`).

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("albert_base_v2").replace(num_layers=1, hidden_size=64,
    ...     num_heads=2, intermediate_size=128)
    >>> sorted(build_pretraining_model(config).output)
    ['mlm_logits', 'sop_logits']
    """
    return PretrainingModel(build_encoder(config), heads or config.family_traits.pretraining_heads,
                            **kwargs)


# The heads each pretraining objective trains (`kerasbert.data.instances.OBJECTIVES`; ELECTRA's
# generator and discriminator are a model of their own, `ElectraPretrainer`).
OBJECTIVE_HEADS = {"nsp": ("mlm", "nsp"), "sop": ("mlm", "sop"), "full_sentences": ("mlm",),
                   "doc_sentences": ("mlm",)}


def build_objective_model(config, objective, generator_ratio=0.25, seed=None):
    """`(model, encoder)`: a randomly initialised model that trains `objective` on the encoder of
    `config`: an `ElectraPretrainer` (its generator `generator_ratio` of the discriminator's
    size; `encoder` is the discriminator) for `"electra"`, else a `PretrainingModel` with the
    objective's `OBJECTIVE_HEADS`.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model, encoder = build_objective_model(config, "full_sentences")
    >>> model.heads, encoder is model.encoder
    (('mlm',), True)
    """
    if objective == "electra":
        from kerasbert.models.electra import ElectraPretrainer, generator_config

        model = ElectraPretrainer(config, generator_config(config, generator_ratio), seed=seed)
        return model, model.discriminator
    model = PretrainingModel(build_encoder(config), OBJECTIVE_HEADS[objective])
    return model, model.encoder
