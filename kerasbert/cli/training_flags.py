"""The training flags the pretraining and fine-tuning binaries share (absl allows a flag to be
defined once per process, so they live here; each binary sets its own defaults with
`flags.set_default`)."""

from absl import flags

from kerasbert.cli.flag_bounds import require_positive
from kerasbert.choices import STRATEGIES

flags.DEFINE_string("model_dir", None, "Checkpoints, TensorBoard logs and results.",
                    required=True)
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate.")
flags.DEFINE_float("weight_decay", 0.01, "Decoupled weight decay (not LayerNorm or bias).",
                   lower_bound=0.0)
flags.DEFINE_integer("seed", 0, "Seed of the initial weights, dropout and data order.")
flags.DEFINE_enum("strategy", "one_device", STRATEGIES, "tf.distribute strategy.")
flags.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
flags.DEFINE_integer("num_gpus", 0, "GPUs for one_device / mirrored.", lower_bound=0)
flags.DEFINE_enum("mixed_precision", "float32", ["float32", "mixed_float16", "mixed_bfloat16"],
                  "Dtype policy (float16 gets loss scaling).")
flags.DEFINE_boolean("jit_compile", False, "Compile each training step with XLA.")
flags.DEFINE_integer("checkpoint_interval", 1000, "Steps between checkpoints.", lower_bound=1)
flags.DEFINE_integer("max_recoveries", 0, "Times a non-finite loss is recovered from: back to the "
                     "last checkpoint, then the offending batch is skipped (0: stop at the first, "
                     "with an error naming the step).", lower_bound=0)
require_positive("learning_rate")
flags.DEFINE_boolean("overwrite", False, "Start over: remove what an earlier run of this binary "
                     "wrote into --model_dir (its run record, checkpoints, logs and results; "
                     "nothing else) instead of continuing it.")
