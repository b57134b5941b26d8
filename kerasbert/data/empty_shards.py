"""What `kerasbert-create-pretraining-data` does with shards that get no instance.

A shard that gets no instance is held back (`not_empty` raises `EmptyShard` at its end, so
`write_tfrecord` leaves nothing). Once its other shards are done, a task that made at least one
instance writes the held-back shards empty, with a warning (its share of the corpus was too
small for that many shards); a task that made none fails with one line (`ShareCounts.error`):
the input files, the lines skipped, the documents read and those that gave no token, and no
shard or manifest is written. With several tasks (`--num_tasks`) each task is held to this on its
own share: it cannot know the other tasks' counts, and a process that made nothing does not
report success. A shard whose own files (sharding by file) give no document with a token fails
the same way at once.
"""


class EmptyShard(Exception):
    """A shard's records ran out before the first one (see `not_empty`)."""


def not_empty(batches):
    """The batches of records of one shard, then, if there was none, `EmptyShard`.

    >>> list(not_empty([[b"record"]]))
    [[b'record']]
    >>> list(not_empty([]))
    Traceback (most recent call last):
    ...
    kerasbert.data.empty_shards.EmptyShard
    """
    empty = True
    for batch in batches:
        empty = False
        yield batch
    if empty:
        raise EmptyShard()


_SHOWN_FILES = 3


def _files_text(files):
    shown = ", ".join(files[:_SHOWN_FILES])
    return shown + (f" and {len(files) - _SHOWN_FILES} more" if len(files) > _SHOWN_FILES else "")


class ShareCounts:
    """What shards read, from the `CorpusStats` counts before and after each (`add`):
    documents, documents without a single token and skipped lines, per copy of the corpus
    (`copies`, `--dupe_factor`). Sharding by window (fewer files than shards), every shard reads
    the whole corpus (its documents and lines are counted once) and tokenizes its own windows.

    >>> counts = ShareCounts(["corpus.txt"], copies=2, window_sharded=False)
    >>> counts.add({"documents": 0, "documents_without_tokens": 0, "skipped_lines": 0},
    ...            {"documents": 2, "documents_without_tokens": 2, "skipped_lines": 80}).has_text()
    False
    >>> print(counts.error("no instances for out.tfrecord"))  # doctest: +NORMALIZE_WHITESPACE
    no instances for out.tfrecord: the corpus file(s) corpus.txt gave no document with a token
    (1 documents read, 1 of them without a single token); 40 lines were skipped as not valid
    UTF-8 (or longer than 1 MiB). Is this a UTF-8 text corpus? Nothing was written
    """

    def __init__(self, files, copies=1, window_sharded=False):
        self.files, self.copies, self.window_sharded = list(files), copies, window_sharded
        self.documents = self.without_tokens = self.skipped_lines = 0

    def add(self, before, after, files=None):
        """Count one shard (`before`, `after`: `CorpusStats.as_dict()`); returns the shard's own
        counts (a `ShareCounts` of its `files`)."""
        shard = ShareCounts(files or self.files)
        shard.documents, shard.without_tokens, shard.skipped_lines = (
            (after[name] - before[name]) // self.copies
            for name in ("documents", "documents_without_tokens", "skipped_lines"))
        self.without_tokens += shard.without_tokens
        if self.window_sharded:
            self.documents, self.skipped_lines = shard.documents, shard.skipped_lines
        else:
            self.documents += shard.documents
            self.skipped_lines += shard.skipped_lines
        return shard

    def has_text(self):
        """Whether some document read gave a token."""
        return self.documents > self.without_tokens

    def error(self, subject, advice="use fewer --num_shards"):
        """The one-line message of `subject` (e.g. "no instances for <path>") having no
        instance: a corpus without text, or (with `advice`) a share too small for one."""
        skipped = (f"{self.skipped_lines} lines were skipped as not valid UTF-8 (or longer than "
                   "1 MiB)")
        if not self.has_text():
            return (f"{subject}: the corpus file(s) {_files_text(self.files)} gave no document "
                    f"with a token ({self.documents} documents read, {self.without_tokens} of "
                    f"them without a single token); {skipped}. Is this a UTF-8 text corpus? "
                    "Nothing was written")
        return (f"{subject}: the {self.documents} documents read from {_files_text(self.files)} "
                f"({self.without_tokens} of them without a single token; {skipped}) were too "
                f"few for one instance; {advice}. Nothing was written")
