"""Distillation losses: soft targets at a temperature (Hinton et al., 2015) and the cosine
between hidden states (DistilBERT, Sanh et al., 2019).

Every loss computes in float32 whatever the inputs' dtype (mixed precision), and none reduces
over the batch: the caller weights and averages (over real MLM predictions, over tokens).
"""

from keras import ops


def soft_target_cross_entropy(teacher_logits, student_logits, temperature, axis=-1):
    """`T^2 * cross_entropy(softmax(teacher / T), log_softmax(student / T))`, summed over
    `axis` (the classes) and nothing else: one value per example (per MLM prediction).

    It differs from `T^2 * KL(teacher || student)` by `T^2` times the teacher's entropy, which
    has no gradient with respect to the student, so both train alike; the `T^2` keeps the
    gradient's scale independent of `T` (Hinton et al.). DistilBERT's `loss_ce` is this with
    `T = 2`.

    >>> import numpy as np
    >>> teacher = np.array([[2.0, 0.0, -1.0]], "float32")
    >>> float(soft_target_cross_entropy(teacher, teacher, 1.0)[0])  # the teacher's entropy
    0.52...
    >>> tuple(soft_target_cross_entropy(np.zeros((4, 5, 7)), np.zeros((4, 5, 7)), 2.0).shape)
    (4, 5)
    """
    _check_temperature(temperature)
    teacher = ops.cast(teacher_logits, "float32") / temperature
    student = ops.cast(student_logits, "float32") / temperature
    targets = ops.stop_gradient(ops.softmax(teacher, axis=axis))
    return -(temperature ** 2) * ops.sum(targets * ops.log_softmax(student, axis=axis), axis=axis)


def binary_soft_target_cross_entropy(teacher_logits, student_logits, temperature):
    """The soft-target loss of one-logit (sigmoid) outputs, elementwise and `T^2` scaled:
    `T^2 * binary_cross_entropy(sigmoid(teacher / T), sigmoid(student / T))`.

    >>> import numpy as np
    >>> float(binary_soft_target_cross_entropy(np.array([0.0]), np.array([0.0]), 2.0)[0])
    2.77...
    """
    _check_temperature(temperature)
    teacher = ops.cast(teacher_logits, "float32") / temperature
    student = ops.cast(student_logits, "float32") / temperature
    targets = ops.stop_gradient(ops.sigmoid(teacher))
    return (temperature ** 2) * ops.binary_crossentropy(targets, student, from_logits=True)


def hidden_cosine_loss(teacher_hidden, student_hidden, mask):
    """The mean of `1 - cos(teacher, student)` over the positions where `mask` is nonzero:
    `teacher_hidden` and `student_hidden` are `[..., hidden]` (the same hidden size), `mask`
    is `[...]` (e.g. the padding mask `[batch, seq]`). A scalar; 0 when nothing is unmasked.
    DistilBERT's `loss_cos`, which aligns the directions of the last hidden states.

    >>> import numpy as np
    >>> hidden = np.array([[[1.0, 0.0], [0.0, 1.0]]], "float32")
    >>> float(hidden_cosine_loss(hidden, hidden, np.array([[1, 1]])))
    0.0
    >>> float(hidden_cosine_loss(hidden, -hidden, np.array([[1, 0]])))
    2.0
    """
    teacher = ops.stop_gradient(ops.cast(teacher_hidden, "float32"))
    student = ops.cast(student_hidden, "float32")
    if teacher.shape[-1] is not None and student.shape[-1] is not None and (
            teacher.shape[-1] != student.shape[-1]):
        raise ValueError(f"hidden_cosine_loss needs equal hidden sizes, got the teacher's "
                         f"{teacher.shape[-1]} and the student's {student.shape[-1]}")
    norms = ops.sqrt(ops.sum(ops.square(teacher), -1) * ops.sum(ops.square(student), -1))
    cosine = ops.sum(teacher * student, -1) / ops.maximum(norms, 1e-8)
    weights = ops.cast(ops.not_equal(mask, 0), "float32")
    return ops.sum((1.0 - cosine) * weights) / ops.maximum(ops.sum(weights), 1.0)


def _check_temperature(temperature):
    if isinstance(temperature, (int, float)) and not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
