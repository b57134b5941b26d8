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

from absl import app, flags

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
    from kerasbert.data.creation import DataCreationSettings, create_pretraining_data
    from kerasbert.data.pretraining import PretrainingDataConfig

    settings = DataCreationSettings(
        FLAGS.input_file, FLAGS.output_file, PretrainingDataConfig(
            FLAGS.objective, FLAGS.max_seq_length, masked_lm_prob=FLAGS.masked_lm_prob,
            max_predictions_per_seq=FLAGS.max_predictions_per_seq,
            whole_word_masking=FLAGS.do_whole_word_mask or FLAGS.ngram > 1,
            max_ngram=FLAGS.ngram, short_seq_prob=FLAGS.short_seq_prob,
            window_size=FLAGS.window_size, format=FLAGS.input_format, bad_lines=FLAGS.bad_lines),
        dupe_factor=FLAGS.dupe_factor, random_seed=FLAGS.random_seed,
        num_shards=FLAGS.num_shards, num_tasks=FLAGS.num_tasks, task_index=FLAGS.task_index,
        compression=None if FLAGS.compression == "none" else "GZIP",
        recorded_flags=_manifest_flags())
    create_pretraining_data(settings, lambda: tokenizer_from_flags("--input_file"))


def _manifest_flags():
    """The flags the records depend on, for the manifest: all of this binary's but the two that
    only split the work (the manifest has them apart) and --output_file (the manifest lies beside
    it and names the shards relative to it, so a data set can move)."""
    modules = {FLAGS.find_module_defining_flag(name)
               for name in ("input_file", "objective", "vocab_file")}
    return {flag.name: flag.value for module in sorted(modules)
            for flag in FLAGS.get_flags_for_module(module)
            if flag.name not in ("num_tasks", "task_index", "output_file")}


def run():
    run_reporting_errors(main, "kerasbert-create-pretraining-data")


if __name__ == "__main__":
    run()
