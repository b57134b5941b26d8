"""`kerasbert-create-pretraining-data`: text files -> masked pretraining TFRecords.

Flags are named like Google's `create_pretraining_data.py`; the records have
its feature names, so either side reads the other's files. Output shards are
written to a temporary name and renamed when complete; a rerun with the same
flags skips the shards that are complete and writes the rest identically.

    kerasbert-create-pretraining-data --input_file='corpus/*.txt' \\
        --output_file=out/train.tfrecord --vocab_file=vocab.txt --do_lower_case \\
        --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=5 --num_shards=8
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from kerasbert.data.corpus import BAD_LINE_POLICIES, FORMATS, CorpusStats, corpus_files  # noqa: E402
from kerasbert.data.masking import MaskedLmMasker  # noqa: E402
from kerasbert.data.pretraining import instance_batches  # noqa: E402
from kerasbert.data.tfrecords import (completed_shards, serialize_instances, shard_paths,  # noqa: E402
                                      write_tfrecord)
from kerasbert.cli import instance_flags  # noqa: E402,F401  (defines --objective, ...)
from kerasbert.cli.data_flags import tokenizer_from_flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("input_file", None, "Input text files or globs (plain or gzip), comma-separated.",
                  required=True)
flags.DEFINE_string("output_file", None, "Output TFRecord file; with --num_shards > 1, shards "
                    "named <stem>-00000-of-N<suffix>.", required=True)
flags.DEFINE_integer("dupe_factor", 10, "Copies of the data, each with its own instances and masks.")
flags.DEFINE_float("short_seq_prob", 0.1, "Chance of a shorter target length (nsp, sop).")
flags.DEFINE_boolean("do_whole_word_mask", False, "Mask whole words only.")
flags.DEFINE_integer("ngram", 1, "Longest n-gram to mask (ALBERT: 3; implies whole words).")
flags.DEFINE_integer("random_seed", 12345, "Seed of every random choice.")
flags.DEFINE_integer("num_shards", 1, "Output files.")
flags.DEFINE_enum("compression", "none", ["none", "gzip"], "Compression of the output files.")
flags.DEFINE_enum("input_format", "documents", FORMATS, "documents: one sentence per line, blank "
                  "lines between documents; paragraphs: one document per line.")
flags.DEFINE_enum("bad_lines", "skip", BAD_LINE_POLICIES, "Lines that are not UTF-8 or too long: "
                  "skip and count, or fail naming file and line.")
flags.DEFINE_integer("window_size", 64, "Documents processed together (random next sentences "
                     "come from the same window).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if FLAGS.num_shards < 1 or FLAGS.dupe_factor < 1:
        raise app.UsageError("--num_shards and --dupe_factor must be at least 1")
    started = time.time()
    files = corpus_files(FLAGS.input_file)
    if not files:
        raise app.UsageError(f"--input_file matched only empty files: {FLAGS.input_file}")
    tokenizer = tokenizer_from_flags("--input_file")
    masker = MaskedLmMasker.for_tokenizer(
        tokenizer, masked_lm_prob=FLAGS.masked_lm_prob,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        whole_word=FLAGS.do_whole_word_mask or FLAGS.ngram > 1, max_ngram=FLAGS.ngram)
    paths = shard_paths(FLAGS.output_file, FLAGS.num_shards)
    done = completed_shards(paths)
    summary = Summary()
    summary.window_sharded = len(files) < len(paths)
    stats = CorpusStats()
    bar = keras.utils.Progbar(None, unit_name="instance", interval=1.0)
    for index, path in enumerate(paths):
        if done[index]:
            print(f"{path} is complete; skipped")
            continue
        batches = _shard_batches(files, tokenizer, masker, index, len(paths), stats)
        write_tfrecord(path, _records(batches, summary, bar),
                       compression=None if FLAGS.compression == "none" else "GZIP")
    print()
    summary.print(stats, time.time() - started)


def _shard_batches(files, tokenizer, masker, index, count, stats):
    """The serialized masked instances of shard `index` (and their totals), a batch per window:
    its own files if there are enough, otherwise every `count`-th window, for each of the
    `dupe_factor` copies."""
    shard_files, shard = files, (index, count)
    if len(files) >= count:
        shard_files, shard = files[index::count], None
    batches = instance_batches(
        shard_files, tokenizer, FLAGS.objective, FLAGS.max_seq_length,
        short_seq_prob=FLAGS.short_seq_prob, seed=FLAGS.random_seed * 1009 + index,
        copies=FLAGS.dupe_factor, window_size=FLAGS.window_size, format=FLAGS.input_format,
        bad_lines=FLAGS.bad_lines, stats=stats, shard=shard)
    mask_seed = tf.constant([FLAGS.random_seed, index], tf.int64)
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
        summary.add(len(records), **{name: int(batch[name]) for name in summary.totals})
        bar.add(len(records))
        yield records


class Summary:
    """Totals of the instances written, for the closing report."""

    def __init__(self):
        self.instances = self.tokens = self.masked = self.label_ones = 0
        self.window_sharded = False

    totals = ("tokens", "masked", "label_ones")

    def add(self, instances, tokens, masked, label_ones):
        self.instances += instances
        self.tokens += tokens
        self.masked += masked
        self.label_ones += label_ones

    def print(self, stats, seconds):
        counts = stats.as_dict()
        copies = FLAGS.dupe_factor
        rate = self.instances / seconds if seconds else 0.0
        # Each copy reads the corpus again (and, sharded by window, each shard reads it all).
        reads = copies * (FLAGS.num_shards if self.window_sharded else 1)
        print(f"documents: {counts['documents'] // reads:,} ({counts['sentences'] // reads:,} "
              f"sentences, {counts['skipped_lines'] // reads:,} lines skipped) x {copies} copies")
        print(f"instances: {self.instances:,}  tokens: {self.tokens:,}  "
              f"masked: {self.masked:,} ({self.masked / max(self.tokens, 1):.2%} of tokens)")
        if FLAGS.objective in ("nsp", "sop"):
            name = "random next" if FLAGS.objective == "nsp" else "swapped"
            print(f"labels: {self.label_ones / max(self.instances, 1):.2%} {name} (label 1)")
        print(f"seconds: {seconds:.1f}  ({rate:,.0f} instances/s)")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
