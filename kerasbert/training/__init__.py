"""Training set-up: schedules, optimizers, task metrics and fine-tuning runs."""

from kerasbert.training import entity_metrics, glue_metrics, squad_evaluation
from kerasbert.training.entity_metrics import entity_scores
from kerasbert.training.glue_metrics import glue_metrics as compute_glue_metrics
from kerasbert.training.layerwise import layerwise_lr_multipliers
from kerasbert.training.optimizers import NO_DECAY_PATTERNS, Adam, AdamW, Lamb, create_optimizer
from kerasbert.training.schedules import WarmupDecay
from kerasbert.training.squad_evaluation import evaluate_squad

__all__ = ["Adam", "AdamW", "Lamb", "NO_DECAY_PATTERNS", "WarmupDecay", "compute_glue_metrics",
           "create_optimizer", "entity_metrics", "entity_scores", "evaluate_squad",
           "glue_metrics", "layerwise_lr_multipliers", "squad_evaluation"]
