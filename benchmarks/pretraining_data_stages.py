"""Where kerasbert's pretraining-data creation spends its time: a stage profile on one core.

`benchmarks/pretraining_data.py` times the whole `kerasbert-create-pretraining-data` binary
against Model Garden's. This script splits kerasbert's steady state into the pipeline's stages,
with the same settings (NSP, sequence length 128, 20 predictions at most, masked_lm_prob 0.15,
uncased shipped WordPiece vocabulary): it builds the same repeated corpus (`--corpus_mb`, cached
in `--work_dir` like that benchmark's), then runs five pipelines over all of it, each one stage
longer than the one before, and prints the seconds of each and the difference per instance:

1. reading the files and grouping lines into document windows (`corpus.document_windows`);
2. + WordPiece tokenization of every sentence;
3. + building the instances (`pretraining.instance_batches`: pairs, truncation, packing);
4. + masking (`MaskedLmMasker`);
5. + serializing them as `tf.train.Example`s (`tfrecords.serialize_instances`).

What the binary adds to stage 5 (writing the shards, manifest, summary) and its start-up
(importing TensorFlow, tracing these pipelines) are the rest of its wall clock; the script also
prints the seconds of `import tensorflow` in this process. Run it pinned to one core, on an
otherwise idle machine:

    taskset -c 0 .venv/bin/python benchmarks/pretraining_data_stages.py   # 50 MB, ~1 min
    .venv/bin/python benchmarks/pretraining_data_stages.py --smoke       # a tiny corpus: runs?
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
START = time.perf_counter()
import tensorflow as tf  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - START

import kerasbert.zoo  # noqa: E402
from kerasbert.data import demo  # noqa: E402
from kerasbert.data.corpus import corpus_files, document_windows  # noqa: E402
from kerasbert.data.instances import build_instances  # noqa: E402
from kerasbert.data.pretraining import PretrainingDataConfig  # noqa: E402
from kerasbert.data.tfrecords import serialize_instances  # noqa: E402

from pretraining_data import MB, SEQ_LENGTH, build_corpus, shipped_corpus_text  # noqa: E402
from reporting import cpu_flags, format_table, smoke_banner  # noqa: E402

SMOKE_CORPUS_BYTES, SMOKE_TEXT_BYTES = 60_000, 30_000
SEED = 12345


def timed(dataset, units=lambda element: 0):
    """Seconds to iterate `dataset` to its end, and the units its elements hold."""
    start, count = time.perf_counter(), 0
    for element in dataset:
        count += units(element)
    return time.perf_counter() - start, count


def cached(dataset):
    """`dataset` held in memory (one pass made), and the seconds a pass over the copy takes."""
    held = dataset.cache()
    timed(held)
    return held, timed(held)[0]


def stage_seconds(files, tokenizer, config):
    """`[(stage, seconds)]`: each stage run alone on its input held in memory (the seconds of
    reading that copy subtracted), the first from the files; and the instance count."""
    masker = config.masker(tokenizer)
    seed = tf.constant([SEED, 0], tf.int64)
    parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
    stages = {
        "tokenize": lambda sentences: sentences.with_flat_values(
            tokenizer.tokenize(sentences.flat_values)),
        "build instances": lambda number, documents: build_instances(
            documents, config.objective, tokenizer.layout, config.max_seq_length,
            tf.random.experimental.stateless_fold_in(seed, number),
            short_seq_prob=config.short_seq_prob),
        "mask": lambda number, batch: masker(
            batch, tf.random.experimental.stateless_fold_in(seed, number)),
        "serialize": serialize_instances,
    }
    dataset = document_windows(corpus_files(files), config.window_size, format=config.format,
                               bad_lines=config.bad_lines)
    print("  read + group lines into windows ...", file=sys.stderr, flush=True)
    results = [("read + group lines into windows", timed(dataset)[0])]
    instances = None
    for stage, function in stages.items():
        held, reading = cached(dataset)
        numbered = stage in ("build instances", "mask")
        dataset = (held.enumerate() if numbered else held).map(function, **parallel)
        print(f"  {stage} ...", file=sys.stderr, flush=True)
        seconds, count = timed(dataset, (lambda batch: int(batch["token_ids"].shape[0]))
                               if stage == "mask" else lambda element: 0)
        instances = count or instances
        results.append((stage, seconds - reading))
    return results, instances


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus_mb", type=float, default=50.0)
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                           "kerasbert_pretraining_data"))
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny corpus, to see it runs")
    args = parser.parse_args()
    if args.smoke:
        print(smoke_banner())
    with tempfile.TemporaryDirectory(prefix="kerasbert_stages_smoke_") as smoke_dir:
        work_dir = smoke_dir if args.smoke else args.work_dir
        text = shipped_corpus_text(SMOKE_TEXT_BYTES if args.smoke else None)
        target = SMOKE_CORPUS_BYTES if args.smoke else int(args.corpus_mb * MB)
        files = build_corpus(os.path.join(work_dir, f"corpus-{target / MB:g}MB"), text, target)
        tokenizer = kerasbert.zoo.build_tokenizer("bert_base_uncased",
                                                  demo.vocabulary_dir("wordpiece"))
        config = PretrainingDataConfig(objective="nsp", max_seq_length=SEQ_LENGTH,
                                       masked_lm_prob=0.15, max_predictions_per_seq=20)
        rows, instances = stage_seconds(files, tokenizer, config)
    print(f"CPU flags: {cpu_flags()}; {len(files)} files, {target / MB:g} MB, {instances} "
          f"instances; affinity {len(os.sched_getaffinity(0))} core(s); import tensorflow "
          f"{IMPORT_SECONDS:.1f} s")
    print(format_table(
        ["stage", "seconds", "µs per instance", "share"],
        [[stage, f"{seconds:.2f}", f"{1e6 * seconds / instances:.1f}",
          f"{seconds / sum(second for _, second in rows):.0%}"] for stage, seconds in rows],
        args.markdown))
    print(f"all stages: {sum(seconds for _, seconds in rows):.2f} s, "
          f"{1e6 * sum(seconds for _, seconds in rows) / instances:.1f} µs per instance")


if __name__ == "__main__":
    main()
