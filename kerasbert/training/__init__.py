"""Training set-up: the pretraining learning-rate schedule and optimizers."""

from kerasbert.training.optimizers import NO_DECAY_PATTERNS, Adam, AdamW, Lamb, create_optimizer
from kerasbert.training.schedules import WarmupDecay

__all__ = ["Adam", "AdamW", "Lamb", "NO_DECAY_PATTERNS", "WarmupDecay", "create_optimizer"]
