"""Text embedding data: tab-separated anchor / positive / optional negative files (contrastive
training and retrieval evaluation) and scored pairs (STS-B-like similarity evaluation), and
their `tf.data` batches.

    anchor<TAB>positive                 training and retrieval: the positive is the anchor's match
    anchor<TAB>positive<TAB>negative    with a hard negative (a third column that is text)
    text_a<TAB>text_b<TAB>score         scored pairs: every third column a number (dev files only)

A file has no header; every line has the same number of columns.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from kerasbert.data import length_buckets as buckets
from kerasbert.data.glue import numbered_lines
from kerasbert.data.passes import batches_of, example_passes
from kerasbert.data.task_errors import TaskDataError

CONTRASTIVE_COLUMNS = ("anchor", "positive", "negative")


@dataclasses.dataclass(frozen=True)
class ContrastiveExample:
    """An anchor, its positive and optionally a hard negative.

    >>> ContrastiveExample("a cat", "a small feline").negative is None
    True
    """

    anchor: str
    positive: str
    negative: str = None


@dataclasses.dataclass(frozen=True)
class ScoredPair:
    """Two texts and how similar they are (e.g. STS-B's 0-5).

    >>> ScoredPair("a cat", "a dog", 1.5).score
    1.5
    """

    text_a: str
    text_b: str
    score: float


def read_text_pairs(path):
    """The examples of a text embedding file: `ContrastiveExample`s, or `ScoredPair`s when
    every line's third column is a number. A line with another column count than the first
    line, fewer than two or more than three columns, or an empty text is a `TaskDataError`
    naming the file and line; so is an empty file.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.tsv")
    >>> _ = open(path, "w").write("a cat\\ta feline\\t4.5\\na car\\ta truck\\t2\\n")
    >>> read_text_pairs(path)[1]
    ScoredPair(text_a='a car', text_b='a truck', score=2.0)
    """
    rows = []
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (2, 3):
            raise TaskDataError(f"{path} line {number}: expected 2 or 3 tab-separated columns "
                                f"(anchor, positive, optional negative or score), got "
                                f"{len(fields)}")
        if rows and len(fields) != len(rows[0][1]):
            raise TaskDataError(f"{path} line {number}: {len(fields)} columns, but line "
                                f"{rows[0][0]} has {len(rows[0][1])}")
        empty = [index + 1 for index, field in enumerate(fields) if not field.strip()]
        if empty:
            raise TaskDataError(f"{path} line {number}: column {empty[0]} is empty")
        rows.append((number, fields))
    if not rows:
        raise TaskDataError(f"{path}: no examples")
    if len(rows[0][1]) == 3 and all(_is_number(fields[2]) for _, fields in rows):
        return [ScoredPair(fields[0], fields[1], float(fields[2])) for _, fields in rows]
    return [ContrastiveExample(*fields) for _, fields in rows]


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def contrastive_dataset(examples, tokenizer, max_seq_length, batch_size, *, shuffle=False,
                        seed=0, epochs=1, length_buckets=True):
    """Batches of `ContrastiveExample`s for `TextEmbeddingModel.fit`: `{"anchor": inputs,
    "positive": inputs[, "negative": inputs], "example_index": [batch]}`, each column its
    texts packed alone (`[batch, length]`, truncated to `max_seq_length`). `length_buckets`:
    each column padded to the smallest bucket length that holds its longest text (else to
    `max_seq_length`). Passes and shuffling as `kerasbert.data.passes.example_passes` makes
    them (the same batches for the same seed, so a restored iterator resumes exactly).

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> batch = next(iter(contrastive_dataset([ContrastiveExample("a cat", "a small cat")],
    ...                                       tokenizer, max_seq_length=8, batch_size=2)))
    >>> sorted(batch), batch["positive"]["padding_mask"].numpy().tolist()
    (['anchor', 'example_index', 'positive'], [[1, 1, 1, 1, 1, 1, 0, 0]])
    """
    if not examples:
        raise ValueError("text_embedding: no examples to make a dataset of")
    names = CONTRASTIVE_COLUMNS[:2] if examples[0].negative is None else CONTRASTIVE_COLUMNS
    columns = {name: [getattr(example, name) for example in examples] for name in names}
    columns["example_index"] = np.arange(len(examples), dtype=np.int32)
    dataset = example_passes(len(examples), batches_of(columns, batch_size), shuffle=shuffle,
                             seed=seed, epochs=epochs)
    pack = _packer(tokenizer, max_seq_length, length_buckets)
    return dataset.map(tf.autograph.experimental.do_not_convert(
        lambda batch: {name: pack(value) if name in names else value
                       for name, value in batch.items()}),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)


def texts_dataset(texts, tokenizer, max_seq_length, batch_size, *, length_buckets=True):
    """Batches of single texts in order, for embedding them: the encoder's inputs and
    `example_index` (the text's position in `texts`).

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> [batch["example_index"].numpy().tolist() for batch in texts_dataset(
    ...     ["one", "two", "three"], tokenizer, max_seq_length=8, batch_size=2)]
    [[0, 1], [2]]
    """
    if not texts:
        raise ValueError("text_embedding: no texts to embed")
    pack = _packer(tokenizer, max_seq_length, length_buckets)
    columns = {"text": list(texts), "example_index": np.arange(len(texts), dtype=np.int32)}
    dataset = example_passes(len(texts), batches_of(columns, batch_size))
    return dataset.map(tf.autograph.experimental.do_not_convert(
        lambda batch: {**pack(batch["text"]), "example_index": batch["example_index"]}),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)


def _packer(tokenizer, max_seq_length, length_buckets):
    """A function from a batch of texts to the encoder's inputs, padded to `max_seq_length`
    or, with `length_buckets`, to the bucket of the longest."""
    lengths = buckets.bucket_lengths(max_seq_length)

    def pack(texts):
        packed = tokenizer(texts, max_length=max_seq_length)
        packed = {name: tf.ensure_shape(value, [None, max_seq_length])
                  for name, value in packed.items()}
        return buckets.trim_to_bucket(packed, lengths) if length_buckets else packed
    return pack
