"""GLUE-format task files -> checked examples -> `tf.data` batches; predictions -> TSV files.

    glue_examples(task, path)        one `GlueExample` per line, every line checked
    glue_dataset(task, path, tok)    batches per the fine-tuning batch contract
    predictions_from_logits(task, logits)
    write_dev_predictions / write_test_predictions

Tasks and their file layouts are in `kerasbert.data.glue_tasks` (the nine GLUE tasks and the
shipped `wordnet_gloss` demo). Files are read in Python (they are small: MNLI's train file, the
largest, is 393k lines), tokenized and packed in the graph.

Malformed lines. Every line is checked: its number of columns against the header, its label
against the task's labels (STS-B: a finite number), and a file without examples is an error;
each raises `TaskDataError` naming the file and the line. A line with the wrong number of columns
is skipped instead under `bad_lines="skip"`, which is QQP's default: a few lines of QQP's
released files lack fields, and Hugging Face's QQP processor skips such lines too. Skipped lines
are counted in one logged warning per file (with the first line numbers); any other error
still raises.
"""

import dataclasses
import logging
import math

import numpy as np
import tensorflow as tf

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.data import length_buckets as buckets
from kerasbert.data.glue_tasks import get_task
from kerasbert.data.passes import batches_of, example_passes, rows_of
from kerasbert.data.task_errors import TaskDataError
from kerasbert.tokenizers.text_files import open_decompressed

BAD_LINE_POLICIES = ("fail", "skip")
PREDICTIONS_HEADER = "index\tprediction"

_logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class GlueExample:
    """One example of a task file: its texts, its label as the file writes it, where it came from.

    `index` is the file's index column (a string), or the example's 0-based position in the file
    where the file has none; `text_b` is None for single-sentence tasks, `label` None in test
    files; `line` is the 1-based line number in the file.

    >>> GlueExample(index="0", text_a="It rains.", text_b=None, label="1", line=1).label
    '1'
    """

    index: str
    text_a: str
    text_b: str
    label: str
    line: int


def glue_examples(task, path, split=None, *, bad_lines=None):
    """Yield the `GlueExample`s of the task file at `path` (plain or .gz), checking every line.

    `split` is a key of `task.splits` ("train", "dev", "test", "dev_matched", ...); by default the
    one whose official file name `path` has. `bad_lines` ("fail" or "skip") defaults to the
    task's policy. Raises `TaskDataError` (file and line in the message) on malformed data.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.tsv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("index\\tquestion\\tsentence\\tlabel\\n"
    ...                 "7\\tWho won?\\tWe did.\\tentailment\\n")
    >>> [(e.index, e.text_a, e.text_b, e.label) for e in glue_examples("qnli", path)]
    [('7', 'Who won?', 'We did.', 'entailment')]
    """
    task = get_task(task)
    split = task.split_of_file(path) if split is None else split
    if split not in task.splits:
        raise ValueError(f"{task.name} has no split {split!r}; expected one of {list(task.splits)}")
    bad_lines = task.bad_lines if bad_lines is None else bad_lines
    if bad_lines not in BAD_LINE_POLICIES:
        raise ValueError(f"bad_lines must be one of {BAD_LINE_POLICIES}, got {bad_lines!r}")
    layout = task.splits[split].layout
    lines = numbered_lines(path)
    columns = layout.headerless_columns or _header(path, lines, layout, task.name, split)
    where = {name: columns.index(name) for name in layout.needed_columns}
    count, skipped, number = 0, [], 0
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) != len(columns):
            if bad_lines == "fail":
                raise TaskDataError(f"{path} line {number}: expected {len(columns)} tab-separated "
                                    f"columns ({task.name} {split}), got {len(fields)}")
            skipped.append(number)
            continue
        label = None
        if layout.labelled:
            label = fields[where[layout.label_column]]
            _check_label(task, label, path, number)
        texts = [fields[where[name]] for name in layout.text_columns]
        index = fields[where[layout.index_column]] if layout.index_column else str(count)
        yield GlueExample(index, texts[0], texts[1] if len(texts) == 2 else None, label, number)
        count += 1
    if skipped:
        _logger.warning("%s: skipped %d line(s) with the wrong number of columns (lines %s%s)",
                        path, len(skipped), ", ".join(map(str, skipped[:10])),
                        ", ..." if len(skipped) > 10 else "")
    if count == 0:
        raise TaskDataError(f"{path} line {max(number, 1)}: the file ends without any {task.name} "
                            f"{split} example")


def example_labels(task, examples):
    """The examples' labels as model targets: int32 label ids, or float32 scores for regression.

    >>> examples = [GlueExample("0", "a", "b", "entailment", 2),
    ...             GlueExample("1", "c", "d", "neutral", 3)]
    >>> example_labels("mnli", examples)
    array([1, 2], dtype=int32)
    """
    task = get_task(task)
    if any(example.label is None for example in examples):
        raise ValueError(f"{task.name}: unlabelled examples (a test file) have no labels")
    if task.is_regression:
        return np.array([float(example.label) for example in examples], np.float32)
    return np.array([task.label_id(example.label) for example in examples], np.int32)


def glue_dataset(task, path, tokenizer, max_seq_length=128, batch_size=32, shuffle=False, seed=0,
                 *, split=None, drop_remainder=False, bad_lines=None, length_buckets=True):
    """Batches of the task file at `path`: `glue_examples` fed to `examples_dataset`.

    To map predictions back to examples, read them with `glue_examples` (same order):
    `example_index` in each batch is the position of the example in that list
    (`kerasbert.data.length_buckets.in_example_order` puts outputs of a shuffled dataset back
    in that order).

    >>> import os, tempfile, kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("sentence\\tlabel\\nA fine film.\\t1\\nDull.\\t0\\n")
    >>> batch = next(iter(glue_dataset("sst2", path, tokenizer, max_seq_length=8,
    ...                                length_buckets=False)))
    >>> batch["token_ids"].shape.as_list(), batch["labels"].numpy().tolist()
    ([2, 8], [1, 0])
    """
    examples = list(glue_examples(task, path, split, bad_lines=bad_lines))
    return examples_dataset(task, examples, tokenizer, max_seq_length, batch_size, shuffle, seed,
                            drop_remainder=drop_remainder, length_buckets=length_buckets)


def examples_dataset(task, examples, tokenizer, max_seq_length=128, batch_size=32, shuffle=False,
                     seed=0, *, drop_remainder=False, epochs=1, length_buckets=True,
                     window_batches=buckets.WINDOW_BATCHES):
    """Batches of `examples` (`GlueExample`s of `task`) per the fine-tuning batch contract.

    Each batch is a dict of int32 `token_ids`, `segment_ids`, `padding_mask` `[batch, length]`
    (texts packed in the tokenizer's own layout, `truncation="longest_first"`), `example_index`
    int32 `[batch]` (position in `examples`) and, when the examples are labelled, `labels`
    `[batch]` (int32 label ids; float32 scores for regression). With `shuffle`, the order is
    reshuffled every pass, the same passes for the same `seed`. `epochs`: passes in the dataset
    (None: forever); each pass's order is then a function of `seed` and the pass alone
    (`kerasbert.data.passes`), so a checkpointed iterator resumes it.

    `length_buckets` (the default): `length` is the smallest of
    `length_buckets.bucket_lengths(max_seq_length)` that holds the batch's longest example;
    evaluation batches (no `shuffle`) hold the same examples as without it; training batches
    group examples of similar length within windows of `window_batches` batches, each batch
    keeping its window's label proportions (`kerasbert.data.length_buckets`; 1: each batch holds
    the examples fixed padding gives it).
    Without `length_buckets`, `length` is `max_seq_length`.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> examples = [GlueExample("0", "a file", "a list", None, 2)]
    >>> batch = next(iter(examples_dataset("rte", examples, tokenizer, max_seq_length=8,
    ...                                    length_buckets=False)))
    >>> sorted(batch), batch["segment_ids"].numpy().tolist()
    (['example_index', 'padding_mask', 'segment_ids', 'token_ids'], [[0, 0, 0, 0, 1, 1, 1, 0]])
    """
    task = get_task(task)
    if not examples:
        raise ValueError(f"{task.name}: no examples to make a dataset of")
    columns = {"text_a": [example.text_a for example in examples],
               "example_index": np.arange(len(examples), dtype=np.int32)}
    if task.is_pair:
        columns["text_b"] = [example.text_b for example in examples]
    if examples[0].label is not None:
        columns["labels"] = example_labels(task, examples)
    if length_buckets:
        make_pass = _bucketed_pass(columns, tokenizer, max_seq_length, batch_size, shuffle,
                                   seed, drop_remainder, window_batches)
    else:
        make_pass = batches_of(columns, batch_size, drop_remainder)
    dataset = example_passes(len(examples), make_pass, shuffle=shuffle, seed=seed,
                             epochs=epochs)
    bucket_lengths = buckets.bucket_lengths(max_seq_length)

    def pack(batch):
        packed = tokenizer(batch["text_a"], batch.get("text_b"), max_length=max_seq_length,
                           truncation="longest_first")
        shape = [batch["example_index"].shape[0], max_seq_length]
        packed = {name: tf.ensure_shape(value, shape) for name, value in packed.items()}
        if length_buckets:
            packed = buckets.trim_to_bucket(packed, bucket_lengths)
        return {**packed, **{name: value for name, value in batch.items() if "text" not in name}}

    return dataset.map(tf.autograph.experimental.do_not_convert(pack),
                       num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True).prefetch(tf.data.AUTOTUNE)


def _bucketed_pass(columns, tokenizer, max_seq_length, batch_size, shuffle, seed, drop_remainder,
                   window_batches):
    """A `make_pass` of batches of `columns` (`length_buckets.length_grouped` over their packed
    lengths, stratified by label id, or by score quintile for regression)."""
    lengths = buckets.packed_lengths(tokenizer, columns["text_a"], columns.get("text_b"),
                                     max_seq_length, truncation="longest_first")
    labels = columns.get("labels")
    strata = (None if labels is None else buckets.score_strata(labels)
              if labels.dtype.kind == "f" else labels)
    grouped = buckets.length_grouped(lengths, batch_size, strata=strata, shuffle=shuffle,
                                     seed=seed, drop_remainder=drop_remainder,
                                     window_batches=window_batches)
    rows = rows_of(columns)
    count = len(lengths)
    batch_count = count // batch_size if drop_remainder else -(-count // batch_size)

    def make_pass(indices):
        return grouped(indices).map(rows).apply(
            tf.data.experimental.assert_cardinality(batch_count))
    return make_pass


def answers_from_logits(logits, id2label):
    """What a classifier answers for each row of `logits` (`[examples, labels]`): `label` (the
    names of `id2label`, a mapping or list by label id), `label_id` (`numpy.argmax`: the first
    of equal logits, as `predictions_from_logits`) and `probabilities` (the softmax), numpy
    arrays; one logit per row (regression): `score`, that logit.

    >>> answers = answers_from_logits([[0.0, 1.0], [2.0, 2.0]], ["no", "yes"])
    >>> answers["label"].tolist(), answers["label_id"].tolist()
    (['yes', 'no'], [1, 0])
    >>> [[round(float(p), 4) for p in row] for row in answers["probabilities"]]
    [[0.2689, 0.7311], [0.5, 0.5]]
    >>> answers_from_logits([[3.25]], None)["score"].tolist()
    [3.25]
    """
    from scipy.special import softmax

    logits = np.asarray(logits, np.float32)
    if logits.ndim != 2:
        raise ValueError(f"logits must have shape [examples, labels], got {logits.shape}")
    if logits.shape[1] == 1:
        return {"score": logits[:, 0]}
    names = ([id2label[index] for index in range(len(id2label))] if hasattr(id2label, "keys")
             else list(id2label))
    if len(names) != logits.shape[1]:
        raise ValueError(f"{logits.shape[1]} logits per row, but {len(names)} label names")
    label_id = np.argmax(logits, axis=1).astype(np.int32)
    return {"label": np.array([names[index] for index in label_id], dtype=object),
            "label_id": label_id, "probabilities": softmax(logits, axis=1).astype(np.float32)}


def predictions_from_logits(task, logits):
    """Predicted label ids (argmax, int) or, for regression, scores (float) from model logits.

    >>> predictions_from_logits("rte", [[0.2, 0.9], [1.5, -1.0]]).tolist()
    [1, 0]
    >>> predictions_from_logits("stsb", [[3.25], [0.5]]).tolist()
    [3.25, 0.5]
    """
    task = get_task(task)
    logits = np.asarray(logits)
    if logits.ndim != 2 or logits.shape[1] != task.num_labels:
        raise ValueError(f"{task.name}: logits must have shape [examples, {task.num_labels}], "
                         f"got {logits.shape}")
    return logits[:, 0] if task.is_regression else np.argmax(logits, axis=1)


def write_dev_predictions(path, task, examples, predictions):
    """Write `index<TAB>prediction` lines, one per example, labels as the data file writes them.

    `predictions` are label ids (or scores for regression, written with 3 decimals, unclipped).
    The file appears complete or not at all. Returns `path`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev_predictions.tsv")
    >>> examples = [GlueExample("4", "a", "b", "entailment", 2)]
    >>> open(write_dev_predictions(path, "qnli", examples, [1])).read().splitlines()
    ['index\\tprediction', '4\\tnot_entailment']
    """
    return _write_predictions(path, get_task(task), examples, predictions, clip=False)


def write_test_predictions(output_dir, task, split, examples, predictions):
    """Write the predictions on a test split as the GLUE server expects; return the file's path.

    The file is `output_dir/<submission file>` (`task.splits[split].submission_file`, e.g.
    `MNLI-m.tsv`), with header `index<TAB>prediction`, the test file's indices, labels written as
    in the data files (MNLI and QNLI/RTE as words) and STS-B scores clipped to [0, 5].

    >>> import os, tempfile
    >>> examples = [GlueExample("0", "a", "b", None, 2), GlueExample("1", "c", "d", None, 3)]
    >>> path = write_test_predictions(tempfile.mkdtemp(), "stsb", "test", examples, [5.72, 2.5])
    >>> os.path.basename(path), open(path).read().splitlines()
    ('STS-B.tsv', ['index\\tprediction', '0\\t5.000', '1\\t2.500'])
    """
    task = get_task(task)
    submission_file = task.splits[split].submission_file if split in task.splits else None
    if submission_file is None:
        raise ValueError(f"{task.name} split {split!r} has no GLUE submission file; splits with "
                         f"one: {[n for n, s in task.splits.items() if s.submission_file]}")
    return _write_predictions(file_system.join(output_dir, submission_file), task, examples,
                              predictions, clip=True)


def _write_predictions(path, task, examples, predictions, clip):
    predictions = np.asarray(predictions)
    if predictions.shape != (len(examples),):
        raise ValueError(f"{len(examples)} examples but predictions of shape {predictions.shape}")
    if task.is_regression:
        scores = np.clip(predictions, 0.0, 5.0) if clip else predictions
        labels = [f"{score:.3f}" for score in scores.astype(np.float64)]
    else:
        label_ids = predictions.astype(np.int64)
        if np.any((label_ids != predictions) | (label_ids < 0) | (label_ids >= task.num_labels)):
            raise ValueError(f"{task.name} predictions must be label ids 0-{task.num_labels - 1}")
        labels = [task.labels[label_id] for label_id in label_ids]
    rows = [f"{example.index}\t{label}" for example, label in zip(examples, labels)]
    return write_atomically(path, "\n".join([PREDICTIONS_HEADER, *rows]) + "\n")


def numbered_lines(path):
    """(1-based number, text) of each line of a UTF-8 file, plain or gzip (by the .gz suffix).

    Lines end at "\\n" only (a stray "\\r" inside a field stays there); a "\\r\\n" ending and a
    byte-order mark are removed.
    """
    with open_decompressed(path, gzipped=path.endswith(".gz")) as file:
        for number, raw in enumerate(file, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise TaskDataError(f"{path} line {number}: not UTF-8 ({error})") from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            yield number, line.removesuffix("\n").removesuffix("\r")


def _header(path, lines, layout, task_name, split):
    """The column names of the header line, checked to hold the columns `layout` reads."""
    number, line = next(lines, (1, None))
    if line is None:
        raise TaskDataError(f"{path} line 1: the file is empty (no header, no {task_name} "
                            f"{split} examples)")
    columns = line.split("\t")
    missing = [name for name in layout.needed_columns if name not in columns]
    if missing:
        raise TaskDataError(f"{path} line {number}: the header lacks the column(s) {missing} of a "
                            f"{task_name} {split} file; it has {columns}")
    return columns


def _check_label(task, label, path, number):
    if task.is_regression:
        try:
            score = float(label)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise TaskDataError(f"{path} line {number}: {task.name} score {label!r} is not a "
                                f"finite number")
    elif label not in task.labels:
        raise TaskDataError(f"{path} line {number}: unknown {task.name} label {label!r}; "
                            f"expected one of {list(task.labels)}")
