"""The pretraining-instance flags the data and pretraining binaries share (defined once per
process, like `data_flags`)."""

from absl import flags

from kerasbert.cli.flag_bounds import require_positive
from kerasbert.choices import OBJECTIVES

flags.DEFINE_enum("objective", "nsp", OBJECTIVES, "Instances (and, for training, heads): nsp "
                  "(BERT: MLM+NSP), sop (ALBERT: MLM+SOP), full_sentences / doc_sentences "
                  "(RoBERTa: MLM), electra (generator + replaced-token detection).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Most masked tokens per instance.",
                     lower_bound=1)
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of the tokens to mask.", upper_bound=1.0)
require_positive("masked_lm_prob")
