"""SWAG (multiple-choice sentence endings): CSV files -> checked examples -> `tf.data` batches.

The files as SWAG distributes them (`train.csv`, `val.csv`, `test.csv`): comma-separated with
quoted fields and a header, an unnamed pandas index column first, then `video-id, fold-ind,
startphrase, sent1, sent2, gold-source, ending0, ending1, ending2, ending3, label` (no `label` in
`test.csv`). Columns are found by name, so a file without the index column reads too (examples are
then numbered 0, 1, ... in file order).

Each example makes four pairs as Hugging Face's `run_swag` builds them: the first text is
`sent1`, the second `sent2 + " " + ending<i>`. Batches hold `token_ids`, `segment_ids`,
`padding_mask` int32 `[batch, 4, length]` (`length` the batch's length bucket, or
`max_seq_length` without length buckets), `example_index` int32 `[batch]` and, for
labelled files, `labels` int32 `[batch]` (the right ending). Its metric is accuracy.
"""

import csv
import dataclasses

import numpy as np
import tensorflow as tf

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.data.length_buckets import bucket_lengths, trim_to_bucket
from kerasbert.data.passes import batches_of, example_passes
from kerasbert.data.task_errors import TaskDataError

NUM_CHOICES = 4
ENDING_COLUMNS = tuple(f"ending{choice}" for choice in range(NUM_CHOICES))
METRICS = ("accuracy",)
PREDICTIONS_HEADER = "index\tprediction"


@dataclasses.dataclass(frozen=True)
class SwagExample:
    """One SWAG example: the context, the start of the next sentence and four candidate endings.

    `index` is the file's (unnamed) index column, or the 0-based position in the file; `label`
    (an int 0-3) is None in test files; `line` is the 1-based line where the record starts.

    >>> example = SwagExample("0", "He sits down.", "He", ("eats.", "flies.", "sings.", "runs."),
    ...                       0, 2)
    >>> example.pairs()[1]
    ('He sits down.', 'He flies.')
    """

    index: str
    context: str
    start: str
    endings: tuple
    label: int
    line: int

    def pairs(self):
        """The (first text, second text) pair of each ending, as `run_swag` builds them."""
        return [(self.context, f"{self.start} {ending}") for ending in self.endings]


def swag_examples(path, labelled=None):
    """Yield the `SwagExample`s of a SWAG CSV file, checking every record.

    `labelled` defaults to whether the header has a `label` column. Raises `TaskDataError`
    (file and line in the message) for a missing column, a record with the wrong number of
    fields, a label other than 0-3, broken quoting or a file without examples.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "val.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write(",video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
    ...                 "ending0,ending1,ending2,ending3,label\\n"
    ...                 '5,v,1,"A man, smiling.",A man smiles.,He,gold,'
    ...                 'waves.,sleeps.,eats.,hides.,0\\n')
    >>> [(e.index, e.pairs()[0], e.label) for e in swag_examples(path)]
    [('5', ('A man smiles.', 'He waves.'), 0)]
    """
    with file_system.open_file(path, "rb") as file:
        reader = csv.reader(_decoded_lines(file, path), strict=True)
        records = _numbered_records(reader, path)
        number, header = next(records, (1, None))
        if header is None:
            raise TaskDataError(f"{path} line 1: the file is empty (no header, no SWAG examples)")
        labelled = "label" in header if labelled is None else labelled
        needed = ["sent1", "sent2", *ENDING_COLUMNS] + (["label"] if labelled else [])
        missing = [name for name in needed if name not in header]
        if missing:
            raise TaskDataError(f"{path} line {number}: the header lacks the column(s) {missing} "
                                f"of a SWAG file; it has {header}")
        where = {name: header.index(name) for name in needed}
        has_index = header[0] == ""
        count = 0
        for number, fields in records:
            if len(fields) != len(header):
                raise TaskDataError(f"{path} line {number}: expected {len(header)} fields, "
                                    f"got {len(fields)}")
            label = _label(fields[where["label"]], path, number) if labelled else None
            yield SwagExample(
                index=fields[0] if has_index else str(count), context=fields[where["sent1"]],
                start=fields[where["sent2"]],
                endings=tuple(fields[where[name]] for name in ENDING_COLUMNS), label=label,
                line=number)
            count += 1
        if count == 0:
            raise TaskDataError(f"{path} line {number}: the file ends without any SWAG example")


def swag_dataset(path, tokenizer, max_seq_length=128, batch_size=16, shuffle=False, seed=0, *,
                 labelled=None, drop_remainder=False, length_buckets=True):
    """Batches of the SWAG file at `path`: `swag_examples` fed to `swag_examples_dataset`.

    `example_index` in each batch is the example's position in `list(swag_examples(path))`.

    >>> import os, tempfile, kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> path = os.path.join(tempfile.mkdtemp(), "val.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("sent1,sent2,ending0,ending1,ending2,ending3,label\\n"
    ...                 "A man smiles.,He,waves.,sleeps.,eats.,hides.,2\\n")
    >>> batch = next(iter(swag_dataset(path, tokenizer, max_seq_length=16)))
    >>> batch["token_ids"].shape.as_list(), batch["labels"].numpy().tolist()
    ([1, 4, 16], [2])
    """
    examples = list(swag_examples(path, labelled))
    return swag_examples_dataset(examples, tokenizer, max_seq_length, batch_size, shuffle, seed,
                                 drop_remainder=drop_remainder, length_buckets=length_buckets)


def swag_examples_dataset(examples, tokenizer, max_seq_length=128, batch_size=16, shuffle=False,
                          seed=0, *, drop_remainder=False, epochs=1, length_buckets=True):
    """Batches of `SwagExample`s: the four pairs of each packed by the tokenizer, `[batch, 4, seq]`.

    `seq` is the smallest of `kerasbert.data.length_buckets.bucket_lengths(max_seq_length)`
    that holds the batch's longest pair (same examples, same batches, less padding), or
    `max_seq_length` without `length_buckets`.

    With `shuffle`, the order is reshuffled every pass, the same passes for the same `seed`.
    `epochs`: passes in the dataset (None: forever), each in an order made from `seed` and the
    pass alone (`kerasbert.data.passes`), so a checkpointed iterator resumes it.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "roberta_base", kerasbert.data.demo.vocabulary_dir("byte_pair"))
    >>> example = SwagExample("0", "It rains.", "We", ("stay.", "go.", "run.", "sit."), None, 2)
    >>> batch = next(iter(swag_examples_dataset([example], tokenizer, max_seq_length=12)))
    >>> sorted(batch), batch["padding_mask"].shape.as_list()
    (['example_index', 'padding_mask', 'segment_ids', 'token_ids'], [1, 4, 12])
    """
    if not examples:
        raise ValueError("no SWAG examples to make a dataset of")
    columns = {
        "contexts": [[example.context] * NUM_CHOICES for example in examples],
        "endings": [[second for _, second in example.pairs()] for example in examples],
        "example_index": np.arange(len(examples), dtype=np.int32)}
    if examples[0].label is not None:
        columns["labels"] = swag_labels(examples)
    dataset = example_passes(len(examples), batches_of(columns, batch_size, drop_remainder),
                             shuffle=shuffle, seed=seed, epochs=epochs)

    buckets = bucket_lengths(max_seq_length)

    def pack(batch):
        packed = tokenizer(tf.reshape(batch["contexts"], [-1]), tf.reshape(batch["endings"], [-1]),
                           max_length=max_seq_length, truncation="longest_first")
        shape = [batch["example_index"].shape[0], NUM_CHOICES, max_seq_length]
        packed = {name: tf.ensure_shape(tf.reshape(value, [-1, *shape[1:]]), shape)
                  for name, value in packed.items()}
        if length_buckets:
            packed = trim_to_bucket(packed, buckets)
        return {**packed,
                **{name: value for name, value in batch.items() if name in ("labels",
                                                                            "example_index")}}

    return dataset.map(tf.autograph.experimental.do_not_convert(pack),
                       num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True).prefetch(tf.data.AUTOTUNE)


def swag_labels(examples):
    """The right ending of each example, int32 `[examples]`.

    >>> swag_labels([SwagExample("0", "c", "s", ("a", "b", "c", "d"), 3, 2)])
    array([3], dtype=int32)
    """
    if any(example.label is None for example in examples):
        raise ValueError("unlabelled SWAG examples (a test file) have no labels")
    return np.array([example.label for example in examples], np.int32)


def write_swag_predictions(path, examples, predictions):
    """Write `index<TAB>prediction` lines (the predicted ending, 0-3) atomically; return `path`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev_predictions.tsv")
    >>> example = SwagExample("12", "c", "s", ("a", "b", "c", "d"), None, 2)
    >>> open(write_swag_predictions(path, [example], [3])).read().splitlines()
    ['index\\tprediction', '12\\t3']
    """
    predictions = np.asarray(predictions)
    if predictions.shape != (len(examples),):
        raise ValueError(f"{len(examples)} examples but predictions of shape {predictions.shape}")
    if not np.all((predictions >= 0) & (predictions < NUM_CHOICES)):
        raise ValueError(f"predictions must be ending numbers 0-{NUM_CHOICES - 1}")
    rows = [f"{example.index}\t{int(choice)}" for example, choice in zip(examples, predictions)]
    return write_atomically(path, "\n".join([PREDICTIONS_HEADER, *rows]) + "\n")


def _numbered_records(reader, path):
    """(1-based line where the record starts, fields) of each CSV record."""
    start = 1
    try:
        for fields in reader:
            yield start, fields
            start = reader.line_num + 1
    except csv.Error as error:
        raise TaskDataError(f"{path} line {start}: malformed CSV ({error})") from None


def _decoded_lines(file, path):
    """The lines of a binary file as UTF-8 text, line endings kept (as `csv` wants them)."""
    for number, raw in enumerate(file, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise TaskDataError(f"{path} line {number}: not UTF-8 ({error})") from None
        yield line.removeprefix("\ufeff") if number == 1 else line


def _label(text, path, number):
    if text not in {str(choice) for choice in range(NUM_CHOICES)}:
        raise TaskDataError(f"{path} line {number}: SWAG label {text!r} is not an ending number "
                            f"0-{NUM_CHOICES - 1}")
    return int(text)
