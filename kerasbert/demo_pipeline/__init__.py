"""The demo pipeline behind `kerasbert-demo` (the "main job" of the product card, hence
`run_main_job`): from the shipped raw text to a verified phone-format model, stage by stage.

Vocabulary -> pretraining TFRecords -> pretraining -> fine-tuning (pretrained and from
scratch) -> held-out test scores -> export -> raw-text classification on TFLite and the
SavedModel, each stage one of kerasbert's console scripts. `kerasbert-demo` runs it.
"""

from kerasbert.demo_pipeline.runner import StageError, run_main_job
from kerasbert.demo_pipeline.stages import FULL, QUICK, Settings

__all__ = ["FULL", "QUICK", "Settings", "StageError", "run_main_job"]
