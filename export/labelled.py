"""A labelled set that judges quantized task models by their task metric (`--eval_file`,
`--task`).

The file is read, tokenized and batched by the task's own code, exactly as `kerasbert-finetune`
evaluates a dev file (`kerasbert.training.finetuning_tasks`), and the metric comes from the same
`FinetuningTask.score`: the exporter runs the batches through the Keras model here and through
each artifact in its fresh process, and scores both sets of outputs in this process. A
quantized artifact passes when its main score (`Evaluation.score`, in percent) is within
`METRIC_TOLERANCE_POINTS` of the Keras model's.
"""

import dataclasses
import os

import numpy as np

from kerasbert import file_system
from kerasbert.export.errors import ExportError

METRIC_TOLERANCE_POINTS = 1.0
EVAL_BATCH_SIZE = 32


class LabelledSet:
    """The examples of `path` for `task_name`, batched for `model` (see the module docstring).

    `max_examples` keeps the first that many examples (all when None). Bad input (a task that
    does not fit the model, a file that cannot be read, no labels) is an `ExportError` naming
    it.

    Example:
    >>> import kerasbert
    >>> from kerasbert.data import demo
    >>> tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    >>> config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
    ...     num_layers=1, vocab_size=tokenizer.vocabulary_size(), max_positions=32)
    >>> labels = demo.classification_labels()
    >>> model = kerasbert.models.build_task_model(config, "sequence_classification",
    ...                                           num_labels=len(labels), id2label=labels)
    >>> labelled = LabelledSet("wordnet_gloss", demo.classification_files()["dev"], model,
    ...                        tokenizer, max_seq_length=32, max_examples=40)
    >>> len(labelled.batches), sorted(labelled.batches[0])
    (2, ['padding_mask', 'segment_ids', 'token_ids'])
    >>> LabelledSet("squad_v1", "dev.json", model, tokenizer, 32)
    Traceback (most recent call last):
    ...
    kerasbert.export.errors.ExportError: --task=squad_v1 is a question_answering task, and ...
    """

    def __init__(self, task_name, path, model, tokenizer, max_seq_length, max_examples=None,
                 batch_size=EVAL_BATCH_SIZE):
        from kerasbert.training.finetune import FinetuneSettings
        from kerasbert.training.finetuning_tasks import FINETUNING_TASKS

        if task_name not in FINETUNING_TASKS:
            raise ExportError(f"--task={task_name}: not a task kerasbert-finetune knows; "
                              f"choose from {sorted(FINETUNING_TASKS)}")
        self.task = FINETUNING_TASKS[task_name]
        self.path = os.fspath(path)
        model_task = getattr(model, "task", None)
        if model_task != self.task.model_task:
            kind = (f"a {model_task} model" if model_task else
                    "not a task model (an encoder or a pretraining model)")
            raise ExportError(f"--task={task_name} is a {self.task.model_task} task, and "
                              f"{model.name} is {kind}")
        labels = _model_labels(model)
        _check_labels(self.task, task_name, labels, model)
        if tokenizer is None:
            raise ExportError(f"--eval_file {self.path}: its texts go through the model's "
                              f"tokenizer, and {model.name} has none; pass --tokenizer")
        # The artifacts take batches of max_seq_length tokens (fixed-shape TFLite inputs).
        self.settings = FinetuneSettings(max_seq_length=max_seq_length, labels=labels,
                                         length_buckets=False)
        if not file_system.isfile(self.path):
            raise ExportError(f"--eval_file {self.path}: no such file")
        try:
            with file_system.local_copy(self.path) as local:  # the task readers read local files
                examples = self.task.read(local, "dev")
        except (ValueError, OSError, UnicodeDecodeError, KeyError) as error:
            raise ExportError(f"--eval_file {self.path}: cannot read it as {task_name} "
                              f"({error})") from None
        if max_examples is not None:
            examples = examples[:max_examples]
        if not examples:
            raise ExportError(f"--eval_file {self.path}: no {task_name} examples")
        self.examples_read = len(examples)
        try:
            inputs = self.task.evaluation_inputs(examples, tokenizer, self.settings, batch_size)
            self.bookkeeping = [{name: np.asarray(value) for name, value in batch.items()}
                                for batch in inputs.batches]
        except (ValueError, KeyError) as error:
            raise ExportError(f"--eval_file {self.path}: cannot make {task_name} inputs of "
                              f"it ({error})") from None
        self.inputs = dataclasses.replace(inputs, batches=self.bookkeeping)
        self.batches = [{name: batch[name].astype(np.int32) for name in model.input}
                        for batch in self.bookkeeping]

    def score(self, outputs_per_batch):
        """The `Evaluation` of a model's outputs on `batches` (a list of `{name: array}`, one
        per batch), computed by the task's own `score`."""
        outputs = {name: np.concatenate([batch[name] for batch in outputs_per_batch])
                   for name in outputs_per_batch[0]}
        try:
            return self.task.score(self.inputs, outputs, self.settings)
        except (ValueError, KeyError) as error:
            raise ExportError(f"--eval_file {self.path}: cannot score {self.task.name} on "
                              f"it ({error})") from None

    def points(self, evaluation):
        """The main score of `evaluation` in percent."""
        return float(evaluation.score) * self.task.score_to_percent

    def describe(self):
        """What the report says of the set."""
        return {"task": self.task.name, "file": self.path, "examples": self.examples_read,
                "batches": len(self.batches)}


def _model_labels(model):
    id2label = getattr(model, "id2label", None)
    return [id2label[index] for index in sorted(id2label)] if id2label else None


def _check_labels(task, task_name, labels, model):
    """The model's label names must be the task's (GLUE-style), or exist (CoNLL: the tags)."""
    if task.model_task == "token_classification" and not labels:
        raise ExportError(f"--task={task_name}: {model.name} has no label names (id2label) to "
                          "read its tags by")
    expected = task.labels([]) if task.model_task == "sequence_classification" else None
    if expected is None:
        return
    if labels is None:
        width = model.output["logits"].shape[-1]
        if width != len(expected):
            raise ExportError(f"--task={task_name} has {len(expected)} labels, and {model.name} "
                              f"predicts {width}")
    elif list(labels) != list(expected):
        raise ExportError(f"--task={task_name} has {len(expected)} labels "
                          f"{_shortened(expected)}, and {model.name} predicts {len(labels)} "
                          f"{_shortened(labels)}")


def _shortened(names, count=5):
    names = list(names)
    return str(names[:count])[:-1] + (f", ... ({len(names)} in all)]" if len(names) > count
                                      else "]")
