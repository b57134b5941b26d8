"""`kerasbert-pretrain`: pretrain a zoo model on text or on pretraining TFRecords.

    kerasbert-pretrain --model=bert_base_uncased --text_files='corpus/*.txt' \\
        --vocab_file=vocab.txt --objective=nsp --model_dir=runs/bert \\
        --train_steps=100000 --batch_size=256 --learning_rate=1e-4 --warmup_steps=10000 \\
        --strategy=mirrored --mixed_precision=mixed_bfloat16

Flags can also come from a file (`--flagfile=run.flags`, absl's). Restarted with
the same flags, it resumes from the last checkpoint in `--model_dir`, at the
same step and position in the data. The first start records the flags that shape
the run and the model's config in `--model_dir/kerasbert_run.json`; a rerun with
other values is refused, naming them, and `--overwrite` starts over
(`kerasbert.training.run_record`). `--model_dir` also gets `kerasbert_model.json`
(the model's config and tokenizer), so `kerasbert-finetune --init_from=<model_dir>`
starts from the latest checkpoint.
"""

from absl import app, flags, logging

from kerasbert.cli import instance_flags  # noqa: F401  (defines --objective, ...)
from kerasbert.cli.pretraining_input import config_overrides, run_settings_from_flags
from kerasbert.cli import training_flags  # noqa: F401  (--model_dir, --strategy, ...)
from kerasbert.cli.data_flags import check_tokenizer_flags
from kerasbert.cli.flag_bounds import require_positive
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "Zoo preset, e.g. bert_base_uncased.", required=True)
flags.DEFINE_list("config_overrides", [], "EncoderConfig fields to change, e.g. "
                  "num_layers=2,hidden_size=128.")
flags.DEFINE_float("generator_ratio", 0.25, "ELECTRA: generator hidden size / discriminator's.")
require_positive("generator_ratio")
flags.DEFINE_string("init_checkpoint", None, "Initial encoder weights: a Hugging Face model "
                    "directory or a kerasbert checkpoint (model_dir/ckpt-N).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.training.pretraining_run import PretrainingSettings, run_pretraining

    try:
        run = run_settings_from_flags()
        overrides = config_overrides(FLAGS.config_overrides, "--config_overrides")
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    if FLAGS.text_files is not None or FLAGS.vocab_file or FLAGS.tokenizer_dir:
        check_tokenizer_flags("--text_files")  # the tokenizer sizes the vocabulary
    logging.set_verbosity(logging.WARNING)
    run_pretraining(PretrainingSettings(run, FLAGS.model, overrides, FLAGS.generator_ratio,
                                        FLAGS.init_checkpoint))


def run():
    run_reporting_errors(main, "kerasbert-pretrain", expected=("kerasbert.training.loop.TrainingError",))


if __name__ == "__main__":
    run()
