"""Stream the documents of a text corpus: a `tf.data.Dataset` of each document's sentences.

Two formats:

- `"documents"`: one sentence per line, a blank line between documents (the
  format of Google's `create_pretraining_data.py` and of the shipped corpus).
- `"paragraphs"`: one paragraph per line, each a document; sentences are cut
  by `kerasbert.data.sentence_split.split_sentences`.

Policy for bad input: empty documents (several blank lines in a row) and
empty files give nothing; a line that is not valid UTF-8, or longer than
`max_line_bytes`, is skipped and counted (`bad_lines="skip"`) or stops the
run with an error that names the file and the line (`bad_lines="fail"`).
A "documents" document longer than `max_document_lines` lines (default
`MAX_DOCUMENT_LINES`; a file without blank lines, say) is cut into documents
of that many lines (the last one shorter), counted as split in `CorpusStats`.
Files are plain or gzip (detected from their first bytes), local or on any of TensorFlow's file
systems (`kerasbert.file_system`).
"""

import os

import tensorflow as tf

from kerasbert import file_system
from kerasbert.data.sentence_split import split_sentences
from kerasbert.tokenizers.text_files import is_gzip

from kerasbert.choices import BAD_LINE_POLICIES
from kerasbert.choices import CORPUS_FORMATS as FORMATS

# Lines read and grouped into documents at a time.
_CHUNK_LINES = 1024
# Put after a file's last line (lines that are not UTF-8 never reach that far).
_FILE_END = b"\xff"
# The longest "documents" document, in lines (sentences). About twice the sentences of a long
# novel as one document (War and Peace: some 590,000 words, at most about 30,000 sentences) and
# far more than a Wikipedia article has (hundreds, a few thousand at most): no real document is
# cut, while a file without blank lines is read as documents of this many lines instead of one
# that grows without bound. A cut moves at most one instance boundary (an instance takes
# consecutive sentences up to `max_seq_length` tokens, a few dozen lines).
MAX_DOCUMENT_LINES = 1 << 16


class CorpusStats:
    """Counts kept while a corpus is read: documents, sentences, skipped lines, the documents
    longer than `MAX_DOCUMENT_LINES` that were cut (each counted once; its pieces count as
    documents), and (counted by `kerasbert.data.pretraining.instance_batches` when it
    tokenizes them) the documents whose text gives not one token (control characters, say).

    The counters are `tf.Variable`s that the `tf.data` pipeline adds to, so
    they are correct once the dataset has been iterated (in any order).

    >>> stats = CorpusStats()
    >>> stats.as_dict()  # doctest: +NORMALIZE_WHITESPACE
    {'documents': 0, 'sentences': 0, 'skipped_lines': 0, 'documents_without_tokens': 0,
     'split_documents': 0}
    """

    names = ("documents", "sentences", "skipped_lines", "documents_without_tokens",
             "split_documents")

    def __init__(self):
        self._counters = {name: tf.Variable(0, dtype=tf.int64, trainable=False, name=name)
                          for name in self.names}

    def add(self, name, amount):
        """An op that adds `amount` to counter `name`."""
        return self._counters[name].assign_add(tf.cast(amount, tf.int64))

    def as_dict(self):
        return {name: int(counter.numpy()) for name, counter in self._counters.items()}


def corpus_files(file_patterns):
    """The sorted files that `file_patterns` (a glob, a path or a list of them) match.

    Empty files are left out. A pattern that matches nothing raises
    `FileNotFoundError` naming it.

    >>> import kerasbert.data.demo
    >>> len(corpus_files(kerasbert.data.demo.pretraining_corpus_files()))
    4
    """
    if isinstance(file_patterns, (str, os.PathLike)):
        file_patterns = [file_patterns]
    if not file_patterns:
        raise ValueError("No corpus files given")
    files = set()
    for pattern in file_patterns:
        pattern = os.fspath(pattern)
        matched = file_system.glob(pattern)
        if not matched:
            raise FileNotFoundError(f"No corpus file matches {pattern!r}")
        directories = [path for path in matched if file_system.isdir(path)]
        if directories:
            raise IsADirectoryError(f"Corpus pattern {pattern!r} matches directory "
                                    f"{directories[0]!r}; give the files (e.g. {directories[0]}/*)")
        files.update(matched)
    return sorted(path for path in files if file_system.getsize(path) > 0)


def document_dataset(file_patterns, **kwargs):
    """The documents of the corpus, in file order: tf.string `[sentences]` each.

    Takes the arguments of `document_windows` but `window_size`.

    >>> import kerasbert.data.demo
    >>> documents = document_dataset(kerasbert.data.demo.pretraining_corpus_files())
    >>> first = next(iter(documents))
    >>> first.dtype, first.shape.rank
    (tf.string, 1)
    """
    return document_windows(file_patterns, **kwargs).unbatch()


def document_windows(file_patterns, window_size=64, format="documents", bad_lines="skip",
                     max_line_bytes=1 << 20, stats=None, input_context=None,
                     num_parallel_files=4, max_document_lines=MAX_DOCUMENT_LINES):
    """The documents of the corpus in groups ("windows") of about `window_size`.

    Each element is a ragged tf.string `[documents, sentences]` holding at
    least `window_size` documents (fewer at the end of a file) and at most
    those that end in the same 1,024 lines. Documents stay in file order.

    Args:
        file_patterns: a glob, a path, or a list of them (plain or gzip text).
        window_size: documents per window (at least).
        format: `"documents"` or `"paragraphs"` (see the module docstring).
        bad_lines: `"skip"` (and count) or `"fail"` for lines that are not
            UTF-8 or are longer than `max_line_bytes`.
        stats: a `CorpusStats` to count documents, sentences and skipped lines in
            (None: no counting, which keeps the pipeline free of stateful ops so
            its iterators can be checkpointed).
        input_context: a `tf.distribute.InputContext`: with at least as many
            files as input pipelines, each pipeline reads its own files.
        num_parallel_files: files read at once (their windows alternate).
        max_document_lines: the longest `"documents"` document; longer ones are cut into
            documents of this many lines (see `MAX_DOCUMENT_LINES`).

    >>> import kerasbert.data.demo
    >>> windows = document_windows(kerasbert.data.demo.pretraining_corpus_files(), 16)
    >>> first = next(iter(windows))
    >>> first.shape[0] >= 16, first.dtype
    (True, tf.string)
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if bad_lines not in BAD_LINE_POLICIES:
        raise ValueError(f"bad_lines must be one of {BAD_LINE_POLICIES}, got {bad_lines!r}")
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
    if window_size < 1:
        raise ValueError(f"window_size must be positive, got {window_size}")
    if max_document_lines < 1:
        raise ValueError(f"max_document_lines must be positive, got {max_document_lines}")
    files = corpus_files(file_patterns)
    if not files:
        raise ValueError(f"The corpus files {file_patterns} are all empty")
    if input_context is not None and len(files) >= input_context.num_input_pipelines:
        files = files[input_context.input_pipeline_id::input_context.num_input_pipelines]
    gzip_files = tf.constant([is_gzip(path) for path in files], tf.bool, shape=[len(files)])

    # Plain TensorFlow code: converting it with AutoGraph would only cost start-up time.
    @tf.autograph.experimental.do_not_convert
    def read(path, gzipped):
        lines = tf.data.TextLineDataset(path, compression_type=tf.where(gzipped, "GZIP", ""))
        if format == "paragraphs":
            chunks = lines.enumerate(start=1).batch(window_size)
            chunks = chunks.map(lambda numbers, text: _checked_lines(
                path, numbers, text, bad_lines, max_line_bytes, stats))
            return chunks.map(lambda text: _paragraph_documents(text, stats)).filter(
                lambda documents: documents.nrows() > 0)
        chunks = lines.enumerate(start=1).batch(_CHUNK_LINES)
        chunks = chunks.map(lambda numbers, text: _checked_lines(
            path, numbers, text, bad_lines, max_line_bytes, stats))
        # The end of the file ends its last document and window.
        chunks = chunks.concatenate(tf.data.Dataset.from_tensors(tf.constant([_FILE_END])))
        grouped = chunks.scan(_nothing_waiting(), lambda waiting, text: _group_documents(
            waiting, text, window_size, max_document_lines))
        windows = grouped.map(lambda values, lengths, split: _kept_documents(
            values, lengths, split, stats))
        return windows.filter(lambda documents: documents.nrows() > 0)

    sources = tf.data.Dataset.from_tensor_slices(
        (tf.constant(files, tf.string, shape=[len(files)]), gzip_files))
    return sources.interleave(read, cycle_length=max(1, min(num_parallel_files, len(files))),
                              block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
                              deterministic=True)


def _checked_lines(path, numbers, lines, bad_lines, max_line_bytes, stats):
    """`lines` without (or, with `bad_lines="fail"`, an error for) invalid or over-long ones."""
    valid = tf.equal(tf.strings.unicode_transcode(
        lines, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD), lines)
    short = tf.strings.length(lines) <= max_line_bytes
    good = valid & short
    if bad_lines == "fail":
        first_bad = tf.argmin(tf.cast(good, tf.int32))
        check = tf.debugging.Assert(tf.reduce_all(good), [
            "Corpus file", path, "line", tf.gather(numbers, first_bad),
            "is not valid UTF-8 or is longer than", max_line_bytes, "bytes"], summarize=1)
        with tf.control_dependencies([check]):
            return tf.identity(lines)
    if stats is None:
        return tf.boolean_mask(lines, good)
    counted = stats.add("skipped_lines", tf.reduce_sum(1 - tf.cast(good, tf.int32)))
    with tf.control_dependencies([counted]):
        return tf.boolean_mask(lines, good)


def _nothing_waiting():
    """The state of `_group_documents` at the start of a file."""
    return (tf.TensorArray(tf.string, size=0, dynamic_size=True, infer_shape=False,
                           element_shape=[None]),
            tf.zeros([0], tf.int64), tf.constant(0, tf.int64))


def _group_documents(waiting, lines, window_size, max_document_lines):
    """scan step: (lines waiting, next lines) -> (lines waiting, (the sentences of the documents
    given out, their lengths, documents cut here)).

    A document ends at a blank line, and after `max_document_lines` lines (the run of lines
    goes on as a new document; its first cut counts the document as split). Finished documents
    are given out once there are `window_size` of them, or at the end of the file; until then
    they wait. The state holds the waiting lines as a `tf.TensorArray` of the chunks' text lines
    (appended to, joined once per window, so reading stays linear in the lines however long
    a document is), the lengths of the finished documents waiting, and how many text lines
    the run since the last blank line has so far.
    """
    chunks, finished, run_lines = waiting
    file_end = tf.reduce_any(tf.equal(lines, _FILE_END))
    blank = tf.equal(tf.strings.length(tf.strings.strip(lines)), 0) | tf.equal(lines, _FILE_END)
    text = tf.boolean_mask(lines, ~blank)
    positions = tf.range(tf.size(lines, tf.int64))
    # Each text line's place in its run (1 = first): the run carried in goes on until the
    # chunk's first blank line.
    blanks_before = tf.boolean_mask(tf.cumsum(tf.cast(blank, tf.int64)), ~blank)
    index = tf.range(tf.size(text, tf.int64))
    run_start = tf.gather(tf.math.segment_min(index, blanks_before), blanks_before)
    place = index - run_start + 1 + tf.where(blanks_before == 0, run_lines, 0)
    starts_document = tf.math.floormod(place - 1, max_document_lines) == 0
    split = tf.reduce_sum(tf.cast(place == max_document_lines + 1, tf.int64))
    # Document 0 is the one carried in (its lines waiting already), 1, 2, ... start here.
    document = tf.cumsum(tf.cast(starts_document, tf.int32))
    lengths = tf.math.bincount(document, minlength=1, dtype=tf.int64)
    lengths = tf.tensor_scatter_nd_add(
        lengths, [[0]], [tf.math.floormod(run_lines, max_document_lines)])
    last_blank = tf.reduce_max(tf.where(blank, positions, -1))
    run_lines = tf.where(last_blank >= 0,
                         tf.reduce_sum(tf.cast(~blank & (positions > last_blank), tf.int64)),
                         run_lines + tf.size(text, tf.int64))
    open_lines = tf.math.floormod(run_lines, max_document_lines)
    done = lengths[:tf.size(lengths) - tf.cast(open_lines > 0, tf.int32)]
    finished = tf.concat([finished, tf.boolean_mask(done, done > 0)], 0)
    chunks = chunks.write(chunks.size(), text)

    def give_out():
        waiting_lines = chunks.concat()
        given = tf.reduce_sum(finished)
        rest = _nothing_waiting()[0].write(0, waiting_lines[given:])
        return (rest, tf.zeros([0], tf.int64)), (waiting_lines[:given], finished)

    def keep():
        return (chunks, finished), (tf.constant([], tf.string), tf.zeros([0], tf.int64))

    (chunks, finished), (sentences, given_lengths) = tf.cond(
        file_end | (tf.size(finished) >= window_size), give_out, keep)
    return (chunks, finished, run_lines), (sentences, given_lengths, split)


def _kept_documents(sentences, lengths, split, stats):
    """Ragged `[documents, sentences]`, counted in `stats` (with the documents `split`)."""
    documents = tf.RaggedTensor.from_row_lengths(sentences, lengths)
    if stats is None:
        return documents
    with tf.control_dependencies([stats.add("split_documents", split)]):
        return _counted(documents, stats)


def _paragraph_documents(lines, stats):
    """Each non-blank line a document, cut into sentences."""
    lines = tf.boolean_mask(lines, tf.strings.length(tf.strings.strip(lines)) > 0)
    return _counted(split_sentences(lines), stats)


def _counted(documents, stats):
    """`documents` (ragged `[documents, sentences]`), once counted in `stats` (if any)."""
    if stats is None:
        return documents
    with tf.control_dependencies([stats.add("documents", documents.nrows()),
                                  stats.add("sentences", tf.size(documents.flat_values))]):
        return documents.with_flat_values(tf.identity(documents.flat_values))
