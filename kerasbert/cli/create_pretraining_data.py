"""`kerasbert-create-pretraining-data`: text files -> masked pretraining TFRecords.

Flags are named like Google's `create_pretraining_data.py`; the records have
its feature names, so either side reads the other's files. Output shards are
written to a temporary name and renamed when complete; a rerun with the same
flags skips the shards that are complete and writes the rest identically.

Shard i is made from the files `files[i::num_shards]` when there are at least
as many files as shards (else from every num_shards-th window of documents),
with seed `random_seed * 1009 + i`: it depends on nothing else, so shards can
be built anywhere. With `--num_tasks=N --task_index=I`, N processes (machines)
share the work: task I builds the shards i with i % N == I, hence (with enough
files) reads its own disjoint share of the input files, and the union of all
tasks' shards is, file for file and byte for byte, what one process writes.
`--num_shards` must be at least `--num_tasks`.

When its shards are done, a task writes a manifest (`kerasbert.data.manifest`:
shards with instance counts, bytes and sha256; total instances; seed; flags),
atomically and last. With one task it is `<output_file>.manifest.json`. With N
tasks, task I writes `<output_file>.task-0000I-of-0000N.manifest.json` (so the
tasks never overwrite each other's), then, last, `<output_file>.manifest.json`:
the union of the task manifests present, `"complete": true` once all N are in.
A rerun of a task whose manifest exists (same
flags) does nothing. Before its first shard a run writes the data set's intent,
`<output_file>.intent.json` (its flags and the corpus files they match; removed once the
manifest says the data set is complete): a rerun over an unfinished output with other flags or
inputs is refused, naming each difference, and changes nothing. A task that makes no instance
at all (a corpus of binary garbage, say) is an error naming the input files, the lines skipped
and the documents that gave no token, and writes no shard and no manifest; so is a shard whose
own files give no document with a token. A shard that gets too few documents for an instance,
in a task that makes some, is written empty, with a warning (`kerasbert.data.empty_shards`;
with several tasks each task is held to this on its own share).

    kerasbert-create-pretraining-data --input_file='corpus/*.txt' \\
        --output_file=out/train.tfrecord --vocab_file=vocab.txt --do_lower_case \\
        --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=5 --num_shards=8
"""

import time

from absl import app, flags

from kerasbert import file_system
from kerasbert.choices import BAD_LINE_POLICIES
from kerasbert.choices import CORPUS_FORMATS as FORMATS
from kerasbert.cli import instance_flags  # noqa: F401  (defines --objective, ...)
from kerasbert.cli.data_flags import tokenizer_from_flags
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_list("input_file", None, "Input text files or globs (plain or gzip), comma-separated.",
                  required=True)
flags.DEFINE_string("output_file", None, "Output TFRecord file; with --num_shards > 1, shards "
                    "named <stem>-00000-of-N<suffix>.", required=True)
flags.DEFINE_integer("dupe_factor", 10, "Copies of the data, each with its own instances and masks.",
                     lower_bound=1)
flags.DEFINE_float("short_seq_prob", 0.1, "Chance of a shorter target length (nsp, sop).",
                   lower_bound=0.0, upper_bound=1.0)
flags.DEFINE_boolean("do_whole_word_mask", False, "Mask whole words only.")
flags.DEFINE_integer("ngram", 1, "Longest n-gram to mask (ALBERT: 3; implies whole words).",
                     lower_bound=1)
flags.DEFINE_integer("random_seed", 12345, "Seed of every random choice.")
flags.DEFINE_integer("num_shards", 1, "Output files.", lower_bound=1)
flags.DEFINE_integer("num_tasks", 1, "Processes sharing the work (at most --num_shards); each "
                     "builds the shards i with i % num_tasks == task_index.", lower_bound=1)
flags.DEFINE_integer("task_index", 0, "This process's task, 0 to --num_tasks - 1.", lower_bound=0)
flags.DEFINE_enum("compression", "none", ["none", "gzip"], "Compression of the output files.")
flags.DEFINE_enum("input_format", "documents", FORMATS, "documents: one sentence per line, blank "
                  "lines between documents; paragraphs: one document per line.")
flags.DEFINE_enum("bad_lines", "skip", BAD_LINE_POLICIES, "Lines that are not UTF-8 or too long: "
                  "skip and count, or fail naming file and line.")
flags.DEFINE_integer("window_size", 64, "Documents processed together (random next sentences "
                     "come from the same window).", lower_bound=2)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if FLAGS.task_index >= FLAGS.num_tasks:
        raise ValueError(f"--task_index must be from 0 to --num_tasks - 1 = {FLAGS.num_tasks - 1}, "
                         f"got {FLAGS.task_index}")
    if FLAGS.num_shards < FLAGS.num_tasks:
        raise ValueError(f"--num_shards={FLAGS.num_shards} must be at least --num_tasks="
                         f"{FLAGS.num_tasks}: each task builds whole shards")
    import keras

    from kerasbert.data.corpus import CorpusStats, corpus_files
    from kerasbert.data.empty_shards import EmptyShard, ShareCounts, not_empty
    from kerasbert.data.manifest import (finish_intent, start_intent, task_manifest,
                                         task_manifest_path, write_manifest)
    from kerasbert.data.masking import MaskedLmMasker
    from kerasbert.data.tfrecords import completed_shards, shard_paths, write_tfrecord

    started = time.time()
    paths = shard_paths(FLAGS.output_file, FLAGS.num_shards)
    own_manifest = task_manifest_path(FLAGS.output_file, FLAGS.task_index, FLAGS.num_tasks)
    if _finished(own_manifest, paths[FLAGS.task_index::FLAGS.num_tasks]):
        print(f"{own_manifest} lists this task's shards, all present; nothing to do")
        if FLAGS.num_tasks == 1:
            finish_intent(FLAGS.output_file)
        _write_combined_manifest()
        return
    files = corpus_files(FLAGS.input_file)
    if not files:
        raise ValueError(f"--input_file matched only empty files: {FLAGS.input_file}")
    tokenizer = tokenizer_from_flags("--input_file")
    masker = MaskedLmMasker.for_tokenizer(
        tokenizer, masked_lm_prob=FLAGS.masked_lm_prob,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        whole_word=FLAGS.do_whole_word_mask or FLAGS.ngram > 1, max_ngram=FLAGS.ngram)
    done = completed_shards(paths)
    # Before the first shard: what this (unfinished) data set is made with, or a refusal to go on
    # with other flags than it was started with.
    new_data_set = start_intent(FLAGS.output_file, _manifest_flags(), files,
                                [path for path, complete in zip(paths, done) if complete])
    summary = Summary()
    summary.window_sharded = len(files) < len(paths)
    stats = CorpusStats()
    bar = keras.utils.Progbar(None, unit_name="instance", interval=1.0)
    share = ShareCounts(files, FLAGS.dupe_factor, summary.window_sharded)
    held_back = []  # shards without instances: written (empty) only if the task makes some
    own = range(FLAGS.task_index, len(paths), FLAGS.num_tasks)
    try:
        for index in own:
            if done[index]:
                print(f"{paths[index]} is complete; skipped")
                continue
            batches = _shard_batches(files, tokenizer, masker, index, len(paths), stats)
            before = stats.as_dict()
            try:
                # The shard's temporary file exists from the start of its work (a kill leaves
                # only it).
                write_tfrecord(paths[index], not_empty(_records(batches, summary, bar)),
                               compression=_compression())
                summary.shards_built += 1
            except EmptyShard:
                held_back.append(index)
            shard = share.add(before, stats.as_dict(), _shard_files(files, index, len(paths))[0])
            if not summary.window_sharded and not shard.has_text():
                raise ValueError(shard.error(f"no instances for {paths[index]}"))
        print()
        if summary.instances == 0 and not any(done[index] for index in own):
            raise ValueError(share.error(_no_instances_subject(), _too_small_advice()))
    except BaseException:
        if new_data_set and not any(completed_shards(paths)):
            finish_intent(FLAGS.output_file)  # a failed new data set leaves nothing behind
        raise
    for index in held_back:
        print(f"warning: {paths[index]} holds no instances: its share of the corpus was too "
              f"small; use fewer --num_shards")
        write_tfrecord(paths[index], [], compression=_compression())
        summary.shards_built += 1
    shard_inputs = {paths[index]: _shard_files(files, index, len(paths))[0]
                    for index in range(FLAGS.task_index, len(paths), FLAGS.num_tasks)}
    write_manifest(own_manifest, task_manifest(shard_inputs, FLAGS.random_seed, _manifest_flags(),
                                               FLAGS.task_index, FLAGS.num_tasks, _compression()))
    print(f"wrote {own_manifest}")
    if FLAGS.num_tasks == 1:
        finish_intent(FLAGS.output_file)  # the manifest now says what the data set was made with
    _write_combined_manifest()
    summary.print(stats, time.time() - started)


def _compression():
    return None if FLAGS.compression == "none" else "GZIP"


def _manifest_flags():
    """The flags the records depend on, for the manifest: all of this binary's but the two that
    only split the work (the manifest has them apart) and --output_file (the manifest lies beside
    it and names the shards relative to it, so a data set can move)."""
    modules = {FLAGS.find_module_defining_flag(name)
               for name in ("input_file", "objective", "vocab_file")}
    return {flag.name: flag.value for module in sorted(modules)
            for flag in FLAGS.get_flags_for_module(module)
            if flag.name not in ("num_tasks", "task_index", "output_file")}


def _finished(own_manifest, own_paths):
    """Whether this task's manifest exists, was made with these flags, and its shards are present."""
    from kerasbert.data.manifest import read_manifest

    if not file_system.exists(own_manifest):
        return False
    previous = read_manifest(own_manifest)
    flags_now = _manifest_flags()
    changed = sorted(name for name in set(previous["flags"]) | set(flags_now)
                     if previous["flags"].get(name) != flags_now.get(name))
    if changed:
        raise ValueError(f"{own_manifest} was written with other values of --{', --'.join(changed)}; "
                         "give another --output_file or remove the old files first")
    return all(file_system.exists(path) for path in own_paths)


def _write_combined_manifest():
    """With several tasks: the data set's manifest, the union of the task manifests present (see
    the docstring). Tasks finishing together may each write it; each checks after writing that no
    task manifest appeared meanwhile, and writes again if one did, so the last write has them all."""
    from kerasbert.data.manifest import (combined_manifest, finish_intent, manifest_path,
                                         read_manifest, write_manifest)

    if FLAGS.num_tasks == 1:
        return
    path = manifest_path(FLAGS.output_file)
    while True:
        combined = combined_manifest(FLAGS.output_file, FLAGS.num_tasks)
        if not file_system.exists(path) or read_manifest(path) != combined:
            write_manifest(path, combined)
        if combined_manifest(FLAGS.output_file, FLAGS.num_tasks) == combined:
            break
    if combined["complete"]:
        finish_intent(FLAGS.output_file)
    done = len(combined["task_indices"])
    print(f"wrote {path}: {done} of {FLAGS.num_tasks} tasks done"
          + ("; the data set is complete" if combined["complete"] else ""))


def _no_instances_subject():
    if FLAGS.num_tasks == 1:
        return f"no instances for {FLAGS.output_file}"
    return (f"no instances for task {FLAGS.task_index} of {FLAGS.num_tasks} of "
            f"{FLAGS.output_file}")


def _too_small_advice():
    if FLAGS.num_tasks > 1:
        return "use fewer --num_shards or --num_tasks"
    if FLAGS.num_shards > 1:
        return "use fewer --num_shards"
    return "give more text"


def _shard_files(files, index, count):
    """The files shard `index` of `count` reads, and the window sharding it needs (None: whole files)."""
    if len(files) >= count:
        return files[index::count], None
    return files, (index, count)


def _shard_batches(files, tokenizer, masker, index, count, stats):
    """The serialized masked instances of shard `index` (and their totals), a batch per window:
    its own files if there are enough, otherwise every `count`-th window, for each of the
    `dupe_factor` copies."""
    import tensorflow as tf

    from kerasbert.data.pretraining import PretrainingDataConfig, instance_batches

    shard_files, shard = _shard_files(files, index, count)
    batches = instance_batches(
        shard_files, tokenizer, PretrainingDataConfig(
            FLAGS.objective, FLAGS.max_seq_length, short_seq_prob=FLAGS.short_seq_prob,
            window_size=FLAGS.window_size, format=FLAGS.input_format, bad_lines=FLAGS.bad_lines),
        seed=FLAGS.random_seed * 1009 + index, copies=FLAGS.dupe_factor, stats=stats, shard=shard)
    mask_seed = tf.constant([FLAGS.random_seed, index], tf.int64)
    return batches.enumerate().map(
        tf.autograph.experimental.do_not_convert(lambda number, batch: _records_and_totals(masker(
            batch, tf.random.experimental.stateless_fold_in(mask_seed, number)))),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)


def _records_and_totals(batch):
    """A masked batch -> its serialized records and the totals the summary reports (in-graph)."""
    import tensorflow as tf

    from kerasbert.data.tfrecords import serialize_instances

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


class Summary:
    """Totals of the instances written, for the closing report."""

    def __init__(self):
        self.instances = self.tokens = self.masked = self.label_ones = 0
        self.window_sharded = False
        self.shards_built = 0

    totals = ("tokens", "masked", "label_ones")

    def add(self, instances, tokens, masked, label_ones):
        self.instances += instances
        self.tokens += tokens
        self.masked += masked
        self.label_ones += label_ones

    def print(self, stats, seconds):
        from kerasbert.data.corpus import MAX_DOCUMENT_LINES

        counts = stats.as_dict()
        copies = FLAGS.dupe_factor
        rate = self.instances / seconds if seconds else 0.0
        # Each copy reads the corpus again (and, sharded by window, each shard reads it all).
        reads = copies * (max(self.shards_built, 1) if self.window_sharded else 1)
        print(f"documents: {counts['documents'] // reads:,} ({counts['sentences'] // reads:,} "
              f"sentences, {counts['skipped_lines'] // reads:,} lines skipped, "
              f"{counts['split_documents'] // reads:,} longer than {MAX_DOCUMENT_LINES:,} lines "
              f"split) x {copies} copies")
        print(f"instances: {self.instances:,}  tokens: {self.tokens:,}  "
              f"masked: {self.masked:,} ({self.masked / max(self.tokens, 1):.2%} of tokens)")
        if FLAGS.objective in ("nsp", "sop"):
            name = "random next" if FLAGS.objective == "nsp" else "swapped"
            print(f"labels: {self.label_ones / max(self.instances, 1):.2%} {name} (label 1)")
        print(f"seconds: {seconds:.1f}  ({rate:,.0f} instances/s)")


def run():
    run_reporting_errors(main, "kerasbert-create-pretraining-data")


if __name__ == "__main__":
    run()
