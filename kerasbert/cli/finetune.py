"""`kerasbert-finetune`: fine-tune a pretrained encoder on GLUE, SQuAD, CoNLL-2003 or SWAG.

    kerasbert-finetune --task=mrpc --data_dir=glue/MRPC --init_from=hf/bert-base-uncased \\
        --model_dir=runs/mrpc --num_train_epochs=3 --learning_rate=2e-5 --num_seeds=5

File flags default to the official file names under `--data_dir` (GLUE's `train.tsv`,
`dev.tsv` / MNLI's `dev_matched.tsv` and `dev_mismatched.tsv`, `test.tsv`; SQuAD's
`train-v1.1.json` / `dev-v1.1.json` (v2.0 alike); CoNLL-2003's `eng.train`, `eng.testa`,
`eng.testb`; SWAG's `train.csv`, `val.csv`, `test.csv`). The tokenizer comes from
`--init_from` (a Hugging Face folder with tokenizer files, a `kerasbert-pretrain` directory) or
from `--vocab_file` / `--tokenizer_dir`.

`--model_dir` gets `eval_results.json`, the dev predictions (`dev_predictions.tsv`;
`predictions.json`, `null_odds.json`, `nbest_predictions.json`; `dev_predictions.txt`), the best
model as `model.keras`, test predictions (GLUE submission files), checkpoints and TensorBoard
logs. Restarted with the same flags, it resumes from the last checkpoint and ends as an
uninterrupted run would, bit for bit. The first start records the flags that shape the run and
the model's config in `kerasbert_run.json`; a rerun with other values is refused, naming them,
and `--overwrite` starts over (`kerasbert.training.run_record`). Flags can come from a file
(`--flagfile`).

Task distillation: `--teacher=PATH` (a fine-tuned task model of the same task and labels: a
`.keras` file, a `kerasbert-finetune --model_dir`, or a Hugging Face task folder) teaches the
model being fine-tuned, the student, from its logits at `--temperature`, weighted
`--distill_alpha` against the hard labels. The student starts from `--init_from`, or from
`--student_layers` of the teacher's layers (with the teacher's head); it is what is evaluated and
saved.

    kerasbert-finetune --task=sst2 --data_dir=glue/SST-2 --teacher=runs/sst2_large \
        --student_layers=6 --vocab_file=vocab.txt --model_dir=runs/sst2_distilled
"""

from absl import app, flags, logging

from kerasbert.choices import FINETUNING_TASK_NAMES, POOLING_MODES
from kerasbert.cli import training_flags  # noqa: F401  (--model_dir, --strategy, ...)
from kerasbert.cli.data_flags import check_tokenizer_flags, tokenizer_arguments
from kerasbert.cli.flag_bounds import require_positive
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
FLAGS.set_default("learning_rate", 5e-5)  # as in the BERT paper
flags.DEFINE_enum("task", None, FINETUNING_TASK_NAMES, "The task.", required=True)
flags.DEFINE_string("data_dir", None, "Folder of the task's files under their official names.")
flags.DEFINE_string("train_file", None, "Training file (default: the official name under "
                    "--data_dir).")
flags.DEFINE_list("dev_file", None, "Dev file(s), evaluated after each epoch (default: the "
                  "official names under --data_dir; MNLI: matched and mismatched).")
flags.DEFINE_list("test_file", None, "Test file(s) to predict with the best model (default: "
                  "the official names under --data_dir, where present).")
flags.DEFINE_string("init_from", None, "Pretrained model: a Hugging Face folder, a .keras file "
                    "or a kerasbert-pretrain --model_dir.")
flags.DEFINE_enum("mode", "train_and_eval", ["train_and_eval", "eval", "predict"],
                  "train_and_eval: fine-tune, evaluate every epoch, predict the test files; "
                  "eval / predict: with the model in --model_dir (or a .keras / Hugging Face "
                  "task model in --init_from).")
flags.DEFINE_integer("doc_stride", 128, "SQuAD: the step, in tokens, between the starts of a "
                     "long context's windows (Google's meaning; Hugging Face's `stride` is the "
                     "overlap instead: max_seq_length - question - doc_stride).", lower_bound=1)
flags.DEFINE_integer("max_query_length", 64, "SQuAD: question tokens kept.", lower_bound=1)
flags.DEFINE_integer("n_best_size", 20, "SQuAD: candidate answers kept per question.",
                     lower_bound=1)
flags.DEFINE_integer("max_answer_length", 30, "SQuAD: longest answer, in tokens.", lower_bound=1)
flags.DEFINE_float("null_score_diff_threshold", 0.0, "SQuAD v2.0: predict no answer when the "
                   "null score exceeds the best answer's by more than this.")
flags.DEFINE_boolean("tune_null_threshold", False, "SQuAD v2.0: fit the null threshold on a "
                     "held-out twentieth of the training file's paragraphs (never on dev).")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs (a fraction trains part of the last one).")
flags.DEFINE_integer("max_train_examples", None, "Train on the first N training examples only.",
                     lower_bound=1)
flags.DEFINE_boolean("from_scratch", False, "Fine-tune --init_from's architecture from random "
                     "weights instead of its pretrained ones (the baseline pretraining must beat).")
flags.DEFINE_boolean("no_length_buckets", False, "Pad every batch to --max_seq_length instead "
                     "of padding each batch to the smallest of "
                     "16, 32, 64, 128, 256, 384, 512 (below --max_seq_length) that fits it "
                     "(SQuAD and CoNLL-2003: training batches only).")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.", lower_bound=1)
flags.DEFINE_string("tf_data_service", None, "grpc://HOST:PORT of a tf.data service dispatcher "
                    "(kerasbert-data-service): its workers make the training batches, each pass "
                    "over the training set split among them; the data position is then not "
                    "checkpointed.")
flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.", lower_bound=1)
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the steps of linear warmup; linear "
                   "decay to 0 after it.", lower_bound=0.0, upper_bound=1.0)
flags.DEFINE_float("layerwise_lr_decay", None, "ELECTRA's recipe: each lower layer learns at "
                   "this factor times the rate of the layer above (e.g. 0.8).", upper_bound=1.0)
flags.DEFINE_float("dropout", None, "Head dropout (default: the encoder's).", lower_bound=0.0,
                   upper_bound=1.0)
flags.DEFINE_enum("pooling", None, list(POOLING_MODES), "text_embedding: how token vectors "
                  "become one vector (default: a sentence-transformers --init_from's, else mean).")
flags.DEFINE_boolean("normalize", None, "text_embedding: scale the vectors to unit length "
                     "(default: a sentence-transformers --init_from's choice, else true).")
flags.DEFINE_integer("num_seeds", 1, "Runs with seeds seed, seed+1, ...: each metric's median "
                     "and spread are reported.", lower_bound=1)
flags.DEFINE_string("teacher", None, "Task distillation: a fine-tuned model of the same task and "
                    "labels (a .keras file, a kerasbert-finetune --model_dir or a Hugging Face "
                    "task folder) whose soft targets the fine-tuned model learns from.")
flags.DEFINE_float("temperature", 2.0, "With --teacher: the softmax temperature of the soft "
                   "targets (the soft loss is scaled by its square).")
flags.DEFINE_float("distill_alpha", 0.5, "With --teacher: the weight of the soft-target loss; "
                   "the hard-label loss gets 1 - this.", lower_bound=0.0, upper_bound=1.0)
flags.DEFINE_integer("student_layers", None, "With --teacher and no --init_from: the student is "
                     "this many of the teacher's layers (evenly spaced from the first to the "
                     "last) with its embeddings and head.", lower_bound=1)
require_positive("num_train_epochs", "layerwise_lr_decay", "temperature")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.training.finetune import FinetuneRun, FinetuneSettings, run_finetuning
    from kerasbert.training.run_record import recorded_flags

    logging.set_verbosity(logging.WARNING)
    if FLAGS.vocab_file is not None or FLAGS.tokenizer_dir is not None:
        check_tokenizer_flags("Fine-tuning")
    if FLAGS.teacher is None and FLAGS.mode == "train_and_eval":
        given = [f"--{name}" for name in ("temperature", "distill_alpha", "student_layers")
                 if FLAGS[name].present]
        if given:
            raise app.UsageError(f"{', '.join(given)} without --teacher: give --teacher=PATH (a "
                                 "fine-tuned model) to distill")
    settings = FinetuneSettings(
        max_seq_length=FLAGS.max_seq_length, length_buckets=not FLAGS.no_length_buckets,
        doc_stride=FLAGS.doc_stride,
        max_query_length=FLAGS.max_query_length, n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length, max_train_examples=FLAGS.max_train_examples,
        null_score_diff_threshold=FLAGS.null_score_diff_threshold,
        tune_null_threshold=FLAGS.tune_null_threshold, num_train_epochs=FLAGS.num_train_epochs,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        learning_rate=FLAGS.learning_rate, warmup_proportion=FLAGS.warmup_proportion,
        weight_decay=FLAGS.weight_decay, layerwise_lr_decay=FLAGS.layerwise_lr_decay,
        dropout=FLAGS.dropout, jit_compile=FLAGS.jit_compile,
        checkpoint_interval=FLAGS.checkpoint_interval, max_recoveries=FLAGS.max_recoveries,
        tf_data_service=FLAGS.tf_data_service, pooling=FLAGS.pooling,
        normalize=FLAGS.normalize)
    run_finetuning(FinetuneRun(
        FLAGS.task, FLAGS.model_dir, settings, FLAGS.mode, data_dir=FLAGS.data_dir,
        train_file=FLAGS.train_file, dev_file=FLAGS.dev_file, test_file=FLAGS.test_file,
        init_from=FLAGS.init_from, from_scratch=FLAGS.from_scratch,
        tokenizer=tokenizer_arguments(), teacher=FLAGS.teacher, temperature=FLAGS.temperature,
        distill_alpha=FLAGS.distill_alpha, student_layers=FLAGS.student_layers,
        seeds=tuple(FLAGS.seed + offset for offset in range(FLAGS.num_seeds)),
        strategy=FLAGS.strategy, num_gpus=FLAGS.num_gpus, tpu=FLAGS.tpu,
        mixed_precision=FLAGS.mixed_precision, overwrite=FLAGS.overwrite,
        recorded_flags=recorded_flags(FLAGS)))


def run():
    run_reporting_errors(main, "kerasbert-finetune", expected=("kerasbert.training.loop.TrainingError",))


if __name__ == "__main__":
    run()
