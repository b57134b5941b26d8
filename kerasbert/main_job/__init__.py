"""The main job: from the shipped raw text to a verified phone-format model, stage by stage.

Vocabulary -> pretraining TFRecords -> pretraining -> fine-tuning (pretrained and from
scratch) -> held-out test scores -> export -> raw-text classification on TFLite and the
SavedModel, each stage one of kerasbert's console scripts. `kerasbert-demo` runs it.
"""

from kerasbert.main_job.runner import StageError, run_main_job
from kerasbert.main_job.stages import FULL, QUICK, Settings

__all__ = ["FULL", "QUICK", "Settings", "StageError", "run_main_job"]
