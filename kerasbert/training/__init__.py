"""Training set-up: schedules, optimizers, task metrics and fine-tuning runs.

The names below are imported on first use, so that a binary importing one training module
(the loop, the strategy factory) does not load the task metrics' scikit-learn, SciPy and seqeval.
"""

from kerasbert.lazy_names import lazy_names

__getattr__, __dir__ = lazy_names(__name__, {
    "Adam": "kerasbert.training.optimizers:Adam",
    "AdamW": "kerasbert.training.optimizers:AdamW",
    "Lamb": "kerasbert.training.optimizers:Lamb",
    "MultipleNegativesRankingLoss":
        "kerasbert.training.contrastive_loss:MultipleNegativesRankingLoss",
    "NO_DECAY_PATTERNS": "kerasbert.training.optimizers:NO_DECAY_PATTERNS",
    "WarmupDecay": "kerasbert.training.schedules:WarmupDecay",
    "compute_glue_metrics": "kerasbert.training.glue_metrics:glue_metrics",
    "create_optimizer": "kerasbert.training.optimizers:create_optimizer",
    "entity_metrics": "kerasbert.training.entity_metrics",
    "entity_scores": "kerasbert.training.entity_metrics:entity_scores",
    "evaluate_squad": "kerasbert.training.squad_evaluation:evaluate_squad",
    "glue_metrics": "kerasbert.training.glue_metrics",
    "layerwise_lr_multipliers": "kerasbert.training.layerwise:layerwise_lr_multipliers",
    "retrieval_metrics": "kerasbert.training.retrieval_metrics",
    "squad_evaluation": "kerasbert.training.squad_evaluation",
})

__all__ = ["Adam", "AdamW", "Lamb", "MultipleNegativesRankingLoss", "NO_DECAY_PATTERNS", "WarmupDecay", "compute_glue_metrics",
           "create_optimizer", "entity_metrics", "entity_scores", "evaluate_squad",
           "glue_metrics", "layerwise_lr_multipliers", "retrieval_metrics", "squad_evaluation"]
