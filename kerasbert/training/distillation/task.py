"""Task distillation: a frozen fine-tuned teacher teaches a student the same task from its outputs.

The student learns from the teacher's logits softened at a temperature T (Hinton et al., 2015;
the soft-target cross-entropy of `losses.py`, scaled by T^2) and from the hard labels with its
own task loss (`TaskModel.compile`'s): `alpha * soft + (1 - alpha) * hard`. Regression has no
distribution to soften: the soft term is the mean squared error to the teacher's prediction.
The teacher runs in the same training step with dropout off and never changes.
"""

import math

import keras
import tensorflow as tf

from kerasbert.models.batch_dicts import BatchDictTraining, restore_compile
from kerasbert.models.encoder import INPUT_NAMES
from kerasbert.models.tasks import TaskModel
from kerasbert.training.distillation.distiller_config import (constructor_arguments,
                                                               distiller_config)
from kerasbert.training.distillation.losses import soft_target_cross_entropy
from kerasbert.training.distillation.pretraining import TEACHER_SCOPE

class _SoftTargetLoss(keras.losses.Loss):
    """The soft-target cross-entropy of the student's logits (`y_pred`) against the teacher's
    (`y_true`) over the last axis, reduced like a Keras loss (distribution scaling included)."""

    def __init__(self, temperature, reduction="sum_over_batch_size", name="soft_targets"):
        super().__init__(name=name, reduction=reduction)
        self.temperature = temperature

    def call(self, teacher_logits, student_logits):
        return soft_target_cross_entropy(teacher_logits, student_logits, self.temperature)

    def get_config(self):
        return {**super().get_config(), "temperature": self.temperature}


def soft_losses(model, temperature):
    """`{output name: (loss, weight)}`: the soft-target terms of `model`'s task.

    Each loss takes `(teacher_output, student_output, sample_weight)` and averages like the
    hard loss `TaskModel.compile` gives the same output: over examples; over the labelled
    tokens for token classification (the sample weights of `TaskModel.split_batch`); the mean
    of the start and end terms for question answering. Regression: mean squared error.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> model = kerasbert.models.build_task_model(config, "question_answering")
    >>> {name: weight for name, (loss, weight) in soft_losses(model, 2.0).items()}
    {'start_logits': 0.5, 'end_logits': 0.5}
    """
    if model.task == "question_answering":
        return {"start_logits": (_SoftTargetLoss(temperature), 0.5),
                "end_logits": (_SoftTargetLoss(temperature), 0.5)}
    if model.is_regression:
        return {"logits": (keras.losses.MeanSquaredError(name="teacher_mse"), 1.0)}
    if model.task == "token_classification":
        return {"logits": (_SoftTargetLoss(temperature, "mean_with_sample_weight"), 1.0)}
    return {"logits": (_SoftTargetLoss(temperature), 1.0)}


@keras.saving.register_keras_serializable(package="kerasbert")
class TaskDistiller(BatchDictTraining, keras.Model):
    """A frozen fine-tuned teacher and the student it teaches, as one model to `fit`.

    `teacher` and `student` are `TaskModel`s of the same task and labels (any
    families, any sizes). Training minimises `alpha * soft + (1 - alpha) * hard`
    for the student's weights only: `soft` is the soft-target cross-entropy at
    `temperature` between the teacher's and the student's logits, scaled by
    `temperature ** 2` (`soft_losses`: per example; per labelled token for
    token classification, where positions labelled `IGNORED_LABEL`, padding
    included, are left out as the hard loss leaves them; the mean of start and
    end for question answering; the squared error to the teacher's prediction
    for regression); `hard` is the student's own task loss on the labels
    (`TaskModel.compile`). The logs add `soft_loss` and `hard_loss`.

    The distiller holds its own non-trainable copy of the teacher (`teacher`,
    created under the name scope `"teacher"`: its variable paths differ from the
    student's, so both go into one checkpoint), run with dropout off; the
    `teacher` given is left as it was. The model's outputs are the student's,
    so its metrics, `evaluate` and `predict` are the student's; `student` (the
    caller's model) is what to save. Task batch dicts go straight into `fit`.
    Under a `tf.distribute` strategy create the student and the distiller in
    its scope; each replica averages over its own examples as the hard loss
    does.

    >>> import numpy as np, kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
    ...     vocab_size=50, num_layers=2, hidden_size=16, num_heads=2, intermediate_size=32)
    >>> teacher = kerasbert.models.build_task_model(config, "sequence_classification",
    ...                                             num_labels=3)
    >>> student = kerasbert.models.build_task_model(config.replace(num_layers=1),
    ...                                             "sequence_classification", num_labels=3)
    >>> distiller = TaskDistiller(teacher, student, temperature=2.0, alpha=0.5)
    >>> distiller.compile(optimizer="adam")
    >>> ids = np.array([[2, 7, 8, 3], [2, 9, 3, 0]], "int32")
    >>> batch = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
    ...          "padding_mask": (ids != 0).astype("int32"), "labels": np.array([0, 2])}
    >>> logs = distiller.fit(batch, batch_size=2, verbose=0).history
    >>> sorted(logs), len(distiller.trainable_weights) == len(student.trainable_weights)
    (['accuracy', 'hard_loss', 'loss', 'soft_loss'], True)
    """

    def __init__(self, teacher, student, temperature=2.0, alpha=0.5, **kwargs):
        _check_pair(teacher, student)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
                math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature must be a positive number, got {temperature!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
            raise ValueError(f"alpha (the weight of the soft-target loss) must be in [0, 1], got "
                             f"{alpha!r}")
        super().__init__(**kwargs)

        # === Models ===
        with keras.name_scope(TEACHER_SCOPE):
            self.teacher = _frozen_copy(teacher)
        self.student = student

        # === Config ===
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self._input_names = list(INPUT_NAMES)
        self._soft_losses = soft_losses(student, self.temperature)
        self.soft_loss_tracker = keras.metrics.Mean(name="soft_loss")
        self.hard_loss_tracker = keras.metrics.Mean(name="hard_loss")
        self.built = True

    def call(self, inputs, training=None):
        return self.student(inputs, training=training)

    def split_batch(self, batch):
        """The student's `TaskModel.split_batch`."""
        return self.student.split_batch(batch)

    def compile(self, optimizer="adam", loss="auto", metrics="auto", weighted_metrics="auto",
                **kwargs):
        """Compile the student with these arguments (`TaskModel.compile`: the task's loss and
        metrics by default), then this model with the student's resolved loss, metrics and
        optimizer: the hard-label loss, and metrics of the student's predictions."""
        self.student.compile(optimizer=optimizer, loss=loss, metrics=metrics,
                             weighted_metrics=weighted_metrics, **kwargs)
        arguments = keras.saving.deserialize_keras_object(self.student.get_compile_config())
        arguments["optimizer"] = self.student.optimizer
        super().compile(**arguments)

    def compile_from_config(self, config):
        restore_compile(self, config)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        hard = super().compute_loss(x, y, y_pred, sample_weight, training=training)
        teacher_outputs = self.teacher(x, training=False)
        soft = 0.0
        for name, (loss, weight) in self._soft_losses.items():
            weights = sample_weight.get(name) if isinstance(sample_weight, dict) else (
                sample_weight)
            soft += weight * loss(tf.stop_gradient(teacher_outputs[name]), y_pred[name],
                                  sample_weight=weights)
        # The losses are divided by the number of replicas (Keras' convention); the logs are not.
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        self.soft_loss_tracker.update_state(soft * replicas)
        self.hard_loss_tracker.update_state(hard * replicas)
        return self.alpha * soft + (1.0 - self.alpha) * hard

    def get_config(self):
        return distiller_config(self, temperature=self.temperature, alpha=self.alpha)

    @classmethod
    def from_config(cls, config):
        return cls(**constructor_arguments(config))


def _frozen_copy(model):
    """A non-trainable copy of `model`, weights included, built in the current name scope."""
    copy = keras.layers.deserialize(keras.layers.serialize(model))
    copy.set_weights(model.get_weights())
    copy.trainable = False
    return copy


def _check_pair(teacher, student):
    """A `ValueError` naming the difference unless teacher and student are `TaskModel`s of the
    same task with the same labels."""
    for role, model in (("teacher", teacher), ("student", student)):
        if not isinstance(model, TaskModel):
            raise TypeError(f"The {role} must be a kerasbert TaskModel (a fine-tuning model), "
                            f"got {type(model).__name__}")
    if teacher.task != student.task:
        raise ValueError(f"The teacher is a {teacher.task} model but the student a "
                         f"{student.task} model")
    # A regression output's one "label name" means nothing.
    if teacher.num_labels != student.num_labels or (
            teacher.id2label != student.id2label and not student.is_regression):
        raise ValueError(f"The teacher's labels {describe_labels(teacher)} differ from the "
                         f"student's {describe_labels(student)}")


def describe_labels(model_or_labels, shown=6):
    """A short description of a task model's (or a list's) labels for error messages.

    >>> describe_labels(["negative", "neutral", "positive"])
    '(3: negative, neutral, positive)'
    >>> describe_labels([str(number) for number in range(10)], shown=3)
    '(10: 0, 1, 2, ...)'
    """
    labels = model_or_labels
    if isinstance(model_or_labels, TaskModel):
        if model_or_labels.id2label is None:
            return f"({model_or_labels.num_labels} output(s) per position, no label names)"
        labels = [model_or_labels.id2label[index] for index in sorted(model_or_labels.id2label)]
    if labels is None:
        return "(none: regression)"
    labels = list(labels)
    more = ", ..." if len(labels) > shown else ""
    return f"({len(labels)}: {', '.join(map(str, labels[:shown]))}{more})"


def check_teacher(teacher, task, labels, source, task_name="the task"):
    """A `ValueError` naming `source` (the teacher's path) and `task_name` unless `teacher` is
    a `task` (`kerasbert.models.TASK_MODEL_KINDS`) model whose label names are `labels` in id order
    (None: span and choice tasks, and regression).

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    >>> teacher = kerasbert.models.build_task_model(config, "sequence_classification",
    ...                                             id2label=["no", "yes"])
    >>> check_teacher(teacher, "sequence_classification", ["yes", "no"], "teacher.keras", "rte")
    Traceback (most recent call last):
    ...
    ValueError: --teacher teacher.keras predicts the labels (2: no, yes), but rte has (2: yes, no)
    """
    if teacher.task != task:
        raise ValueError(f"--teacher {source} is a {teacher.task} model, but {task_name} needs "
                         f"a {task} model")
    if labels is None:
        matches = teacher.id2label is None or teacher.is_regression
    else:
        matches = teacher.id2label is not None and not teacher.is_regression and [
            teacher.id2label[index] for index in sorted(teacher.id2label)] == list(labels)
    if not matches:
        raise ValueError(f"--teacher {source} predicts the labels {describe_labels(teacher)}, "
                         f"but {task_name} has {describe_labels(labels)}")
