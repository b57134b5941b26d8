"""Knowledge distillation: small students trained from a teacher's outputs.

Pretraining distillation (DistilBERT's recipe): `student_pretraining_model` makes a student
from a teacher with an MLM head, `PretrainingDistiller` trains it with `fit`; binary
`kerasbert-distill`. Task distillation: `TaskDistiller` (`kerasbert-finetune --teacher=PATH`).
"""

from kerasbert.training.distillation.losses import (binary_soft_target_cross_entropy,
                                                     hidden_cosine_loss,
                                                     soft_target_cross_entropy)
from kerasbert.training.distillation.pretraining import PretrainingDistiller
from kerasbert.training.distillation.students import (check_layer_map, copy_encoder_weights,
                                                       copy_heads, default_layer_map,
                                                       student_config, student_encoder,
                                                       student_pretraining_model,
                                                       student_task_model)
from kerasbert.training.distillation.task import TaskDistiller
from kerasbert.training.distillation.teachers import load_teacher, masked_lm_teacher

__all__ = ["PretrainingDistiller", "TaskDistiller", "binary_soft_target_cross_entropy",
           "check_layer_map", "copy_encoder_weights", "copy_heads", "default_layer_map",
           "hidden_cosine_loss", "load_teacher", "masked_lm_teacher",
           "soft_target_cross_entropy", "student_config", "student_encoder",
           "student_pretraining_model", "student_task_model"]
