"""Training set-up: the pretraining learning-rate schedule and optimizers."""

from kerasbert.training.optimizers import NO_DECAY_PATTERNS, AdamW, Lamb, create_optimizer
from kerasbert.training.schedules import WarmupDecay

__all__ = ["AdamW", "Lamb", "NO_DECAY_PATTERNS", "WarmupDecay", "create_optimizer"]
