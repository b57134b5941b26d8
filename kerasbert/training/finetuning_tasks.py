"""The fine-tuning tasks of `kerasbert-finetune`: their files, datasets, metrics and prediction files.

Each task is a `FinetuningTask` with one interface: `read(path)` the checked examples of a
file, `dataset(...)` its batches, `evaluate(...)` the official metrics of a model's predictions
on a dev file (writing the prediction files the task's community reads), `predict(...)` the
prediction file of a test split.

    GLUE (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli) and wordnet_gloss
    squad_v1, squad_v2       SQuAD v1.1 / v2.0 JSON
    conll2003                CoNLL-2003 named entities
    swag                     SWAG multiple choice
    text_embedding           anchor / positive / optional negative TSV files, contrastive
                             training; retrieval (or scored-pair similarity) evaluation
"""

import dataclasses

import numpy as np

from kerasbert import file_system
from kerasbert.data import conll, glue, squad, squad_decoding, swag, text_pairs
from kerasbert.data.glue_tasks import GLUE_TASKS, get_task
from kerasbert.data.length_buckets import in_example_order
from kerasbert.data.squad_features import squad_dataset, squad_windows
from kerasbert.data.task_errors import TaskDataError
from kerasbert.json_files import write_json_file
from kerasbert.training import entity_metrics, glue_metrics, retrieval_metrics, squad_evaluation


@dataclasses.dataclass
class Evaluation:
    """What `FinetuningTask.evaluate` found on a dev file.

    `metrics`: the task's official metrics by their usual names; `score`: the one number the
    best epoch is chosen by (GLUE: the mean of the task's metrics; SQuAD and CoNLL: F1; SWAG:
    accuracy); `degenerate`: every prediction was the same.

    >>> Evaluation({"accuracy": 0.5}, 0.5, degenerate=True).degenerate
    True
    """

    metrics: dict
    score: float
    degenerate: bool


@dataclasses.dataclass
class EvaluationInputs:
    """What a model runs on to be evaluated, and what maps its outputs back to the examples.

    `examples`: the task's examples; `batches`: the batches of the model's inputs with their
    bookkeeping (`example_index`, ...), a `tf.data.Dataset` or any iterable of dicts of arrays
    in the same order; `features`: SQuAD's context windows (None for the other tasks);
    `example_index`: the `example_index` of each row of the model's outputs, when known (batches
    need not follow the examples' order: length-bucketed ones do not).
    `FinetuningTask.score` turns the model's outputs on `batches`, concatenated as
    `model.predict` returns them, into the task's metrics; `kerasbert-finetune` and
    `kerasbert-export --eval_file` both go through it.

    >>> EvaluationInputs(["an example"], batches=[]).features is None
    True
    """

    examples: list
    batches: object
    features: object = None
    example_index: object = None


def predict_batches(model, batches):
    """`(outputs, example_index)`: `model`'s outputs on each of `batches` (dicts with an
    `example_index`; their lengths may differ from batch to batch, as length-bucketed batches'
    do), concatenated in batch order as `{name: array}`, and the `example_index` of each row."""
    outputs, example_index = [], []
    for batch in batches:
        outputs.append(model.predict_on_batch(batch))
        example_index.append(np.asarray(batch["example_index"]))
    return ({name: np.concatenate([output[name] for output in outputs])
             for name in outputs[0]}, np.concatenate(example_index))


def _example_index(inputs):
    """The `example_index` of each row of a model's outputs on `inputs.batches`."""
    if inputs.example_index is not None:
        return inputs.example_index
    return np.concatenate([np.asarray(batch["example_index"]) for batch in inputs.batches])


class FinetuningTask:
    """A task `kerasbert-finetune` trains: subclasses fill in the files and the metrics.

    Attributes: `name`, `model_task` (a `kerasbert.models.TASK_MODEL_KINDS` name),
    `default_files` (role -> official file names under `--data_dir`; the dev
    role may name several files, e.g. MNLI's matched and mismatched).

    >>> sorted(get_finetuning_task("swag").default_files)
    ['dev', 'test', 'train']
    """

    name = None
    model_task = None
    default_files = {}

    def labels(self, train_examples):
        """The label names, in id order (None for span and choice tasks)."""
        return None

    def read(self, path, role):
        """The checked examples of the `role` ("train", "dev" or "test") file at `path`."""
        raise NotImplementedError

    # The main score (`Evaluation.score`) in percent is this times the score: 100 for the
    # metrics in [0, 1] (or [-1, 1]), 1 for SQuAD's official scores, which are percentages.
    score_to_percent = 100.0

    def dataset(self, examples, tokenizer, settings, batch_size, training, seed=0, epochs=1):
        raise NotImplementedError

    def evaluation_inputs(self, examples, tokenizer, settings, batch_size):
        """The `EvaluationInputs` of `examples`: the model's batches in the dataset's order."""
        return EvaluationInputs(examples, self.dataset(examples, tokenizer, settings, batch_size,
                                                       training=False))

    def score(self, inputs, outputs, settings, output_dir=None, path=None):
        """The `Evaluation` of a model's `outputs` (`{name: array}`, concatenated over
        `inputs.batches`) on the `EvaluationInputs` `inputs`; with `output_dir`, the prediction
        files of the dev file `path` are written there."""
        raise NotImplementedError

    def evaluate(self, model, examples, tokenizer, settings, batch_size, output_dir, path,
                 inputs=None):
        """The `Evaluation` of `model` on `examples` of the dev file `path`, prediction files
        written to `output_dir`. `inputs`: their `evaluation_inputs`, made once for a run that
        evaluates every epoch (made here if None)."""
        if inputs is None:
            inputs = self.evaluation_inputs(examples, tokenizer, settings, batch_size)
        return self.score(inputs, model.predict(inputs.batches, verbose=0), settings, output_dir,
                          path)

    def predict(self, model, examples, tokenizer, settings, batch_size, output_dir, path):
        raise NotImplementedError(f"{self.name} has no test prediction format")


class GlueFinetuning(FinetuningTask):
    """A GLUE task (or the shipped `wordnet_gloss` set): TSV files, sequence classification.

    >>> GlueFinetuning("cola").default_files["train"], len(GlueFinetuning("wordnet_gloss").labels([]))
    (['train.tsv'], 45)
    """

    model_task = "sequence_classification"

    def __init__(self, name):
        self.name = name
        self.task = get_task(name)
        self.default_files = {role: [self.task.splits[split].file_name
                                     for split in self.task.splits_of_role(role)
                                     if split != "diagnostic"]
                              for role in ("train", "dev", "test")}

    def labels(self, train_examples):
        return list(self.task.labels) if self.task.labels else None

    def read(self, path, role):
        split = self._split(path) or self.task.splits_of_role(role)[0]
        return list(glue.glue_examples(self.task, path, split))

    def dataset(self, examples, tokenizer, settings, batch_size, training, seed=0, epochs=1):
        return glue.examples_dataset(self.task, examples, tokenizer, settings.max_seq_length,
                                     batch_size, shuffle=training, seed=seed, epochs=epochs,
                                     length_buckets=settings.length_buckets)

    def evaluate(self, model, examples, tokenizer, settings, batch_size, output_dir, path,
                 inputs=None):
        if inputs is None:
            inputs = self.evaluation_inputs(examples, tokenizer, settings, batch_size)
        outputs, example_index = predict_batches(model, inputs.batches)
        return self.score(dataclasses.replace(inputs, example_index=example_index), outputs,
                          settings, output_dir, path)

    def score(self, inputs, outputs, settings, output_dir=None, path=None):
        examples = inputs.examples
        logits = in_example_order(outputs["logits"], _example_index(inputs))
        predictions = glue.predictions_from_logits(self.task, logits)
        metrics = glue_metrics.glue_metrics(self.task, glue.example_labels(self.task, examples),
                                            predictions)
        if output_dir is not None:
            glue.write_dev_predictions(file_system.join(output_dir, self._predictions_file(path)),
                                       self.task, examples, predictions)
        return Evaluation(metrics, float(np.mean(list(metrics.values()))),
                          glue_metrics.is_degenerate(predictions))

    def predict(self, model, examples, tokenizer, settings, batch_size, output_dir, path):
        predictions = self._predictions(model, examples, tokenizer, settings, batch_size)
        split = self._split(path)
        if split is not None and self.task.splits[split].submission_file:
            return glue.write_test_predictions(output_dir, self.task, split, examples,
                                               predictions)
        return glue.write_dev_predictions(
            file_system.join(output_dir, "test_predictions.tsv"), self.task, examples, predictions)

    def _predictions(self, model, examples, tokenizer, settings, batch_size):
        dataset = self.dataset(examples, tokenizer, settings, batch_size, training=False)
        outputs, example_index = predict_batches(model, dataset)
        return glue.predictions_from_logits(
            self.task, in_example_order(outputs["logits"], example_index))

    def _split(self, path):
        try:
            return self.task.split_of_file(path)
        except ValueError:
            return None  # a file of the task's layout under another name

    def _predictions_file(self, path):
        split = self._split(path)
        dev_splits = self.task.splits_of_role("dev")
        if split is None or split == dev_splits[0]:
            return "dev_predictions.tsv"
        return f"{split}_predictions.tsv"


class SquadFinetuning(FinetuningTask):
    """SQuAD v1.1 or v2.0: JSON files, span question answering, the official evaluation.

    >>> SquadFinetuning(version_2=True).default_files["dev"]
    ['dev-v2.0.json']
    """

    model_task = "question_answering"
    score_to_percent = 1.0

    def __init__(self, version_2):
        self.version_2 = version_2
        self.name = "squad_v2" if version_2 else "squad_v1"
        suffix = "v2.0" if version_2 else "v1.1"
        self.default_files = {"train": [f"train-{suffix}.json"], "dev": [f"dev-{suffix}.json"],
                              "test": []}

    def read(self, path, role):
        return squad.read_squad(path)

    def features(self, examples, tokenizer, settings, training):
        return squad_windows(
            examples, tokenizer, settings.max_seq_length, settings.doc_stride,
            settings.max_query_length, is_training=training)

    def dataset(self, examples, tokenizer, settings, batch_size, training, seed=0, epochs=1):
        features = self.features(examples, tokenizer, settings, training)
        # Per-token logits: only training batches are bucketed (see squad_dataset).
        return squad_dataset(features, batch_size, shuffle=training, seed=seed, epochs=epochs,
                             length_buckets=settings.length_buckets and training)

    def evaluation_inputs(self, examples, tokenizer, settings, batch_size):
        features = self.features(examples, tokenizer, settings, training=False)
        return EvaluationInputs(examples, squad_dataset(features, batch_size), features)

    def decode(self, inputs, outputs, settings, threshold):
        """`SquadPredictions` of a model's `outputs` on `inputs` with null threshold
        `threshold`."""
        return squad_decoding.decode_squad(
            inputs.examples, inputs.features, outputs["start_logits"], outputs["end_logits"],
            n_best_size=settings.n_best_size, max_answer_length=settings.max_answer_length,
            version_2_with_negative=self.version_2, null_score_diff_threshold=threshold)

    def score(self, inputs, outputs, settings, output_dir=None, path=None):
        examples = inputs.examples
        decoded = self.decode(inputs, outputs, settings, settings.null_score_diff_threshold)
        if output_dir is not None:
            squad_decoding.write_squad_predictions(output_dir, decoded)
        metrics = squad_evaluation.evaluate_squad(examples, decoded.texts, decoded.null_odds,
                                                  version_2_with_negative=self.version_2)
        if self.version_2:
            metrics["null_score_diff_threshold"] = settings.null_score_diff_threshold
        answers = list(decoded.texts.values())
        return Evaluation(metrics, metrics["f1"], len(set(answers)) <= 1)

    def tuned_null_threshold(self, model, examples, tokenizer, settings, batch_size, inputs=None):
        """The null threshold that maximises F1 on `examples` (`best_f1_thresh` of the official
        v2.0 evaluation of the best non-null answers and their null odds); `inputs` as in
        `evaluate`."""
        if inputs is None:
            inputs = self.evaluation_inputs(examples, tokenizer, settings, batch_size)
        decoded = self.decode(inputs, model.predict(inputs.batches, verbose=0), settings,
                              float("inf"))
        scores = squad_evaluation.evaluate_squad(examples, decoded.texts, decoded.null_odds,
                                                 version_2_with_negative=True)
        return float(scores["best_f1_thresh"])


class ConllFinetuning(FinetuningTask):
    """CoNLL-2003 named entities: `word POS chunk tag` files, entity-level scores.

    >>> ConllFinetuning().model_task, ConllFinetuning().default_files["dev"]
    ('token_classification', ['eng.testa'])
    """

    name = "conll2003"
    model_task = "token_classification"
    default_files = {"train": ["eng.train"], "dev": ["eng.testa"], "test": ["eng.testb"]}

    def labels(self, train_examples):
        return conll.conll_labels(train_examples)

    def read(self, path, role):
        return conll.read_conll(path)

    def dataset(self, examples, tokenizer, settings, batch_size, training, seed=0, epochs=1):
        # Per-token logits: only training batches are bucketed (see conll_dataset).
        return conll.conll_dataset(examples, tokenizer, settings.labels, batch_size,
                                   settings.max_seq_length, shuffle=training, seed=seed,
                                   epochs=epochs, length_buckets=settings.length_buckets
                                   and training)

    def score(self, inputs, outputs, settings, output_dir=None, path=None):
        examples = inputs.examples
        predicted = conll.predicted_tags(examples, settings.labels, outputs["logits"],
                                         inputs.batches)
        if output_dir is not None:
            conll.write_conll_predictions(file_system.join(output_dir, "dev_predictions.txt"),
                                          examples, predicted)
        metrics = entity_metrics.entity_scores([list(s.tags) for s in examples], predicted)
        return Evaluation(metrics, metrics["f1"],
                          len({tag for tags in predicted for tag in tags}) <= 1)

    def predict(self, model, examples, tokenizer, settings, batch_size, output_dir, path):
        predicted = self._tags(model, examples, tokenizer, settings, batch_size)
        return conll.write_conll_predictions(file_system.join(output_dir, "test_predictions.txt"),
                                             examples, predicted)

    def _tags(self, model, examples, tokenizer, settings, batch_size):
        dataset = self.dataset(examples, tokenizer, settings, batch_size, training=False)
        logits = model.predict(dataset, verbose=0)["logits"]
        return conll.predicted_tags(examples, settings.labels, logits, dataset)


class SwagFinetuning(FinetuningTask):
    """SWAG: CSV files of four endings, multiple choice, accuracy.

    >>> SwagFinetuning().model_task
    'multiple_choice'
    """

    name = "swag"
    model_task = "multiple_choice"
    default_files = {"train": ["train.csv"], "dev": ["val.csv"], "test": ["test.csv"]}

    def read(self, path, role):
        return list(swag.swag_examples(path))

    def dataset(self, examples, tokenizer, settings, batch_size, training, seed=0, epochs=1):
        return swag.swag_examples_dataset(examples, tokenizer, settings.max_seq_length,
                                          batch_size, shuffle=training, seed=seed, epochs=epochs,
                                          length_buckets=settings.length_buckets)

    def score(self, inputs, outputs, settings, output_dir=None, path=None):
        examples = inputs.examples
        predictions = np.argmax(outputs["logits"], axis=1)
        if output_dir is not None:
            swag.write_swag_predictions(file_system.join(output_dir, "dev_predictions.tsv"),
                                        examples, predictions)
        metrics = glue_metrics.compute_metrics(swag.METRICS, swag.swag_labels(examples),
                                               predictions)
        return Evaluation(metrics, metrics["accuracy"], glue_metrics.is_degenerate(predictions))

    def predict(self, model, examples, tokenizer, settings, batch_size, output_dir, path):
        predictions = self._choices(model, examples, tokenizer, settings, batch_size)
        return swag.write_swag_predictions(file_system.join(output_dir, "test_predictions.tsv"),
                                           examples, predictions)

    def _choices(self, model, examples, tokenizer, settings, batch_size):
        dataset = self.dataset(examples, tokenizer, settings, batch_size, training=False)
        return np.argmax(model.predict(dataset, verbose=0)["logits"], axis=1)


class TextEmbeddingFinetuning(FinetuningTask):
    """Text embeddings: contrastive training on anchor / positive / optional negative files;
    dev (and test) files scored by retrieval, every anchor ranking every distinct positive
    (MRR@10, recall@1, recall@10, NDCG@10; the score is MRR@10), or, for scored pairs, by the
    Spearman correlation of cosine similarities (`kerasbert.data.text_pairs`).

    >>> TextEmbeddingFinetuning().model_task, TextEmbeddingFinetuning().default_files["dev"]
    ('text_embedding', ['dev.tsv'])
    """

    name = "text_embedding"
    model_task = "text_embedding"
    default_files = {"train": ["train.tsv"], "dev": ["dev.tsv"], "test": ["test.tsv"]}

    def read(self, path, role):
        examples = text_pairs.read_text_pairs(path)
        if role == "train" and isinstance(examples[0], text_pairs.ScoredPair):
            raise TaskDataError(f"{path}: scored pairs (a number in every third column); "
                                "text_embedding trains on anchor, positive and optional "
                                "negative texts")
        return examples

    def dataset(self, examples, tokenizer, settings, batch_size, training, seed=0, epochs=1):
        return text_pairs.contrastive_dataset(
            examples, tokenizer, settings.max_seq_length, batch_size, shuffle=training,
            seed=seed, epochs=epochs, length_buckets=settings.length_buckets)

    def evaluation_inputs(self, examples, tokenizer, settings, batch_size):
        """Single-text batches: the anchors then the distinct positives (retrieval), or every
        first then every second text (scored pairs)."""
        if isinstance(examples[0], text_pairs.ScoredPair):
            texts = ([pair.text_a for pair in examples] + [pair.text_b for pair in examples])
            layout = None
        else:
            corpus = list(dict.fromkeys(example.positive for example in examples))
            position = {text: index for index, text in enumerate(corpus)}
            texts = [example.anchor for example in examples] + corpus
            layout = [{position[example.positive]} for example in examples]
        return EvaluationInputs(examples, text_pairs.texts_dataset(
            texts, tokenizer, settings.max_seq_length, batch_size,
            length_buckets=settings.length_buckets), features=layout)

    def score(self, inputs, outputs, settings, output_dir=None, path=None):
        vectors = outputs["embedding"]
        count = len(inputs.examples)
        if inputs.features is None:
            metrics = {"spearman_cosine": retrieval_metrics.similarity_correlation(
                vectors[:count], vectors[count:],
                [pair.score for pair in inputs.examples])}
            score = metrics["spearman_cosine"]
        else:
            metrics = retrieval_metrics.retrieval_scores(vectors[:count], vectors[count:],
                                                         inputs.features)
            score = metrics["mrr@10"]
        if output_dir is not None:
            write_json_file(file_system.join(output_dir, "dev_scores.json"), metrics)
        return Evaluation(metrics, score, bool(np.ptp(vectors, axis=0).max() < 1e-6))

    def predict(self, model, examples, tokenizer, settings, batch_size, output_dir, path):
        """The test file's scores (the test split scored once), in `test_scores.json`."""
        inputs = self.evaluation_inputs(examples, tokenizer, settings, batch_size)
        metrics = self.score(inputs, model.predict(inputs.batches, verbose=0), settings).metrics
        return write_json_file(file_system.join(output_dir, "test_scores.json"), metrics)


def _all_tasks():
    tasks = {name: GlueFinetuning(name) for name in GLUE_TASKS}
    tasks.update(squad_v1=SquadFinetuning(False), squad_v2=SquadFinetuning(True),
                 conll2003=ConllFinetuning(), swag=SwagFinetuning(),
                 text_embedding=TextEmbeddingFinetuning())
    return tasks


FINETUNING_TASKS = _all_tasks()


def get_finetuning_task(name):
    """The `FinetuningTask` called `name` (a key of `FINETUNING_TASKS`).

    >>> task = get_finetuning_task("mnli")
    >>> task.model_task, task.default_files["dev"]
    ('sequence_classification', ['dev_matched.tsv', 'dev_mismatched.tsv'])
    """
    try:
        return FINETUNING_TASKS[name]
    except KeyError:
        raise ValueError(f"Unknown task {name!r}; expected one of {sorted(FINETUNING_TASKS)}") \
            from None
