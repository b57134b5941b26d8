"""Text files -> masked pretraining TFRecords, in shards that tasks anywhere can build
(`kerasbert-create-pretraining-data` calls `create_pretraining_data`).

The records have the feature names of Google's `create_pretraining_data.py`, so either side reads
the other's files. Output shards are written to a temporary name and renamed when complete; a
rerun with the same settings skips the shards that are complete and writes the rest identically.

Shard i is made from the files `files[i::num_shards]` when there are at least as many files as
shards (else from every num_shards-th window of documents), with seed `random_seed * 1009 + i`:
it depends on nothing else, so shards can be built anywhere. With `num_tasks=N, task_index=I`, N
processes (machines) share the work: task I builds the shards i with i % N == I, hence (with
enough files) reads its own disjoint share of the input files, and the union of all tasks'
shards is, file for file and byte for byte, what one process writes. `num_shards` must be at
least `num_tasks`.

When its shards are done, a task writes a manifest (`kerasbert.data.manifest`: shards with
instance counts, bytes and sha256; total instances; seed; flags), atomically and last. With one
task it is `<output_file>.manifest.json`. With N tasks, task I writes
`<output_file>.task-0000I-of-0000N.manifest.json` (so the tasks never overwrite each other's),
then, last, `<output_file>.manifest.json`: the union of the task manifests present,
`"complete": true` once all N are in. A rerun of a task whose manifest exists (same flags) does
nothing. Before its first shard a run writes the data set's intent, `<output_file>.intent.json`
(its flags and the corpus files they match; removed once the manifest says the data set is
complete): a rerun over an unfinished output with other flags or inputs is refused, naming each
difference, and changes nothing. A task that makes no instance at all (a corpus of binary
garbage, say) is an error naming the input files, the lines skipped and the documents that gave
no token, and writes no shard and no manifest; so is a shard whose own files give no document
with a token. A shard that gets too few documents for an instance, in a task that makes some, is
written empty, with a warning (`kerasbert.data.empty_shards`; with several tasks each task is
held to this on its own share).
"""

import dataclasses
import time
from typing import Optional

import keras
import tensorflow as tf

from kerasbert import file_system
from kerasbert.data.corpus import MAX_DOCUMENT_LINES, CorpusStats, corpus_files
from kerasbert.data.empty_shards import EmptyShard, ShareCounts, not_empty
from kerasbert.data.manifest import (combined_manifest, finish_intent, manifest_path,
                                     read_manifest, start_intent, task_manifest,
                                     task_manifest_path, write_manifest)
from kerasbert.data.pretraining import PretrainingDataConfig, instance_batches
from kerasbert.data.tfrecords import (completed_shards, serialize_instances, shard_paths,
                                      write_tfrecord)


@dataclasses.dataclass(frozen=True)
class DataCreationSettings:
    """What `create_pretraining_data` makes and how the work is split (see the module docstring).

    `input_files`: text files or globs (plain or gzip); `output_file`: the TFRecord file, or the
    stem of its shards `<stem>-00000-of-N<suffix>`; `data`: the instances and masking
    (`PretrainingDataConfig`; its batching fields are not used); `dupe_factor` copies of the data,
    each with its own instances and masks; `random_seed`; `num_shards`; `num_tasks` and
    `task_index` (this process's share); `compression` of the output (None or "GZIP");
    `recorded_flags`: what the manifest and the intent record as the data set's flags (the
    binary's flags but those that only split the work and `--output_file`). Checked on creation.

    >>> settings = DataCreationSettings(["corpus/*.txt"], "out/train.tfrecord", num_shards=4,
    ...                                 num_tasks=2, task_index=1)
    >>> [file_system.basename(path) for path in settings.own_shards()]
    ['train-00001-of-00004.tfrecord', 'train-00003-of-00004.tfrecord']
    >>> DataCreationSettings(["corpus/*.txt"], "out/train.tfrecord", num_tasks=2)
    Traceback (most recent call last):
    ...
    ValueError: --num_shards=1 must be at least --num_tasks=2: each task builds whole shards
    """

    input_files: list
    output_file: str
    data: PretrainingDataConfig = PretrainingDataConfig()
    dupe_factor: int = 10
    random_seed: int = 12345
    num_shards: int = 1
    num_tasks: int = 1
    task_index: int = 0
    compression: Optional[str] = None
    recorded_flags: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.task_index >= self.num_tasks:
            raise ValueError(f"--task_index must be from 0 to --num_tasks - 1 = "
                             f"{self.num_tasks - 1}, got {self.task_index}")
        if self.num_shards < self.num_tasks:
            raise ValueError(f"--num_shards={self.num_shards} must be at least --num_tasks="
                             f"{self.num_tasks}: each task builds whole shards")

    def shard_paths(self):
        """Every shard of the data set, this task's or not."""
        return shard_paths(self.output_file, self.num_shards)

    def own_shards(self):
        """The shards this task builds."""
        return self.shard_paths()[self.task_index::self.num_tasks]


def create_pretraining_data(settings, make_tokenizer):
    """Write this task's shards of the data set `settings` (a `DataCreationSettings`) describes,
    then its manifest (and, with several tasks, the data set's), printing progress and a summary.
    `make_tokenizer()` gives the tokenizer; it is called only when there is a shard to build."""
    started = time.time()
    paths = settings.shard_paths()
    own_manifest = task_manifest_path(settings.output_file, settings.task_index,
                                      settings.num_tasks)
    if _finished(settings, own_manifest):
        print(f"{own_manifest} lists this task's shards, all present; nothing to do")
        if settings.num_tasks == 1:
            finish_intent(settings.output_file)
        _write_combined_manifest(settings)
        return
    files = corpus_files(settings.input_files)
    if not files:
        raise ValueError(f"--input_file matched only empty files: {settings.input_files}")
    tokenizer = make_tokenizer()
    masker = settings.data.masker(tokenizer)
    done = completed_shards(paths)
    # Before the first shard: what this (unfinished) data set is made with, or a refusal to go on
    # with other flags than it was started with.
    new_data_set = start_intent(settings.output_file, settings.recorded_flags, files,
                                [path for path, complete in zip(paths, done) if complete])
    summary = _Summary(window_sharded=len(files) < len(paths))
    stats = CorpusStats()
    bar = keras.utils.Progbar(None, unit_name="instance", interval=1.0)
    share = ShareCounts(files, settings.dupe_factor, summary.window_sharded)
    held_back = []  # shards without instances: written (empty) only if the task makes some
    own = range(settings.task_index, len(paths), settings.num_tasks)
    try:
        for index in own:
            if done[index]:
                print(f"{paths[index]} is complete; skipped")
                continue
            batches = _shard_batches(settings, files, tokenizer, masker, index, stats)
            before = stats.as_dict()
            try:
                # The shard's temporary file exists from the start of its work (a kill leaves
                # only it).
                write_tfrecord(paths[index], not_empty(_records(batches, summary, bar)),
                               compression=settings.compression)
                summary.shards_built += 1
            except EmptyShard:
                held_back.append(index)
            shard = share.add(before, stats.as_dict(), _shard_files(files, index, len(paths))[0])
            if not summary.window_sharded and not shard.has_text():
                raise ValueError(shard.error(f"no instances for {paths[index]}"))
        print()
        if summary.instances == 0 and not any(done[index] for index in own):
            raise ValueError(share.error(_no_instances_subject(settings),
                                         _too_small_advice(settings)))
    except BaseException:
        if new_data_set and not any(completed_shards(paths)):
            finish_intent(settings.output_file)  # a failed new data set leaves nothing behind
        raise
    for index in held_back:
        print(f"warning: {paths[index]} holds no instances: its share of the corpus was too "
              f"small; use fewer --num_shards")
        write_tfrecord(paths[index], [], compression=settings.compression)
        summary.shards_built += 1
    shard_inputs = {paths[index]: _shard_files(files, index, len(paths))[0] for index in own}
    write_manifest(own_manifest, task_manifest(
        shard_inputs, settings.random_seed, settings.recorded_flags, settings.task_index,
        settings.num_tasks, settings.compression))
    print(f"wrote {own_manifest}")
    if settings.num_tasks == 1:
        finish_intent(settings.output_file)  # the manifest now says what the data set was made with
    _write_combined_manifest(settings)
    summary.print(settings, stats, time.time() - started)


def _finished(settings, own_manifest):
    """Whether this task's manifest exists, was made with these flags, and its shards are present."""
    if not file_system.exists(own_manifest):
        return False
    previous = read_manifest(own_manifest)
    flags_now = settings.recorded_flags
    changed = sorted(name for name in set(previous["flags"]) | set(flags_now)
                     if previous["flags"].get(name) != flags_now.get(name))
    if changed:
        raise ValueError(f"{own_manifest} was written with other values of --{', --'.join(changed)}; "
                         "give another --output_file or remove the old files first")
    return all(file_system.exists(path) for path in settings.own_shards())


def _write_combined_manifest(settings):
    """With several tasks: the data set's manifest, the union of the task manifests present (see
    the module docstring). Tasks finishing together may each write it; each checks after writing
    that no task manifest appeared meanwhile, and writes again if one did, so the last write has
    them all."""
    if settings.num_tasks == 1:
        return
    path = manifest_path(settings.output_file)
    while True:
        combined = combined_manifest(settings.output_file, settings.num_tasks)
        if not file_system.exists(path) or read_manifest(path) != combined:
            write_manifest(path, combined)
        if combined_manifest(settings.output_file, settings.num_tasks) == combined:
            break
    if combined["complete"]:
        finish_intent(settings.output_file)
    done = len(combined["task_indices"])
    print(f"wrote {path}: {done} of {settings.num_tasks} tasks done"
          + ("; the data set is complete" if combined["complete"] else ""))


def _no_instances_subject(settings):
    if settings.num_tasks == 1:
        return f"no instances for {settings.output_file}"
    return (f"no instances for task {settings.task_index} of {settings.num_tasks} of "
            f"{settings.output_file}")


def _too_small_advice(settings):
    if settings.num_tasks > 1:
        return "use fewer --num_shards or --num_tasks"
    if settings.num_shards > 1:
        return "use fewer --num_shards"
    return "give more text"


def _shard_files(files, index, count):
    """The files shard `index` of `count` reads, and the window sharding it needs (None: whole files)."""
    if len(files) >= count:
        return files[index::count], None
    return files, (index, count)


def _shard_batches(settings, files, tokenizer, masker, index, stats):
    """The serialized masked instances of shard `index` (and their totals), a batch per window:
    its own files if there are enough, otherwise every `num_shards`-th window, for each of the
    `dupe_factor` copies."""
    shard_files, shard = _shard_files(files, index, settings.num_shards)
    batches = instance_batches(shard_files, tokenizer, settings.data,
                               seed=settings.random_seed * 1009 + index,
                               copies=settings.dupe_factor, stats=stats, shard=shard)
    mask_seed = tf.constant([settings.random_seed, index], tf.int64)
    return batches.enumerate().map(
        tf.autograph.experimental.do_not_convert(lambda number, batch: _records_and_totals(masker(
            batch, tf.random.experimental.stateless_fold_in(mask_seed, number)))),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)


def _records_and_totals(batch):
    """A masked batch -> its serialized records and the totals the summary reports (in-graph)."""
    return {"records": serialize_instances(batch),
            "tokens": tf.reduce_sum(batch["padding_mask"]),
            "masked": tf.reduce_sum(tf.cast(batch["masked_lm_weights"] > 0, tf.int32)),
            "label_ones": tf.reduce_sum(batch["next_sentence_labels"])}


def _records(batches, summary, bar):
    for batch in batches:
        records = batch["records"].numpy()
        if not len(records):
            continue
        summary.add(len(records), **{name: int(batch[name]) for name in summary.totals})
        bar.add(len(records))
        yield records


class _Summary:
    """Totals of the instances written, for the closing report."""

    totals = ("tokens", "masked", "label_ones")

    def __init__(self, window_sharded):
        self.instances = self.tokens = self.masked = self.label_ones = 0
        self.window_sharded = window_sharded
        self.shards_built = 0

    def add(self, instances, tokens, masked, label_ones):
        self.instances += instances
        self.tokens += tokens
        self.masked += masked
        self.label_ones += label_ones

    def print(self, settings, stats, seconds):
        counts = stats.as_dict()
        copies = settings.dupe_factor
        rate = self.instances / seconds if seconds else 0.0
        # Each copy reads the corpus again (and, sharded by window, each shard reads it all).
        reads = copies * (max(self.shards_built, 1) if self.window_sharded else 1)
        print(f"documents: {counts['documents'] // reads:,} ({counts['sentences'] // reads:,} "
              f"sentences, {counts['skipped_lines'] // reads:,} lines skipped, "
              f"{counts['split_documents'] // reads:,} longer than {MAX_DOCUMENT_LINES:,} lines "
              f"split) x {copies} copies")
        print(f"instances: {self.instances:,}  tokens: {self.tokens:,}  "
              f"masked: {self.masked:,} ({self.masked / max(self.tokens, 1):.2%} of tokens)")
        objective = settings.data.objective
        if objective in ("nsp", "sop"):
            name = "random next" if objective == "nsp" else "swapped"
            print(f"labels: {self.label_ones / max(self.instances, 1):.2%} {name} (label 1)")
        print(f"seconds: {seconds:.1f}  ({rate:,.0f} instances/s)")
