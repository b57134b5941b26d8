"""CoNLL-2003 named entities: the reader, the label list, `tf.data` batches, predictions out.

A CoNLL-2003 file has one word a line, `word POS chunk tag` separated by
spaces, a blank line after each sentence and `-DOCSTART- -X- -X- O` lines
between documents. Tags are IOB1 (the original release: `I-` opens an
entity, `B-` only one that directly follows an entity of the same type) or
IOB2 / BIO (most copies: `B-` opens every entity); both read and score the
same way here. Batches follow the token classification contract of
`kerasbert.data.token_windows`; `predicted_tags` and
`write_conll_predictions` turn the model's logits into the `word gold
predicted` file that `conlleval` reads.
"""

import dataclasses
import re

import numpy as np
import tensorflow as tf

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.data.length_buckets import bucket_lengths, trim_to_bucket
from kerasbert.data.passes import batches_of, example_passes
from kerasbert.data.task_errors import TaskDataError
from kerasbert.data.token_windows import (resolve_overlap, window_capacity, word_predictions,
                                          word_windows)

DOCUMENT_START = "-DOCSTART-"
OUTSIDE = "O"
# The prefixes a tag may have, in the order the label list gives them.
PREFIXES = ("B", "I", "E", "S")
_TAG = re.compile(r"(?:O|[BIES]-\S+)\Z")
# A batch's tensors with one value per token, cut to the batch's length bucket together.
_PER_TOKEN = ("token_ids", "segment_ids", "padding_mask", "labels", "word_index")


@dataclasses.dataclass(frozen=True)
class ConllSentence:
    """One sentence of a CoNLL file: its words, their tags and where it starts.

    `line` is the 1-based line number of the first word in `source`; word `i`
    is on line `line + i`.

    >>> sentence = ConllSentence(("EU", "rejects"), ("B-ORG", "O"), "train.txt", 3)
    >>> sentence.words[0], sentence.tags[0], sentence.line
    ('EU', 'B-ORG', 3)
    """

    words: tuple
    tags: tuple
    source: str
    line: int


def read_conll(path, labels=None, columns=4, encoding="utf-8"):
    """The sentences of a CoNLL file, as a list of `ConllSentence`.

    Every line that is not blank nor a `-DOCSTART-` line must have `columns`
    fields separated by whitespace (CoNLL-2003: `word POS chunk tag`; pass
    `columns=2` for `word tag` copies); the word is the first, the tag the
    last. Tags must be `O` or `B-`, `I-`, `E-`, `S-` followed by a type, and,
    with `labels`, one of `labels`. Raises `TaskDataError` naming the file
    and line for anything else, for text that is not `encoding`, and for a
    file without sentences.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
    >>> _ = open(path, "w").write("-DOCSTART- -X- -X- O\\n\\nEU NNP B-NP I-ORG\\n"
    ...                           "rejects VBZ B-VP O\\n\\nPeter NNP B-NP I-PER\\n")
    >>> [(s.words, s.tags, s.line) for s in read_conll(path)]
    [(('EU', 'rejects'), ('I-ORG', 'O'), 3), (('Peter',), ('I-PER',), 6)]
    """
    known = None if labels is None else set(_checked_labels(labels))
    sentences, words, tags, first_line = [], [], [], None

    def end_sentence():
        if words:
            sentences.append(ConllSentence(tuple(words), tuple(tags), path, first_line))
        words.clear()
        tags.clear()

    with file_system.open_file(path, "rb") as file:
        for number, raw in enumerate(file, start=1):
            try:
                line = raw.decode(encoding)
            except UnicodeDecodeError as error:
                raise TaskDataError(f"{path} line {number}: not {encoding} text ({error.reason} "
                                    f"at byte {error.start})") from None
            fields = line.split()
            if not fields or fields[0] == DOCUMENT_START:
                end_sentence()
                continue
            if len(fields) != columns:
                raise TaskDataError(f"{path} line {number}: expected {columns} whitespace-"
                                    f"separated columns, got {len(fields)}: {line.rstrip()!r}")
            tag = fields[-1]
            if not _TAG.match(tag):
                raise TaskDataError(f"{path} line {number}: tag {tag!r} is neither O nor "
                                    "B-, I-, E- or S- followed by an entity type")
            if known is not None and tag not in known:
                raise TaskDataError(f"{path} line {number}: unknown tag {tag!r}; the labels "
                                    f"are {list(labels)}")
            if not words:
                first_line = number
            words.append(fields[0])
            tags.append(tag)
    end_sentence()
    if not sentences:
        raise TaskDataError(f"{path} line 1: the file holds no sentences")
    return sentences


def conll_labels(sentences):
    """The label list of a training set: `O`, then each entity type's tags, types sorted.

    Every type gets a `B-` and an `I-` tag (and `E-` / `S-` ones if the file
    uses them), whether or not the training set shows both: IOB1 training
    files can lack `B-PER` while their dev files have it. The order depends
    only on the set of types and prefixes, so the ids are stable.

    >>> sentence = ConllSentence(("EU", "Peter"), ("I-ORG", "I-PER"), "train.txt", 1)
    >>> conll_labels([sentence])
    ['O', 'B-ORG', 'I-ORG', 'B-PER', 'I-PER']
    """
    types, prefixes = set(), {"B", "I"}
    for sentence in sentences:
        for tag in sentence.tags:
            if tag != OUTSIDE:
                prefix, entity_type = tag.split("-", 1)
                prefixes.add(prefix)
                types.add(entity_type)
    return [OUTSIDE] + [f"{prefix}-{entity_type}" for entity_type in sorted(types)
                        for prefix in PREFIXES if prefix in prefixes]


def conll_dataset(sentences, tokenizer, labels, batch_size=32, max_seq_length=128, *,
                  overlap=None, shuffle=False, seed=0, shuffle_buffer=10_000,
                  drop_remainder=False, input_context=None, epochs=1, length_buckets=False):
    """Token classification batches of CoNLL sentences, for `model.fit` / `model.predict`.

    Each batch is a dict of int32 `token_ids`, `segment_ids`, `padding_mask`,
    `labels` (the word's label id on the first sub-token of each word the
    window predicts, -100 elsewhere) and `word_index` (that word's index in
    its sentence, -1 elsewhere), all `[batch, max_seq_length]`, and
    `example_index` (the sentence's index in `sentences`) `[batch]`. Sentences
    longer than one window are cut into windows sharing `overlap` sub-tokens
    (`None`: half a window); every word is predicted by exactly one window
    (see `kerasbert.data.token_windows.word_windows`). Tokenization and
    windowing run in the `tf.data` graph.

    Without `shuffle`, windows come sentence by sentence, as `predicted_tags`
    expects; with it, the windows are shuffled (anew each epoch, the same for
    the same `seed`). With an `input_context`, each input pipeline takes every
    n-th window and `batch_size` is the global batch size. `epochs`: passes in
    the dataset (None: forever); shuffled, each pass then takes the sentences in
    an order made from `seed` and the pass alone (`kerasbert.data.passes`; a
    checkpointed iterator resumes it), their windows in turn.

    `length_buckets`: each batch is cut to the smallest of
    `kerasbert.data.length_buckets.bucket_lengths(max_seq_length)` that holds its longest
    window (same windows, same batches, less padding). For training: the logits of
    `model.predict` over such batches differ in length from batch to batch, and
    `predicted_tags` takes `[windows, max_seq_length, labels]`.

    >>> import kerasbert.data.demo, kerasbert.zoo
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> sentence = ConllSentence(("Python", "runs", "everywhere"), ("B-MISC", "O", "O"), "-", 1)
    >>> batch = next(iter(conll_dataset([sentence], tokenizer, ["O", "B-MISC", "I-MISC"],
    ...                                 max_seq_length=8)))
    >>> batch["labels"].numpy().tolist(), batch["word_index"].numpy().tolist()
    ([[-100, 1, 0, 0, -100, -100, -100, -100]], [[-1, 0, 1, 2, -1, -1, -1, -1]])
    """
    sentences = list(sentences)
    if not sentences:
        raise ValueError("conll_dataset needs at least one sentence")
    resolve_overlap(overlap, window_capacity(tokenizer, max_seq_length))
    label_ids = {label: index for index, label in enumerate(_checked_labels(labels))}
    lengths = [len(sentence.words) for sentence in sentences]
    words = tf.RaggedTensor.from_row_lengths(
        tf.constant([word for sentence in sentences for word in sentence.words], tf.string),
        tf.constant(lengths, tf.int64))
    tag_ids = tf.RaggedTensor.from_row_lengths(
        tf.constant(_tag_ids(sentences, label_ids), tf.int32), tf.constant(lengths, tf.int64))
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)

    @tf.autograph.experimental.do_not_convert
    def windows(sentence_batch):
        return word_windows(sentence_batch["words"], sentence_batch["tag_ids"],
                            sentence_batch["example_index"], tokenizer, max_seq_length, overlap)

    columns = {"words": words, "tag_ids": tag_ids,
               "example_index": tf.range(len(sentences), dtype=tf.int32)}

    def windows_of(sentence_batches):
        dataset = sentence_batches.map(windows, num_parallel_calls=tf.data.AUTOTUNE,
                                       deterministic=True).unbatch()
        if input_context is not None:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        return dataset

    if shuffle and epochs == 1:
        dataset = windows_of(tf.data.Dataset.from_tensor_slices(columns).ragged_batch(64))
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    else:
        sentence_batches = batches_of(columns, 64)
        dataset = example_passes(
            len(sentences), lambda indices: windows_of(sentence_batches(indices)).batch(
                batch_size, drop_remainder=drop_remainder),
            shuffle=shuffle, seed=seed, epochs=epochs)
    if length_buckets:
        buckets = bucket_lengths(max_seq_length)
        dataset = dataset.map(tf.autograph.experimental.do_not_convert(
            lambda batch: trim_to_bucket(batch, buckets, _PER_TOKEN)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def predicted_tags(sentences, labels, logits, batches):
    """One predicted tag per word of every sentence, from the logits of `conll_dataset` batches.

    `logits` `[windows, max_seq_length, labels]` are the model's outputs on
    `batches` (an unshuffled `conll_dataset` of `sentences`, or any iterable
    of dicts with its `example_index` and `word_index`), in the same order.
    Each word takes the argmax at its first sub-token in the window that
    predicts it. Returns a list of tag lists, one per sentence.

    >>> sentence = ConllSentence(("EU", "rejects"), ("B-ORG", "O"), "-", 1)
    >>> logits = np.eye(3)[[[0, 1, 2, 0]]]
    >>> bookkeeping = [{"example_index": [0], "word_index": [[-1, 0, 1, -1]]}]
    >>> predicted_tags([sentence], ["O", "B-ORG", "I-ORG"], logits, bookkeeping)
    [['B-ORG', 'I-ORG']]
    """
    example_index, word_index = [], []
    for batch in batches:
        example_index.append(np.asarray(batch["example_index"]))
        word_index.append(np.asarray(batch["word_index"]))
    if not example_index:
        raise ValueError("batches is empty; pass the dataset whose logits these are")
    ids = word_predictions(logits, np.concatenate(example_index), np.concatenate(word_index),
                           [len(sentence.words) for sentence in sentences])
    labels = list(labels)
    return [[labels[i] for i in sentence_ids] for sentence_ids in ids]


def write_conll_predictions(path, sentences, predictions):
    """Write `word gold predicted` lines, a blank line between sentences, as `conlleval` reads.

    The file appears complete or not at all (a temporary name, then a rename).
    `predictions` holds one tag per word of each sentence.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev_predictions.txt")
    >>> sentences = [ConllSentence(("EU", "rejects"), ("B-ORG", "O"), "-", 1),
    ...              ConllSentence(("Peter",), ("B-PER",), "-", 4)]
    >>> _ = write_conll_predictions(path, sentences, [["B-ORG", "O"], ["O"]])
    >>> print(open(path).read(), end="")
    EU B-ORG B-ORG
    rejects O O
    <BLANKLINE>
    Peter B-PER O
    """
    sentences, predictions = list(sentences), list(predictions)
    if len(sentences) != len(predictions):
        raise ValueError(f"{len(sentences)} sentences but {len(predictions)} prediction lists")
    blocks = []
    for number, (sentence, predicted) in enumerate(zip(sentences, predictions)):
        if len(predicted) != len(sentence.words):
            raise ValueError(f"sentence {number} ({sentence.source} line {sentence.line}) has "
                             f"{len(sentence.words)} words but {len(predicted)} predicted tags")
        blocks.append("".join(f"{word} {gold} {tag}\n" for word, gold, tag
                              in zip(sentence.words, sentence.tags, predicted)))
    return write_atomically(path, "\n".join(blocks))


def _checked_labels(labels):
    labels = list(labels)
    if not labels:
        raise ValueError("labels is empty")
    bad = [label for label in labels if not isinstance(label, str) or not _TAG.match(label)]
    if bad:
        raise ValueError(f"labels {bad} are neither O nor B-, I-, E- or S- followed by a type")
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels {labels} name a tag twice")
    return labels


def _tag_ids(sentences, label_ids):
    """Every tag's label id, sentence after sentence; `TaskDataError` for a tag not in labels."""
    ids = []
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags):
            if tag not in label_ids:
                raise TaskDataError(f"{sentence.source} line {sentence.line + offset}: unknown "
                                    f"tag {tag!r}; the labels are {list(label_ids)}")
            ids.append(label_ids[tag])
    return ids
