"""`kerasbert-distill`: distill a smaller student from a pretrained teacher (DistilBERT's recipe).

    kerasbert-distill --teacher=runs/bert --model_dir=runs/distilled \\
        --text_files='corpus/*.txt' --train_steps=100000 --batch_size=256 \\
        --learning_rate=5e-4 --warmup_steps=5000 --student_layers=6 \\
        --temperature=2 --soft_weight=5 --mlm_weight=2 --cosine_weight=1

`--teacher` is a model with a masked-LM head: a `.keras` pretraining model, a
`kerasbert-pretrain` (or `kerasbert-distill`) model directory, or a Hugging Face folder
(`*ForMaskedLM`, `*ForPreTraining`; for ELECTRA the generator, `ElectraForMaskedLM`, or a
`kerasbert-pretrain --objective=electra` run, whose generator teaches). The student is the
teacher's architecture with `--student_layers` layers (default: half) and any
`--student_overrides` (`EncoderConfig` fields, e.g. `hidden_size=256,num_heads=4`, or
`embedding_size` for ALBERT and ELECTRA students), initialized from the teacher: embeddings,
MLM head and one of every two layers (`--layer_map` picks others; for ALBERT it maps groups),
wherever the shapes match. The loss is `--soft_weight` x the soft-target cross-entropy at
`--temperature` (T^2 scaled) + `--mlm_weight` x the student's MLM loss + `--cosine_weight` x
the cosine loss of the last hidden states (which needs equal hidden sizes: otherwise give
`--cosine_weight=0`).

Batches come from `--input_files` (pretraining TFRecords) or `--text_files` (tokenized with
`--vocab_file` / `--tokenizer_dir`, or the teacher's own tokenizer when it has one). Flags can
come from a file (`--flagfile`). `--model_dir` gets checkpoints (restarted with the same
flags, a run resumes at the same step and data position), TensorBoard logs, the run record
`kerasbert_run.json` (the flags that shape the run and the student's config: a rerun with other
values is refused, naming them; `--overwrite` starts over, see
`kerasbert.training.run_record`) and `kerasbert_model.json`, so
`kerasbert-finetune --init_from=<model_dir>` starts from the student; at the end the student's
pretraining model is saved as `<model_dir>/student.keras`.

Task distillation: when `--task` is on the command line (`--task=T` or `--task T`), the whole
command line goes to `kerasbert-finetune`, whose `--teacher=PATH` (a fine-tuned model) then
teaches the student the task: `kerasbert-distill --task=T --teacher=PATH ...` is
`kerasbert-finetune --task=T --teacher=PATH ...` (same flags).
"""

import os
import re
import sys

from absl import flags, logging

from kerasbert.cli import instance_flags  # noqa: F401  (--objective, ...)
from kerasbert.cli import training_flags  # noqa: F401  (--model_dir, --strategy, ...)
from kerasbert.cli.data_flags import check_tokenizer_flags
from kerasbert.cli.flag_bounds import require_positive
from kerasbert.cli.one_line_errors import run_reporting_errors
from kerasbert.cli.pretraining_input import config_overrides, run_settings_from_flags

_TASK_FLAG = re.compile(r"--?task(=|$)")

FLAGS = flags.FLAGS
flags.DEFINE_string("teacher", None, "The teacher: a .keras pretraining model with an MLM head, "
                    "a kerasbert-pretrain model directory or a Hugging Face folder.",
                    required=True)
flags.DEFINE_integer("student_layers", None, "Student layers (ALBERT: layer applications); "
                     "default half the teacher's, or one per --layer_map entry.", lower_bound=1)
flags.DEFINE_list("layer_map", None, "The teacher layer each student layer copies (ALBERT: "
                  "the teacher group each student group copies); default evenly spaced, "
                  "first and last kept (12 -> 6: 0,2,4,7,9,11).")
flags.DEFINE_list("student_overrides", [], "EncoderConfig fields of the student that differ "
                  "from the teacher's, e.g. hidden_size=256,num_heads=4.")
flags.DEFINE_float("temperature", 2.0, "Softmax temperature of the soft targets.")
flags.DEFINE_float("soft_weight", 5.0, "Weight of the soft-target cross-entropy.", lower_bound=0.0)
flags.DEFINE_float("mlm_weight", 2.0, "Weight of the student's own MLM loss.", lower_bound=0.0)
flags.DEFINE_float("cosine_weight", 1.0, "Weight of the hidden-state cosine loss (0 when the "
                   "student's hidden size differs from the teacher's).", lower_bound=0.0)
require_positive("temperature")
# DistilBERT trains on single segments of contiguous sentences, without a pair objective.
FLAGS.set_default("objective", "full_sentences")


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.training.distillation.pretraining_run import (DistillationSettings,
                                                                 run_distillation)

    run = run_settings_from_flags()
    if FLAGS.vocab_file or FLAGS.tokenizer_dir:
        check_tokenizer_flags("--text_files")
    logging.set_verbosity(logging.WARNING)
    run_distillation(DistillationSettings(
        run, FLAGS.teacher, FLAGS.student_layers, _layer_map(),
        config_overrides(FLAGS.student_overrides, "--student_overrides"),
        temperature=FLAGS.temperature, soft_weight=FLAGS.soft_weight,
        mlm_weight=FLAGS.mlm_weight, cosine_weight=FLAGS.cosine_weight,
        tokenizer_source=_tokenizer_source()))


def _tokenizer_source():
    """How errors name the tokenizer the flags give, or None."""
    if FLAGS.vocab_file:
        return f"--vocab_file {FLAGS.vocab_file}"
    return f"--tokenizer_dir {FLAGS.tokenizer_dir}" if FLAGS.tokenizer_dir else None


def _layer_map():
    if FLAGS.layer_map is None:
        return None
    try:
        return [int(index) for index in FLAGS.layer_map]
    except ValueError:
        raise ValueError(f"--layer_map must be teacher layer indices separated by commas, got "
                         f"{','.join(FLAGS.layer_map)!r}") from None


def finetune_command(argv):
    """The command that runs `kerasbert-finetune` with `argv`: its console script beside this
    Python, else `python -P -m kerasbert.cli.finetune` (`-P`: the working folder is not put on
    `sys.path`, so a `keras.py` there is not imported in place of Keras)."""
    script = os.path.join(os.path.dirname(sys.executable), "kerasbert-finetune")
    if os.access(script, os.X_OK):
        return [script, *argv]
    return [sys.executable, "-P", "-m", "kerasbert.cli.finetune", *argv]


def run():
    argv = sys.argv[1:]
    if any(_TASK_FLAG.match(argument) for argument in argv):
        command = finetune_command(argv)
        os.execv(command[0], command)
    run_reporting_errors(main, "kerasbert-distill",
                         expected=("kerasbert.training.loop.TrainingError",))


if __name__ == "__main__":
    run()
