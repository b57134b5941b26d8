"""Pretraining distillation (DistilBERT's recipe): a frozen teacher and a student in one Keras
model, trained with `fit` on the usual masked-LM pretraining batches."""

import keras
import tensorflow as tf
from keras import ops

from kerasbert.models.encoder import INPUT_NAMES, Encoder
from kerasbert.models.pretraining import PretrainingModel
from kerasbert.training.distillation.distiller_config import (constructor_arguments,
                                                               distiller_config)
from kerasbert.training.distillation.losses import hidden_cosine_loss, soft_target_cross_entropy
from kerasbert.training.distillation.teachers import masked_lm_teacher

# The name scope of the distiller's copy of the teacher: its variable paths differ from the
# student's, so both go into one checkpoint, and the student's are those of a plain student.
TEACHER_SCOPE = "teacher"


@keras.saving.register_keras_serializable(package="kerasbert")
class PretrainingDistiller(keras.Model):
    """A frozen teacher and a student trained together on masked-LM batches.

    The loss is, over the batch's real MLM predictions (weights `masked_lm_weights`):

        soft_weight * T^2 * CE(softmax(teacher / T), softmax(student / T))
      + mlm_weight * CE(masked_lm_ids, softmax(student))
      + cosine_weight * mean over real tokens of (1 - cos(teacher, student last hidden states))

    with `T = temperature` (DistilBERT: T = 2, weights 5, 2 and 1). The cosine term needs
    equal hidden sizes: with different ones pass `cosine_weight=0`. Without it, both models
    run their last layer only at the masked positions.

    The distiller holds its own frozen copy of the teacher's masked-LM part (`teacher`;
    non-trainable, run in inference mode, under the name scope `"teacher"`), so only the
    student's weights get gradients and optimizer slots; the student (`student`, a
    `PretrainingModel` with an `mlm` head over the teacher's vocabulary) is the caller's
    model and is what to save. Batches of `kerasbert.data.pretraining_dataset` or of
    pretraining TFRecords go straight into `fit`, under any `tf.distribute` strategy (each
    replica averages over its own predictions). `fit` logs `loss`, `soft_loss`, `mlm_loss`,
    `cosine_loss` (when used) and the student's `mlm_accuracy`.

    Args:
        teacher: a model with an MLM head (see `masked_lm_teacher`): a `PretrainingModel`
            with `mlm` in its heads, or an `ElectraPretrainer` (its generator teaches).
        student: a `PretrainingModel` with an `mlm` head, e.g. `student_pretraining_model`.
        temperature, soft_weight, mlm_weight, cosine_weight: the loss above.

    Example:
    >>> import numpy as np, kerasbert
    >>> from kerasbert.training.distillation import student_pretraining_model
    >>> teacher = kerasbert.models.build_pretraining_model(kerasbert.zoo.get_config(
    ...     "bert_tiny_uncased", vocab_size=50, num_layers=2, hidden_size=16, num_heads=2,
    ...     intermediate_size=32), heads=("mlm",))
    >>> distiller = PretrainingDistiller(teacher, student_pretraining_model(teacher))
    >>> ids = np.array([[2, 7, 8, 9, 3, 0]] * 4, "int32")
    >>> batch = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
    ...          "padding_mask": (ids != 0).astype("int32"),
    ...          "masked_lm_positions": np.array([[1, 2]] * 4, "int32"),
    ...          "masked_lm_ids": np.array([[5, 6]] * 4, "int32"),
    ...          "masked_lm_weights": np.ones((4, 2), "float32")}
    >>> losses = distiller.distillation_losses(batch, distiller(batch))
    >>> sorted(losses)
    ['cosine_loss', 'mlm_loss', 'soft_loss']
    >>> distiller.compile(optimizer="adam")  # then distiller.fit(batches, ...)
    """

    def __init__(self, teacher, student, temperature=2.0, soft_weight=5.0, mlm_weight=2.0,
                 cosine_weight=1.0, **kwargs):
        super().__init__(**kwargs)
        teacher = masked_lm_teacher(teacher)
        if not isinstance(student, PretrainingModel) or "mlm" not in student.heads:
            raise ValueError(f"The student must be a pretraining model with an MLM head, got "
                             f"{type(student).__name__}"
                             + (f" with heads {list(student.heads)}"
                                if isinstance(student, PretrainingModel) else ""))
        if not (isinstance(temperature, (int, float)) and temperature > 0):
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        for name, value in (("soft_weight", soft_weight), ("mlm_weight", mlm_weight),
                            ("cosine_weight", cosine_weight)):
            if not (isinstance(value, (int, float)) and value >= 0):
                raise ValueError(f"{name} must be a non-negative number, got {value!r}")
        teacher_config, student_config = teacher.encoder.config, student.encoder.config
        if teacher_config.vocab_size != student_config.vocab_size:
            raise ValueError(
                f"Mismatched vocabularies: the teacher's vocab_size is "
                f"{teacher_config.vocab_size}, the student's {student_config.vocab_size}; soft "
                "targets need the same vocabulary")
        if cosine_weight and teacher_config.hidden_size != student_config.hidden_size:
            raise ValueError(
                f"The cosine loss compares hidden states of equal size, but the teacher's "
                f"hidden_size is {teacher_config.hidden_size} and the student's "
                f"{student_config.hidden_size}; turn it off with cosine_weight=0 "
                "(--cosine_weight=0)")

        # === Models ===
        with keras.name_scope(TEACHER_SCOPE):
            self.teacher = _frozen_copy(teacher)
        self.student = student

        # === Config ===
        self.temperature = temperature
        self.soft_weight = soft_weight
        self.mlm_weight = mlm_weight
        self.cosine_weight = cosine_weight
        self.soft_loss_tracker = keras.metrics.Mean(name="soft_loss")
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.cosine_loss_tracker = keras.metrics.Mean(name="cosine_loss")
        self.mlm_accuracy = keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        self.built = True

    @property
    def uses_cosine(self):
        return bool(self.cosine_weight)

    def call(self, inputs, training=None):
        encoder_inputs = {name: inputs[name] for name in INPUT_NAMES}
        positions = inputs["masked_lm_positions"]
        if not self.uses_cosine:
            model_inputs = {**encoder_inputs, "masked_lm_positions": positions}
            return {"teacher_mlm_logits": ops.stop_gradient(
                        self.teacher(model_inputs, training=False)["mlm_logits"]),
                    "mlm_logits": self.student(model_inputs, training=training)["mlm_logits"]}
        teacher_hidden = ops.stop_gradient(
            self.teacher.encoder(encoder_inputs, training=False)["sequence_output"])
        student_hidden = self.student.encoder(encoder_inputs, training=training)["sequence_output"]
        return {
            "teacher_mlm_logits": ops.stop_gradient(self.teacher.head_layers["mlm"](
                teacher_hidden, positions, training=False)),
            "mlm_logits": self.student.head_layers["mlm"](student_hidden, positions,
                                                          training=training),
            "teacher_hidden": teacher_hidden,
            "student_hidden": student_hidden,
        }

    def compile(self, optimizer="adam", **kwargs):
        """`keras.Model.compile`; the loss is the distiller's own (see the class docstring)."""
        if kwargs.get("loss") is not None:
            raise ValueError("PretrainingDistiller computes its own loss; compile without `loss`")
        super().compile(optimizer=optimizer, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        losses = self.distillation_losses(x, y_pred)
        self.soft_loss_tracker.update_state(losses["soft_loss"])
        self.mlm_loss_tracker.update_state(losses["mlm_loss"])
        total = self.soft_weight * losses["soft_loss"] + self.mlm_weight * losses["mlm_loss"]
        if self.uses_cosine:
            self.cosine_loss_tracker.update_state(losses["cosine_loss"])
            total = total + self.cosine_weight * losses["cosine_loss"]
        # Gradients are summed over replicas: each replica's loss is its share.
        return total / tf.distribute.get_strategy().num_replicas_in_sync

    def distillation_losses(self, batch, outputs):
        """The unweighted losses of a batch and the distiller's outputs on it:
        `soft_loss` and `mlm_loss` (means over the real predictions) and, when used,
        `cosine_loss` (mean over the real tokens)."""
        weights = ops.cast(batch["masked_lm_weights"], "float32")
        count = ops.maximum(ops.sum(weights), 1e-5)
        soft = soft_target_cross_entropy(outputs["teacher_mlm_logits"], outputs["mlm_logits"],
                                         self.temperature)
        hard = keras.losses.sparse_categorical_crossentropy(
            batch["masked_lm_ids"], ops.cast(outputs["mlm_logits"], "float32"), from_logits=True)
        losses = {"soft_loss": ops.sum(soft * weights) / count,
                  "mlm_loss": ops.sum(hard * weights) / count}
        if self.uses_cosine:
            losses["cosine_loss"] = hidden_cosine_loss(
                outputs["teacher_hidden"], outputs["student_hidden"], batch["padding_mask"])
        return losses

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        self.mlm_accuracy.update_state(x["masked_lm_ids"], y_pred["mlm_logits"],
                                       sample_weight=ops.cast(x["masked_lm_weights"], "float32"))
        return {metric.name: metric.result() for metric in self.metrics}

    @property
    def metrics(self):
        own = [self.soft_loss_tracker, self.mlm_loss_tracker]
        if self.uses_cosine:
            own.append(self.cosine_loss_tracker)
        own.append(self.mlm_accuracy)
        total = getattr(self, "_loss_tracker", None)  # Keras' total loss, once compiled
        return own if total is None else [total, *own]

    def get_config(self):
        return distiller_config(self, temperature=self.temperature, soft_weight=self.soft_weight,
                                mlm_weight=self.mlm_weight, cosine_weight=self.cosine_weight)

    @classmethod
    def from_config(cls, config):
        return cls(**constructor_arguments(config))


def _frozen_copy(teacher):
    """A non-trainable copy of a teacher `PretrainingModel`'s encoder (without a pooler, which
    the MLM head does not read) and MLM head, built in the current name scope and the global
    dtype policy (the student's precision)."""
    encoder = teacher.encoder
    copy = PretrainingModel(
        Encoder(encoder.config.replace(use_pooler=False), name=encoder.name),
        ("mlm",), mlm_activation=teacher.mlm_activation, name=teacher.name)
    copy.encoder.embeddings.set_weights(encoder.embeddings.get_weights())
    for source, target in zip(encoder.transformer_layers, copy.encoder.transformer_layers):
        target.set_weights(source.get_weights())
    copy.head_layers["mlm"].set_weights(teacher.head_layers["mlm"].get_weights())
    copy.trainable = False
    return copy
