"""The GLUE tasks (and the shipped WordNet gloss set) as data: files, columns, labels, metrics.

One `GlueTask` per task in `GLUE_TASKS`. Files are the tab-separated files GLUE distributes, one
folder per task; each split names its file, where its columns are, and (for test files) the file a
GLUE submission expects. Columns are found by their header names, so extra columns (MNLI's parses,
STS-B's genre and year, ...) are simply not read. The official layouts, as the GLUE download
script writes them (and Hugging Face's and Google's GLUE processors read them):

- cola: train/dev have no header, 4 columns `source, label, original mark, sentence`;
  test `index sentence`.
- sst2: train/dev `sentence label`; test `index sentence`.
- mrpc: train/dev `Quality, #1 ID, #2 ID, #1 String, #2 String`; test the same with `index`
  for `Quality`.
- stsb: train/dev `index genre filename year old_index source1 source2 sentence1 sentence2
  score`; test the same without `score`.
- qqp: train/dev `id qid1 qid2 question1 question2 is_duplicate`; test `id question1 question2`.
- mnli: `index promptID pairID genre`, 4 parse columns, `sentence1 sentence2`, then
  `label1 gold_label` (train, 12 columns) or `label1 ... label5 gold_label` (dev_matched,
  dev_mismatched, 16 columns); test_matched / test_mismatched stop after `sentence2` (10).
- qnli: train/dev `index question sentence label`; test `index question sentence`.
- rte, wnli: train/dev `index sentence1 sentence2 label`; test `index sentence1 sentence2`.

MNLI's diagnostic set (`diagnostic/diagnostic.tsv`: `index sentence1 sentence2`) is predicted by
the MNLI model for the submission file `AX.tsv`. Label lists and their order are those of the
GLUE processors (label id = position). `wordnet_gloss` is the fine-tuning demo shipped with
kerasbert (`kerasbert.data.demo`): gzip TSV files `label<TAB>text`, all three splits labelled.
"""

import dataclasses
import os
import types

from kerasbert import file_system
from kerasbert.data import demo

@dataclasses.dataclass(frozen=True)
class FileLayout:
    """Which columns of a task file hold the texts, the label and the example's index.

    `label_column` is None for unlabelled (test) files; `index_column` None numbers the examples
    0, 1, ... in file order. `headerless_columns` names the columns of a file without a header
    line (CoLA's train and dev files); None means the first line is the header.

    >>> layout = FileLayout(text_columns=("sentence",), label_column="label")
    >>> layout.labelled, layout.index_column is None
    (True, True)
    """

    text_columns: tuple
    label_column: str = None
    index_column: str = None
    headerless_columns: tuple = None

    @property
    def labelled(self):
        return self.label_column is not None

    @property
    def needed_columns(self):
        """The names that must be in the header: texts, then label and index where used."""
        return tuple(name for name in (*self.text_columns, self.label_column, self.index_column)
                     if name is not None)


@dataclasses.dataclass(frozen=True)
class TaskSplit:
    """One file of a task: its official name, its layout, its role and its GLUE submission file.

    `role` is "train", "dev" or "test"; `submission_file` is the name the GLUE server expects for
    the predictions on this (test) file, None where there is none.

    >>> split = GLUE_TASKS["mnli"].splits["test_mismatched"]
    >>> split.file_name, split.role, split.submission_file, split.layout.labelled
    ('test_mismatched.tsv', 'test', 'MNLI-mm.tsv', False)
    """

    file_name: str
    layout: FileLayout
    role: str
    submission_file: str = None


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """A sentence or sentence-pair task: its files, labels (None for regression) and metrics.

    `labels` are the label strings as the data files write them, in id order. `bad_lines` is the
    default policy for lines with the wrong number of columns: "fail" (raise `TaskDataError`) or
    "skip" (count and log them).

    >>> task = get_task("mrpc")
    >>> task.labels, task.num_labels, task.metrics, task.is_pair
    (('0', '1'), 2, ('accuracy', 'f1'), True)
    >>> task.label_id("1"), get_task("stsb").is_regression, get_task("stsb").num_labels
    (1, True, 1)
    >>> get_task("mnli").splits_of_role("dev")
    ('dev_matched', 'dev_mismatched')
    """

    name: str
    splits: types.MappingProxyType
    labels: tuple
    metrics: tuple
    bad_lines: str = "fail"

    @property
    def is_regression(self):
        return self.labels is None

    @property
    def num_labels(self):
        """Outputs of the task model: the number of classes, or 1 for regression."""
        return 1 if self.is_regression else len(self.labels)

    @property
    def is_pair(self):
        return len(self.splits["train"].layout.text_columns) == 2

    def splits_of_role(self, role):
        """The names of the splits with `role` ("train", "dev" or "test"), in table order."""
        return tuple(name for name, split in self.splits.items() if split.role == role)

    def split_of_file(self, path):
        """The split whose official file name is the base name of `path`.

        Raises ValueError if the name is not one of the task's official names.
        """
        base = file_system.basename(path)
        for name, split in self.splits.items():
            if split.file_name == base:
                return name
        names = [split.file_name for split in self.splits.values()]
        raise ValueError(f"{path}: not an official {self.name} file name {names}; "
                         f"pass split= one of {list(self.splits)}")

    def label_id(self, label):
        """The id of a label string of a classification task; ValueError if it is unknown."""
        if self.is_regression:
            raise ValueError(f"{self.name} is a regression task; it has no label ids")
        try:
            return self.labels.index(label)
        except ValueError:
            raise ValueError(f"unknown {self.name} label {label!r}; "
                             f"expected one of {list(self.labels)}") from None


def _glue_splits(train, test, submission_file, dev=None):
    """Train, dev and test splits of a GLUE task whose dev file has the train layout."""
    return types.MappingProxyType({
        "train": TaskSplit("train.tsv", train, "train"),
        "dev": TaskSplit("dev.tsv", dev or train, "dev"),
        "test": TaskSplit("test.tsv", test, "test", submission_file),
    })


def _pair(first, second, label, index="index"):
    """Layouts (labelled, test) of a pair task whose files all have an index column."""
    return FileLayout((first, second), label, index), FileLayout((first, second), None, index)


def _build_tasks():
    mnli_labels = ("contradiction", "entailment", "neutral")
    nli_pair = FileLayout(("sentence1", "sentence2"), None, "index")
    mnli_labelled = FileLayout(("sentence1", "sentence2"), "gold_label", "index")
    tasks = [
        GlueTask("cola", _glue_splits(
            FileLayout(("sentence",), "label",
                       headerless_columns=("source", "label", "original_mark", "sentence")),
            FileLayout(("sentence",), None, "index"), "CoLA.tsv"),
            labels=("0", "1"), metrics=("matthews_correlation",)),
        GlueTask("sst2", _glue_splits(
            FileLayout(("sentence",), "label"), FileLayout(("sentence",), None, "index"),
            "SST-2.tsv"), labels=("0", "1"), metrics=("accuracy",)),
        GlueTask("mrpc", _glue_splits(
            FileLayout(("#1 String", "#2 String"), "Quality"),
            FileLayout(("#1 String", "#2 String"), None, "index"), "MRPC.tsv"),
            labels=("0", "1"), metrics=("accuracy", "f1")),
        GlueTask("stsb", _glue_splits(*_pair("sentence1", "sentence2", "score"), "STS-B.tsv"),
                 labels=None, metrics=("pearson", "spearman")),
        GlueTask("qqp", _glue_splits(*_pair("question1", "question2", "is_duplicate", "id"),
                                     "QQP.tsv"),
                 labels=("0", "1"), metrics=("accuracy", "f1"), bad_lines="skip"),
        GlueTask("mnli", types.MappingProxyType({
            "train": TaskSplit("train.tsv", mnli_labelled, "train"),
            "dev_matched": TaskSplit("dev_matched.tsv", mnli_labelled, "dev"),
            "dev_mismatched": TaskSplit("dev_mismatched.tsv", mnli_labelled, "dev"),
            "test_matched": TaskSplit("test_matched.tsv", nli_pair, "test", "MNLI-m.tsv"),
            "test_mismatched": TaskSplit("test_mismatched.tsv", nli_pair, "test", "MNLI-mm.tsv"),
            "diagnostic": TaskSplit("diagnostic.tsv", nli_pair, "test", "AX.tsv"),
        }), labels=mnli_labels, metrics=("accuracy",)),
        GlueTask("qnli", _glue_splits(*_pair("question", "sentence", "label"), "QNLI.tsv"),
                 labels=("entailment", "not_entailment"), metrics=("accuracy",)),
        GlueTask("rte", _glue_splits(*_pair("sentence1", "sentence2", "label"), "RTE.tsv"),
                 labels=("entailment", "not_entailment"), metrics=("accuracy",)),
        GlueTask("wnli", _glue_splits(*_pair("sentence1", "sentence2", "label"), "WNLI.tsv"),
                 labels=("0", "1"), metrics=("accuracy",)),
        GlueTask("wordnet_gloss", types.MappingProxyType({
            split: TaskSplit(os.path.basename(path), FileLayout(("text",), "label"), split)
            for split, path in demo.classification_files().items()}),
            labels=tuple(demo.classification_labels()),
            metrics=("accuracy", "matthews_correlation")),
    ]
    return types.MappingProxyType({task.name: task for task in tasks})


GLUE_TASKS = _build_tasks()


def get_task(name):
    """The `GlueTask` called `name` (a `GlueTask` is returned as it is).

    >>> get_task("cola").splits["test"].submission_file
    'CoLA.tsv'
    """
    if isinstance(name, GlueTask):
        return name
    if name not in GLUE_TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {list(GLUE_TASKS)}")
    return GLUE_TASKS[name]
