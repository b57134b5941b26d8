"""Fine-tuning runs: train a task model epoch by epoch, evaluate on dev after each, keep the best.

`finetune_seed` is one run (one seed) in a directory; `finetune` runs one or more seeds and
reports each metric's median and spread. `run_finetuning` is what `kerasbert-finetune` calls: a
`FinetuneRun` (task, files, model source, settings) trained and evaluated, or only evaluated or
predicted with a fine-tuned model. With a
`Distillation`, a fine-tuned teacher teaches the model being trained (the student) through a
`TaskDistiller`; the student is what is evaluated, checkpointed and saved.

A run's directory holds, for the best epoch: `eval_results.json` (the task's metrics, the epoch,
whether the predictions were degenerate), the task's prediction files, `model.keras`; and
`eval_history.json` (every epoch), `epochs/epoch_<k>/` (each epoch's prediction files),
checkpoints (`ckpt-<step>`, model + optimizer + data position: a killed run restarted with the
same arguments resumes where the last checkpoint left it) and TensorBoard logs (`train/`,
`eval/`). With a `RunRecord` (`kerasbert.training.run_record`), the run is recorded in (and
checked against) `kerasbert_run.json` before anything is written; `run_outputs` says what a run
writes (what `--overwrite` removes).
"""

import dataclasses
import math
import os
import re
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from kerasbert import file_system
from kerasbert.atomic_files import atomic_path, remove_stale_siblings
from kerasbert.bfloat16 import xla_allowed
from kerasbert.convert import from_hf
from kerasbert.convert.hf_config import head_pools
from kerasbert.json_files import read_json_file
from kerasbert.json_files import write_json_file as write_json
from kerasbert.data.glue_tasks import GLUE_TASKS
from kerasbert.data.service import DISTRIBUTED_EPOCH, distribute
from kerasbert.models.tasks import TEXT_EMBEDDING, TaskModel, build_task_model
from kerasbert.training.distillation.students import copy_heads, student_encoder
from kerasbert.training.distillation.task import TaskDistiller, check_teacher
from kerasbert.training.layerwise import layerwise_lr_multipliers
from kerasbert.training.loop import _SCALAR_METADATA, Trainer
from kerasbert.training.optimizers import create_optimizer
from kerasbert.training.run_record import TRAINING_OUTPUTS, matching

EVAL_RESULTS = "eval_results.json"
EVAL_HISTORY = "eval_history.json"
MODEL_FILE = "model.keras"
# The test prediction files a run writes (GLUE's submission names among them).
TEST_PREDICTION_FILES = (
    "test_predictions.tsv", "test_predictions.txt", "test_scores.json", *sorted({
        split.submission_file for task in GLUE_TASKS.values() for split in task.splits.values()
        if split.submission_file}))
_SEED_DIR = re.compile(r"seed_-?[0-9]+")


@dataclasses.dataclass
class FinetuneSettings:
    """Everything about a fine-tuning run but its data, model source and directory.

    Data: `max_seq_length`; `length_buckets`: each batch padded to the smallest bucket
    length that fits it (`kerasbert.data.length_buckets`; SQuAD and CoNLL-2003: training
    batches only), else to `max_seq_length`; SQuAD's `doc_stride` (the step between the
    starts of a context's windows, as Google's BERT defines it: Hugging
    Face's `stride` is the overlap, `max_seq_length - question - doc_stride`),
    `max_query_length`, `n_best_size`, `max_answer_length`,
    `null_score_diff_threshold`, `tune_null_threshold` (fit the threshold on a
    held-out twentieth of the training file's paragraphs); `labels`: the label
    names (set by the run from the training file or the model).
    Training: the first `max_train_examples` of the training file (all when None;
    shipped and GLUE files are in no meaningful order, so it is a sample), AdamW
    with `weight_decay` (not on LayerNorm or biases), linear
    warmup over `warmup_proportion` of the steps then linear decay to 0,
    global norm clipping at 1, `layerwise_lr_decay` (None or ELECTRA's
    factor), `jit_compile` (not under bfloat16 on a CPU: `kerasbert.bfloat16`),
    `checkpoint_interval`, `max_recoveries` (`train`'s);
    `tf_data_service`: `grpc://HOST:PORT` of a tf.data service whose workers make the
    training batches (each pass split among them, `kerasbert.data.service`), or None.
    Text embeddings: `pooling` (a `SentencePooling` mode) and `normalize`; None takes them
    from a sentence-transformers `--init_from`, else mean pooling, normalized.
    `head_pooling`: how the sequence-classification and multiple-choice heads of a family
    that pools by a config key (ModernBERT's `classifier_pooling`) summarize the sequence,
    "first_token" or "mean"; None takes it from a Hugging Face `--init_from`'s config.json
    (the released ModernBERT checkpoints say mean), else the first token.

    >>> FinetuneSettings(learning_rate=2e-5).warmup_proportion
    0.1
    """

    max_seq_length: int = 128
    length_buckets: bool = True
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    tune_null_threshold: bool = False
    num_train_epochs: float = 3.0
    max_train_examples: Optional[int] = None
    train_batch_size: int = 32
    eval_batch_size: int = 32
    learning_rate: float = 5e-5
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    layerwise_lr_decay: Optional[float] = None
    dropout: Optional[float] = None
    jit_compile: bool = False
    checkpoint_interval: int = 1000
    max_recoveries: int = 0
    tf_data_service: Optional[str] = None
    labels: Optional[list] = None
    pooling: Optional[str] = None
    normalize: Optional[bool] = None
    head_pooling: Optional[str] = None


@dataclasses.dataclass
class TaskFiles:
    """The files of a run: `train` (one path or None), `dev` (paths: the first is the main dev
    set, e.g. MNLI matched, others are reported under their own names) and `test` (paths).

    >>> TaskFiles("train.tsv", ["dev.tsv"], []).dev
    ['dev.tsv']
    """

    train: Optional[str]
    dev: list
    test: list


@dataclasses.dataclass
class Distillation:
    """A teacher for a fine-tuning run (task distillation).

    `teacher`: a fine-tuned `TaskModel` of the run's task and labels (e.g.
    `load_task_teacher(path)`; copied, never changed); `source`: what to call
    it in errors (its path); `temperature` and `alpha`: `TaskDistiller`'s.
    `student_layers`: build the student from the teacher instead of the run's
    encoder factory: an encoder of that many of the teacher's layers
    (`students.student_encoder`: its default layer map, the embeddings and
    pooler) with the teacher's head copied.

    >>> Distillation(teacher=None, source="teacher.keras").alpha
    0.5
    """

    teacher: object
    source: str
    temperature: float = 2.0
    alpha: float = 0.5
    student_layers: Optional[int] = None


def finetune(task, make_encoder, tokenizer, files, model_dir, settings, strategy, seeds=(0,),
             log=print, distillation=None, run_record=None):
    """Train and evaluate `task` once per seed; return the results written to `eval_results.json`.

    One seed runs in `model_dir` itself. Several run in `model_dir/seed_<s>/`
    each; then `model_dir` gets the files of the median run (by the task's
    score) and an `eval_results.json` with that run's metrics, each metric's
    median / min / max / standard deviation over the seeds (`seeds_summary`),
    every seed's results and the seeds whose predictions were degenerate. `distillation`: a
    `Distillation` (the teacher), or None. `run_record`: the `RunRecord` of `model_dir`, started
    (checked, written) with the model's config once the first model is built, or None.
    """
    if len(seeds) == 1:
        return finetune_seed(task, make_encoder, tokenizer, files, model_dir, settings, strategy,
                             seeds[0], log, distillation, run_record)
    runs = []
    for seed in seeds:
        log(f"=== seed {seed} ===")
        run_dir = file_system.join(model_dir, f"seed_{seed}")
        runs.append((seed, run_dir, finetune_seed(task, make_encoder, tokenizer, files, run_dir,
                                                  settings, strategy, seed, log, distillation,
                                                  run_record)))
    order = sorted(range(len(runs)), key=lambda index: runs[index][2]["score"])
    seed, run_dir, median = runs[order[(len(runs) - 1) // 2]]
    for name in file_system.listdir(run_dir):
        path = file_system.join(run_dir, name)
        if file_system.isfile(path) and name not in (EVAL_RESULTS, EVAL_HISTORY, "checkpoint") \
                and not name.startswith("ckpt-"):
            file_system.copy(path, file_system.join(model_dir, name))
    metric_names = [name for name, value in median.items() if isinstance(value, float)]
    summary = {name: _spread([run[2][name] for run in runs]) for name in metric_names
               if all(isinstance(run[2].get(name), float) for run in runs)}
    results = {**median, "seed": seed, "seeds_summary": summary,
               "seeds": {str(run[0]): run[2] for run in runs},
               "degenerate_seeds": [run[0] for run in runs if run[2]["degenerate"]]}
    write_json(file_system.join(model_dir, EVAL_RESULTS), results)
    for name, spread in summary.items():
        log(f"{name}: median {spread['median']:.4f} (min {spread['min']:.4f}, "
            f"max {spread['max']:.4f}, std {spread['std']:.4f}) over {len(runs)} seeds")
    return results


def finetune_seed(task, make_encoder, tokenizer, files, model_dir, settings, strategy, seed, log,
                  distillation=None, run_record=None):
    """One seed's run (see the module docstring); returns its `eval_results.json` content."""
    # A killed run's half-saved model.
    remove_stale_siblings(file_system.join(model_dir, MODEL_FILE))
    train_examples = task.read(files.train, "train")[:settings.max_train_examples]
    dev_sets = [(path, task.read(path, "dev")) for path in files.dev]
    settings = dataclasses.replace(settings, labels=settings.labels or
                                   task.labels(train_examples))
    tuning_examples = None
    if settings.tune_null_threshold:
        train_examples, tuning_examples = hold_out_paragraphs(train_examples)
        log(f"Null threshold tuned on {len(tuning_examples)} held-out training questions")
    if distillation is not None:
        check_teacher(distillation.teacher, task.model_task, settings.labels, distillation.source,
                      task.name)

    # Made once, evaluated every epoch: building a dataset traces its functions again.
    dev_inputs = [task.evaluation_inputs(examples, tokenizer, settings, settings.eval_batch_size)
                  for _, examples in dev_sets]
    tuning_inputs = None if tuning_examples is None else task.evaluation_inputs(
        tuning_examples, tokenizer, settings, settings.eval_batch_size)

    keras.utils.set_random_seed(seed)
    batches_per_epoch = count_batches(task.dataset(train_examples, tokenizer, settings,
                                                   settings.train_batch_size, training=True))
    train_steps = max(1, math.ceil(batches_per_epoch * settings.num_train_epochs))
    epoch_ends = sorted({min(train_steps, batches_per_epoch * epoch) for epoch in
                         range(1, math.ceil(settings.num_train_epochs) + 1)})
    with strategy.scope():
        model = _build_student(task, make_encoder, settings, distillation)
        trained = model if distillation is None else TaskDistiller(
            distillation.teacher, model, distillation.temperature, distillation.alpha)
        trained.compile(optimizer=create_optimizer(
            "adamw", settings.learning_rate, num_train_steps=train_steps,
            num_warmup_steps=int(settings.warmup_proportion * train_steps),
            weight_decay=settings.weight_decay, global_clipnorm=1.0,
            lr_multipliers=None if settings.layerwise_lr_decay is None else
            layerwise_lr_multipliers(model, settings.layerwise_lr_decay)))
    if run_record is not None:  # nothing is written before this
        run_record.start(model_record(model, settings), log=log)
    file_system.makedirs(model_dir)
    log(f"{task.name}: {len(train_examples)} training examples, {batches_per_epoch} batches of "
        f"{settings.train_batch_size} per epoch, {train_steps} steps")

    def train_batches(context):
        batch_size = context.get_per_replica_batch_size(settings.train_batch_size)
        # Every pass's order is made from the seed and the pass's number alone, so that a run
        # restored from a checkpoint sees the batches of an uninterrupted one (data.passes).
        batches = task.dataset(train_examples, tokenizer, settings, batch_size, training=True,
                               seed=seed, epochs=None)
        if settings.tf_data_service is None:
            return batches
        return distribute(batches, settings.tf_data_service, DISTRIBUTED_EPOCH)

    history = _read_history(model_dir)
    writer = tf.summary.create_file_writer(file_system.join(model_dir, "eval"))
    trainer = None  # made at the first epoch to train (restoring the latest checkpoint), kept
    for epoch, end_step in enumerate(epoch_ends, start=1):
        if any(entry["epoch"] == epoch for entry in history):
            continue  # trained and evaluated before a restart
        trainer = trainer or Trainer(
            trained, strategy, train_batches, model_dir, train_steps,
            checkpoint_interval=settings.checkpoint_interval,
            steps_per_loop=min(100, settings.checkpoint_interval),
            jit_compile=settings.jit_compile and xla_allowed(strategy=strategy),
            max_recoveries=settings.max_recoveries,
            save_data_position=settings.tf_data_service is None, log=log)
        trainer.run(until=end_step)
        if tuning_examples is not None:
            settings.null_score_diff_threshold = task.tuned_null_threshold(
                model, tuning_examples, tokenizer, settings, settings.eval_batch_size,
                tuning_inputs)
        entry = evaluate_dev(task, model, tokenizer, dev_sets, settings,
                             file_system.join(model_dir, "epochs", f"epoch_{epoch}"), dev_inputs)
        entry.update(epoch=epoch, step=end_step)
        log(f"\nEpoch {epoch}: " + ", ".join(f"{name} {value:.4f}" for name, value in
                                           entry.items() if isinstance(value, float)))
        if entry["degenerate"]:
            log(f"Epoch {epoch}: WARNING every dev prediction is the same (a degenerate run)")
        with writer.as_default(step=end_step):
            for name, value in entry.items():
                if isinstance(value, float):
                    tf.summary.write(name, tf.constant(value, tf.float32),
                                     metadata=_SCALAR_METADATA)
        if all(entry["score"] > old["score"] for old in history):
            _keep_best(model, model_dir, entry)
        history.append(entry)
        write_json(file_system.join(model_dir, EVAL_HISTORY), history)
    writer.flush()
    best = max(history, key=lambda old: old["score"])
    if files.test:
        best_model = keras.models.load_model(file_system.join(model_dir, MODEL_FILE))
        for path in files.test:
            written = task.predict(best_model, task.read(path, "test"), tokenizer, settings,
                                   settings.eval_batch_size, model_dir, path)
            log(f"Test predictions: {written}")
    return best


def model_record(model, settings):
    """What the run record keeps of a task model: its task, labels (an embedding model: its
    pooling and normalization) and encoder config."""
    head = ({"pooling": model.pooling, "normalize": model.normalize}
            if model.task == TEXT_EMBEDDING else
            {"num_labels": model.num_labels, "labels": settings.labels,
             "dropout": settings.dropout})
    return {"task": model.task, **head, "encoder_config": model.encoder.config.to_dict()}


def run_outputs(model_dir):
    """The entries of `model_dir` that `finetune` writes (what `--overwrite` removes):
    checkpoints, TensorBoard folders, the run record, `eval_results.json`,
    `eval_history.json`, `model.keras`, `epochs/`, `seed_<s>/`, test predictions, and the
    prediction files copied from the best epoch (or the median seed): the names found in
    `epochs/epoch_<k>/` and `seed_<s>/`.

    >>> import tempfile
    >>> model_dir = tempfile.mkdtemp()
    >>> for name in ("notes.txt", "eval_history.json", "epochs/epoch_1/dev_predictions.tsv",
    ...              "dev_predictions.tsv"):
    ...     os.makedirs(os.path.dirname(os.path.join(model_dir, name)), exist_ok=True)
    ...     open(os.path.join(model_dir, name), "w").close()
    >>> [os.path.relpath(path, model_dir) for path in run_outputs(model_dir)]
    ['dev_predictions.tsv', 'epochs', 'eval_history.json']
    """
    seed_dirs = [file_system.join(model_dir, name) for name in _names_in(model_dir)
                 if _SEED_DIR.fullmatch(name)]
    epochs = file_system.join(model_dir, "epochs")
    copied = set()
    for folder in [file_system.join(epochs, name) for name in _names_in(epochs)] + seed_dirs:
        copied.update(name for name in _names_in(folder)
                      if file_system.isfile(file_system.join(folder, name)))
    names = {EVAL_RESULTS, EVAL_HISTORY, MODEL_FILE, "epochs", "eval", *TEST_PREDICTION_FILES,
             *copied}
    written = [file_system.join(model_dir, name) for name in names
               if _entry_exists(file_system.join(model_dir, name))]
    return sorted(set(written + seed_dirs + matching(*TRAINING_OUTPUTS)(model_dir)))


def load_task_teacher(path):
    """The fine-tuned `TaskModel` at `path`.

    `path`: a `.keras` file, a `kerasbert-finetune --model_dir` (its
    `model.keras`) or a Hugging Face folder of a task architecture
    (`*ForSequenceClassification`, ..., through `kerasbert.convert.from_hf`).

    >>> load_task_teacher("/nonexistent/teacher")
    Traceback (most recent call last):
    ...
    ValueError: --teacher /nonexistent/teacher: ...
    """
    path = os.fspath(path)
    run_model = file_system.join(path, MODEL_FILE)
    if path.endswith(".keras") and file_system.isfile(path):
        model = keras.models.load_model(path)
    elif file_system.isfile(run_model):
        model = keras.models.load_model(run_model)
    elif file_system.isfile(file_system.join(path, "config.json")):
        model = from_hf(path)
    else:
        raise ValueError(f"--teacher {path}: not a .keras file, a kerasbert-finetune model "
                         f"directory ({MODEL_FILE}) or a Hugging Face folder (config.json)")
    if not isinstance(model, TaskModel):
        raise ValueError(f"--teacher {path}: a {type(model).__name__}, not a fine-tuned task "
                         "model (TaskModel)")
    return model


def _build_student(task, make_encoder, settings, distillation):
    """The task model to train: on `make_encoder()`, or on `distillation.student_layers` of the
    teacher's encoder with the teacher's head."""
    layers = None if distillation is None else distillation.student_layers
    encoder = make_encoder() if layers is None else student_encoder(
        distillation.teacher.encoder, num_layers=layers)
    if task.model_task == TEXT_EMBEDDING:
        return build_task_model(
            encoder, TEXT_EMBEDDING, max_seq_length=settings.max_seq_length,
            pooling=settings.pooling or "mean",
            normalize=True if settings.normalize is None else settings.normalize)
    pooling = ({"pooling": settings.head_pooling} if settings.head_pooling
               and head_pools(encoder.config.family, task.model_task) else {})
    model = build_task_model(encoder, task.model_task, num_labels=_num_labels(task, settings),
                             id2label=settings.labels, dropout=settings.dropout, **pooling)
    if layers is not None:
        copy_heads(distillation.teacher, model)
    return model


def evaluate_dev(task, model, tokenizer, dev_sets, settings, output_dir, dev_inputs=None):
    """The metrics on every dev file, prediction files written to `output_dir`: the first file's
    metrics under their own names, the others' under the file's name (e.g. `dev_mismatched`).
    `dev_inputs`: each dev file's `task.evaluation_inputs`, when made once for every epoch."""
    file_system.makedirs(output_dir)
    entry = {}
    for number, (path, examples) in enumerate(dev_sets):
        evaluation = task.evaluate(model, examples, tokenizer, settings, settings.eval_batch_size,
                                   output_dir, path,
                                   None if dev_inputs is None else dev_inputs[number])
        if number == 0:
            entry.update(evaluation.metrics, score=float(evaluation.score),
                         degenerate=evaluation.degenerate)
        else:
            entry[_file_stem(path)] = evaluation.metrics
    return entry


def hold_out_paragraphs(examples, every=20):
    """`(kept, held_out)`: the questions of every `every`-th distinct context are held out, so
    no held-out question shares its paragraph with a training question."""
    contexts = list(dict.fromkeys(example.context for example in examples))
    held = {context for index, context in enumerate(contexts) if index % every == every - 1}
    if not held:
        raise ValueError(f"tune_null_threshold needs at least {every} paragraphs in the training "
                         f"file, got {len(contexts)}")
    return ([example for example in examples if example.context not in held],
            [example for example in examples if example.context in held])


def count_batches(dataset):
    """Batches in one pass of a finite dataset (its cardinality, or counted by reading it)."""
    cardinality = int(dataset.cardinality())
    if cardinality >= 0:
        return cardinality
    return int(dataset.reduce(np.int64(0), lambda count, _: count + 1))


def _keep_best(model, model_dir, entry):
    """Copy the epoch's prediction files to `model_dir`, save the model, then the results."""
    epoch_dir = file_system.join(model_dir, "epochs", f"epoch_{entry['epoch']}")
    for name in file_system.listdir(epoch_dir):
        file_system.copy(file_system.join(epoch_dir, name), file_system.join(model_dir, name))
    with atomic_path(file_system.join(model_dir, MODEL_FILE)) as temporary:
        model.save(temporary)
    write_json(file_system.join(model_dir, EVAL_RESULTS), entry)


def _read_history(model_dir):
    path = file_system.join(model_dir, EVAL_HISTORY)
    if not file_system.exists(path):
        return []
    return read_json_file(path, "a kerasbert-finetune evaluation history", expected=list)


def _names_in(folder):
    """The names in `folder`, or none if it is not a folder."""
    return file_system.listdir(folder) if file_system.isdir(folder) else []


def _entry_exists(path):
    """Whether `path` names something (a local dangling symbolic link counts)."""
    return os.path.lexists(path) if file_system.is_local(path) else file_system.exists(path)


def _num_labels(task, settings):
    if task.model_task in ("question_answering", "multiple_choice"):
        return None
    return len(settings.labels) if settings.labels else 1


def _file_stem(path):
    return file_system.basename(path).split(".")[0]


def _spread(values):
    values = np.asarray(values, np.float64)
    return {"median": float(np.median(values)), "min": float(values.min()),
            "max": float(values.max()), "std": float(values.std())}


@dataclasses.dataclass(frozen=True)
class FinetuneRun:
    """A `kerasbert-finetune` run: `task` (a name of `FINETUNING_TASKS`) in `model_dir`, with
    `settings` (`FinetuneSettings`), in `mode` `train_and_eval` (fine-tune from `init_from`, a
    `pretrained_source` path, or its architecture alone with `from_scratch`; evaluate every
    epoch; predict the test files), `eval` or `predict` (with the model in `model_dir`, or a
    `.keras` / Hugging Face task model in `init_from`). Files: `train_file`, `dev_file` and
    `test_file` (lists), each defaulting to the task's official names under `data_dir`.
    `tokenizer`: `load_tokenizer` arguments, instead of the model's own tokenizer. Task
    distillation: `teacher` (a `load_task_teacher` path) at `temperature`, weighted
    `distill_alpha`, the student `student_layers` of the teacher's layers unless it starts from
    `init_from`. One run per seed of `seeds`, on the tf.distribute `strategy` (`get_strategy`'s
    `num_gpus`, `tpu`), with the dtype policy `mixed_precision`; the model directory's run
    record is checked against `recorded_flags` (or removed with `overwrite`).

    >>> run = FinetuneRun("mrpc", "runs/mrpc", FinetuneSettings(), data_dir="glue/MRPC",
    ...                   init_from="hf/bert-base-uncased")
    >>> run.mode, run.seeds
    ('train_and_eval', (0,))
    """

    task: str
    model_dir: str
    settings: FinetuneSettings
    mode: str = "train_and_eval"
    data_dir: Optional[str] = None
    train_file: Optional[str] = None
    dev_file: Optional[list] = None
    test_file: Optional[list] = None
    init_from: Optional[str] = None
    from_scratch: bool = False
    tokenizer: Optional[dict] = None
    teacher: Optional[str] = None
    temperature: float = 2.0
    distill_alpha: float = 0.5
    student_layers: Optional[int] = None
    seeds: tuple = (0,)
    strategy: str = "one_device"
    num_gpus: int = 0
    tpu: Optional[str] = None
    mixed_precision: str = "float32"
    overwrite: bool = False
    recorded_flags: dict = dataclasses.field(default_factory=dict)


def run_finetuning(run, log=print, program="kerasbert-finetune"):
    """Run `run` (a `FinetuneRun`) in its mode, printing with `log`: train and evaluate (the
    best dev results, see `finetune`), evaluate (the results, written to `eval_results.json`)
    or predict the test files. A `ValueError` (or `FileNotFoundError`) names what the run
    lacks before anything is written."""
    from kerasbert.data.service import service_address
    from kerasbert.training.finetuning_tasks import get_finetuning_task

    task = get_finetuning_task(run.task)
    if task.model_task != TEXT_EMBEDDING and (run.settings.pooling is not None or
                                              run.settings.normalize is not None):
        raise ValueError("--pooling and --normalize are for --task=text_embedding")
    files = task_files(task, run)
    if run.settings.tf_data_service is not None:
        service_address(run.settings.tf_data_service)  # a malformed address is named before any work
    if run.settings.tune_null_threshold and run.task != "squad_v2":
        raise ValueError("--tune_null_threshold is for --task=squad_v2")
    keras.mixed_precision.set_dtype_policy(run.mixed_precision)
    if run.teacher is not None and run.mode != "train_and_eval":
        raise ValueError("--teacher is for --mode=train_and_eval")
    if run.teacher is not None and task.model_task == TEXT_EMBEDDING:
        raise ValueError("--teacher distills classifiers, tagging, span and choice models; "
                         "not --task=text_embedding")
    if run.mode == "train_and_eval":
        return _train_and_eval(run, task, files, log, program)
    return _evaluate_or_predict(run, task, files, log)


def task_files(task, run):
    """The `TaskFiles` of `run` (a `FinetuneRun`) for its mode: its file arguments, else the
    task's official names under `data_dir` (test files where present); a `FileNotFoundError`
    for a file that does not exist."""
    def official(role, required):
        names = [file_system.join(run.data_dir, name) for name in task.default_files[role]]
        return [path for path in names if required or file_system.exists(path)]

    if run.data_dir is None and run.train_file is None and run.mode == "train_and_eval":
        raise ValueError("Give --data_dir or --train_file")
    train = run.train_file or (official("train", True)[0] if run.data_dir else None)
    dev = run.dev_file or (official("dev", True) if run.data_dir else [])
    test = run.test_file or (official("test", False) if run.data_dir else [])
    if run.mode != "predict" and not dev:
        raise ValueError("Give --dev_file or --data_dir")
    for path in ([train] if train and run.mode == "train_and_eval" else []) + dev + list(test):
        if not file_system.isfile(path):
            raise FileNotFoundError(f"{task.name} file {path} does not exist")
    return TaskFiles(train, dev, list(test))


def _train_and_eval(run, task, files, log, program):
    from kerasbert.bfloat16 import precision_plan
    from kerasbert.models.encoder import build_encoder
    from kerasbert.training.distribute import get_strategy, strategy_summary
    from kerasbert.training.pretrained_sources import pretrained_source
    from kerasbert.training.run_record import RunRecord

    if files.train is None:
        raise ValueError("train_and_eval needs --train_file or --data_dir")
    record = RunRecord(run.model_dir, program, run.recorded_flags, run_outputs, run.overwrite)
    record.check()  # before anything is written into the model directory
    distillation = _distillation(run)
    if run.init_from is None and distillation is None:
        raise ValueError("train_and_eval needs --init_from (the pretrained model)")
    strategy = get_strategy(run.strategy, num_gpus=run.num_gpus, tpu=run.tpu)
    for line in precision_plan(run.mixed_precision, strategy, run.settings.jit_compile)[1]:
        log(line)
    if run.init_from is None:
        tokenizer = _tokenizer(run, _hf_tokenizer(run.teacher), "--teacher")
        make_encoder = None
        log(f"{strategy_summary(strategy)}; {task.name} from {run.student_layers} layers of "
            f"the teacher")
    else:
        source = pretrained_source(run.init_from)
        tokenizer = _tokenizer(run, source.tokenizer)
        if source.head_pooling and run.settings.head_pooling is None:
            run = dataclasses.replace(run, settings=dataclasses.replace(
                run.settings, head_pooling=source.head_pooling))
        if task.model_task == TEXT_EMBEDDING and source.embedding_head:
            run = dataclasses.replace(run, settings=dataclasses.replace(run.settings, **{
                name: value for name, value in source.embedding_head.items()
                if getattr(run.settings, name) is None}))
        origin = "random weights in the architecture of" if run.from_scratch else "pretrained"
        log(f"{strategy_summary(strategy)}; {task.name} from {origin} {run.init_from} "
            f"({source.kind})")
        if run.from_scratch:
            def make_encoder():
                return build_encoder(source.make_encoder().config)
        else:
            make_encoder = source.make_encoder
    if distillation is not None:
        log(f"Distilled from the teacher {run.teacher} at temperature {run.temperature}, "
            f"soft-target weight {run.distill_alpha}")
    results = finetune(task, make_encoder, tokenizer, files, run.model_dir, run.settings,
                       strategy, list(run.seeds), log=log, distillation=distillation,
                       run_record=record)
    log(f"\nBest dev results ({file_system.join(run.model_dir, EVAL_RESULTS)}): " + ", ".join(
        f"{name} {value:.4f}" for name, value in results.items() if isinstance(value, float)))
    return results


def _distillation(run):
    """The `Distillation` `run` asks for (the teacher loaded), or None without a teacher."""
    if run.teacher is None:
        return None
    if run.student_layers is not None and run.init_from is not None:
        raise ValueError("Give --init_from (the student's start) or --student_layers (a "
                         "student made of the teacher's layers), not both")
    if run.student_layers is None and run.init_from is None:
        raise ValueError("With --teacher, give --init_from (the student's start) or "
                         "--student_layers (a student made of the teacher's layers)")
    if run.from_scratch and run.init_from is None:
        raise ValueError("--from_scratch drops the weights of --init_from; there is none")
    return Distillation(load_task_teacher(run.teacher), run.teacher,
                        temperature=run.temperature, alpha=run.distill_alpha,
                        student_layers=run.student_layers)


def _hf_tokenizer(path):
    """The tokenizer of a Hugging Face folder at `path`, or None."""
    from kerasbert.training.pretrained_sources import pretrained_source

    if not file_system.isfile(file_system.join(path, "config.json")):
        return None
    return pretrained_source(path).tokenizer


def _evaluate_or_predict(run, task, files, log):
    from kerasbert.training.pretrained_sources import pretrained_source

    model_path = file_system.join(run.model_dir, MODEL_FILE)
    source = (model_path if file_system.isfile(model_path) or not run.init_from
              else run.init_from)
    if source.endswith(".keras"):
        model = keras.models.load_model(source)
        tokenizer = _tokenizer(run, None)
    else:
        model = from_hf(source)
        tokenizer = _tokenizer(run, pretrained_source(source).tokenizer)
    if getattr(model, "task", None) != task.model_task:
        raise ValueError(f"{source} is not a {task.model_task} model")
    id2label = getattr(model, "id2label", None)
    settings = dataclasses.replace(run.settings, labels=[
        id2label[index] for index in sorted(id2label)] if id2label else None)
    file_system.makedirs(run.model_dir)
    if run.mode == "eval":
        entry = evaluate_dev(task, model, tokenizer, [(path, task.read(path, "dev"))
                                                      for path in files.dev], settings,
                             run.model_dir)
        write_json(file_system.join(run.model_dir, EVAL_RESULTS), entry)
        log(", ".join(f"{name} {value:.4f}" for name, value in entry.items()
                      if isinstance(value, float)))
        return entry
    if not files.test:
        raise ValueError("predict needs --test_file or a test file under --data_dir")
    for path in files.test:
        log(task.predict(model, task.read(path, "test"), tokenizer, settings,
                         settings.eval_batch_size, run.model_dir, path))
    return None


def _tokenizer(run, default, source_flag="--init_from"):
    """The run's own tokenizer, else `default` (the model's); a `ValueError` naming
    `source_flag` without either."""
    if run.tokenizer is not None:
        from kerasbert.tokenizers.vocabulary_files import load_tokenizer

        return load_tokenizer(**run.tokenizer)
    if default is None:
        raise ValueError(f"{source_flag} has no tokenizer: give --vocab_file or "
                         "--tokenizer_dir")
    return default
