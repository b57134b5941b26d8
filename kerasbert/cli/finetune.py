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

from kerasbert import file_system
from kerasbert.choices import FINETUNING_TASK_NAMES
from kerasbert.cli import training_flags  # noqa: F401  (--model_dir, --strategy, ...)
from kerasbert.cli.data_flags import tokenizer_from_flags
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
    import keras

    from kerasbert.data.service import service_address
    from kerasbert.training.finetune import FinetuneSettings
    from kerasbert.training.finetuning_tasks import get_finetuning_task

    logging.set_verbosity(logging.WARNING)
    task = get_finetuning_task(FLAGS.task)
    files = _task_files(task)
    if FLAGS.tf_data_service is not None:
        service_address(FLAGS.tf_data_service)  # a malformed address is named before any work
    settings = FinetuneSettings(
        max_seq_length=FLAGS.max_seq_length, doc_stride=FLAGS.doc_stride,
        max_query_length=FLAGS.max_query_length, n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length, max_train_examples=FLAGS.max_train_examples,
        null_score_diff_threshold=FLAGS.null_score_diff_threshold,
        tune_null_threshold=FLAGS.tune_null_threshold, num_train_epochs=FLAGS.num_train_epochs,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        learning_rate=FLAGS.learning_rate, warmup_proportion=FLAGS.warmup_proportion,
        weight_decay=FLAGS.weight_decay, layerwise_lr_decay=FLAGS.layerwise_lr_decay,
        dropout=FLAGS.dropout, jit_compile=FLAGS.jit_compile,
        checkpoint_interval=FLAGS.checkpoint_interval, max_recoveries=FLAGS.max_recoveries,
        tf_data_service=FLAGS.tf_data_service)
    if FLAGS.tune_null_threshold and FLAGS.task != "squad_v2":
        raise app.UsageError("--tune_null_threshold is for --task=squad_v2")
    keras.mixed_precision.set_dtype_policy(FLAGS.mixed_precision)
    if FLAGS.teacher is not None and FLAGS.mode != "train_and_eval":
        raise app.UsageError("--teacher is for --mode=train_and_eval")
    if FLAGS.mode == "train_and_eval":
        _train_and_eval(task, files, settings)
    else:
        _evaluate_or_predict(task, files, settings)


def _train_and_eval(task, files, settings):
    from kerasbert.models.encoder import build_encoder
    from kerasbert.training.distribute import get_strategy, strategy_summary
    from kerasbert.training.finetune import EVAL_RESULTS, finetune, run_outputs
    from kerasbert.training.pretrained_sources import pretrained_source
    from kerasbert.training.run_record import RunRecord, recorded_flags

    if files.train is None:
        raise app.UsageError("train_and_eval needs --train_file or --data_dir")
    record = RunRecord(FLAGS.model_dir, "kerasbert-finetune", recorded_flags(FLAGS), run_outputs,
                       FLAGS.overwrite)
    record.check()  # before anything is written into --model_dir
    distillation = _distillation()
    if FLAGS.init_from is None and distillation is None:
        raise app.UsageError("train_and_eval needs --init_from (the pretrained model)")
    strategy = get_strategy(FLAGS.strategy, num_gpus=FLAGS.num_gpus, tpu=FLAGS.tpu)
    if FLAGS.init_from is None:
        tokenizer = _tokenizer(_hf_tokenizer(FLAGS.teacher), "--teacher")
        make_encoder = None
        print(f"{strategy_summary(strategy)}; {task.name} from {FLAGS.student_layers} layers of "
              f"the teacher")
    else:
        source = pretrained_source(FLAGS.init_from)
        tokenizer = _tokenizer(source.tokenizer)
        origin = "random weights in the architecture of" if FLAGS.from_scratch else "pretrained"
        print(f"{strategy_summary(strategy)}; {task.name} from {origin} {FLAGS.init_from} "
              f"({source.kind})")
        make_encoder = source.make_encoder
        if FLAGS.from_scratch:
            def make_encoder():
                return build_encoder(source.make_encoder().config)
    if distillation is not None:
        print(f"Distilled from the teacher {FLAGS.teacher} at temperature {FLAGS.temperature}, "
              f"soft-target weight {FLAGS.distill_alpha}")
    seeds = [FLAGS.seed + offset for offset in range(FLAGS.num_seeds)]
    results = finetune(task, make_encoder, tokenizer, files, FLAGS.model_dir, settings,
                       strategy, seeds, distillation=distillation, run_record=record)
    print(f"\nBest dev results ({file_system.join(FLAGS.model_dir, EVAL_RESULTS)}): " + ", ".join(
        f"{name} {value:.4f}" for name, value in results.items() if isinstance(value, float)))


def _distillation():
    """The `Distillation` the flags ask for (the teacher loaded), or None without --teacher."""
    from kerasbert.training.finetune import Distillation, load_task_teacher

    distillation_flags = ("temperature", "distill_alpha", "student_layers")
    if FLAGS.teacher is None:
        given = [f"--{name}" for name in distillation_flags if FLAGS[name].present]
        if given:
            raise app.UsageError(f"{', '.join(given)} without --teacher: give --teacher=PATH (a "
                                 "fine-tuned model) to distill")
        return None
    if FLAGS.student_layers is not None and FLAGS.init_from is not None:
        raise app.UsageError("Give --init_from (the student's start) or --student_layers (a "
                             "student made of the teacher's layers), not both")
    if FLAGS.student_layers is None and FLAGS.init_from is None:
        raise app.UsageError("With --teacher, give --init_from (the student's start) or "
                             "--student_layers (a student made of the teacher's layers)")
    if FLAGS.from_scratch and FLAGS.init_from is None:
        raise app.UsageError("--from_scratch drops the weights of --init_from; there is none")
    return Distillation(load_task_teacher(FLAGS.teacher), FLAGS.teacher,
                        temperature=FLAGS.temperature, alpha=FLAGS.distill_alpha,
                        student_layers=FLAGS.student_layers)


def _hf_tokenizer(path):
    """The tokenizer of a Hugging Face folder at `path`, or None."""
    from kerasbert.training.pretrained_sources import pretrained_source

    if not file_system.isfile(file_system.join(path, "config.json")):
        return None
    return pretrained_source(path).tokenizer


def _evaluate_or_predict(task, files, settings):
    import keras

    from kerasbert.convert import from_hf
    from kerasbert.training.finetune import EVAL_RESULTS, MODEL_FILE, evaluate_dev, write_json
    from kerasbert.training.pretrained_sources import pretrained_source

    model_path = file_system.join(FLAGS.model_dir, MODEL_FILE)
    source = (model_path if file_system.isfile(model_path) or not FLAGS.init_from
              else FLAGS.init_from)
    if source.endswith(".keras"):
        model = keras.models.load_model(source)
        tokenizer = _tokenizer(None)
    else:
        model = from_hf(source)
        tokenizer = _tokenizer(pretrained_source(source).tokenizer)
    if getattr(model, "task", None) != task.model_task:
        raise app.UsageError(f"{source} is not a {task.model_task} model")
    settings.labels = [model.id2label[index] for index in sorted(model.id2label)] if \
        model.id2label else None
    file_system.makedirs(FLAGS.model_dir)
    if FLAGS.mode == "eval":
        entry = evaluate_dev(task, model, tokenizer, [(path, task.read(path, "dev"))
                                                      for path in files.dev], settings, FLAGS.model_dir)
        write_json(file_system.join(FLAGS.model_dir, EVAL_RESULTS), entry)
        print(", ".join(f"{name} {value:.4f}" for name, value in entry.items()
                        if isinstance(value, float)))
        return
    if not files.test:
        raise app.UsageError("predict needs --test_file or a test file under --data_dir")
    for path in files.test:
        print(task.predict(model, task.read(path, "test"), tokenizer, settings, settings.eval_batch_size,
                           FLAGS.model_dir, path))


def _task_files(task):
    from kerasbert.training.finetune import TaskFiles

    def official(role, required):
        names = [file_system.join(FLAGS.data_dir, name) for name in task.default_files[role]]
        return [path for path in names if required or file_system.exists(path)]

    if FLAGS.data_dir is None and FLAGS.train_file is None and FLAGS.mode == "train_and_eval":
        raise app.UsageError("Give --data_dir or --train_file")
    train = FLAGS.train_file or (official("train", True)[0] if FLAGS.data_dir else None)
    dev = FLAGS.dev_file or (official("dev", True) if FLAGS.data_dir else [])
    test = FLAGS.test_file or (official("test", False) if FLAGS.data_dir else [])
    if FLAGS.mode != "predict" and not dev:
        raise app.UsageError("Give --dev_file or --data_dir")
    for path in ([train] if train and FLAGS.mode == "train_and_eval" else []) + dev + list(test):
        if not file_system.isfile(path):
            raise FileNotFoundError(f"{task.name} file {path} does not exist")
    return TaskFiles(train, dev, list(test))


def _tokenizer(default, source_flag="--init_from"):
    if FLAGS.vocab_file is not None or FLAGS.tokenizer_dir is not None:
        return tokenizer_from_flags("Fine-tuning")
    if default is None:
        raise app.UsageError(f"{source_flag} has no tokenizer: give --vocab_file or "
                             "--tokenizer_dir")
    return default


def run():
    run_reporting_errors(main, "kerasbert-finetune", expected=("kerasbert.training.loop.TrainingError",))


if __name__ == "__main__":
    run()
