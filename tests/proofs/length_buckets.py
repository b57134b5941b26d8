"""Length buckets leave fine-tuning's metrics where fixed padding puts them.

The fine-tuning proof's pretrained arm (tests/proofs/finetuning.py: the session's tiny BERT,
the first `TRAIN_EXAMPLES` training glosses, `EPOCHS` epochs, batches of 32, AdamW at
`LEARNING_RATE`) is fine-tuned per seed from the same weights, head and pass order: with
length-bucketed batches (the default: grouped by length within label-stratified windows of
`WINDOW_BATCHES` batches, each padded to its bucket) and with every batch padded to 32 tokens
in the pass's order (`length_buckets=False`). Both are scored on the whole dev split. The
issue's bar: the dev metric with buckets within 1 point of fixed padding over 3 seeds.

A bucketed batch has other examples and a shorter shape than the fixed batch, so its dropout
masks are different draws. The third run measures what new draws alone do: fixed padding again,
same data order, with the global seed (the dropout draws) moved by `REDRAWN`.

`select` is how `WINDOW_BATCHES` was chosen: the bucketed arm with each of `WINDOWS` windows,
seeds 0-2, dev only, against fixed padding.

    .venv/bin/python -m tests.proofs.length_buckets measure   # seeds 0-2, dev only
    .venv/bin/python -m tests.proofs.length_buckets select    # WINDOWS x seeds 0-2, dev only
"""

import statistics
import time

from tests.proofs import gloss
from tests.proofs.finetuning import EPOCHS, LEARNING_RATE, TRAIN_EXAMPLES, arms, scores

SEEDS = (0, 1, 2)
WINDOWS = (10, 25, 100)
PADDINGS = {"buckets": True, "fixed": False}
REDRAWN = 1000
METRICS = ("matthews_correlation", "accuracy")


def run(tokenizer, pretrained_file, seed):
    """{padding: dev predictions} of the pretrained arm fine-tuned under `seed` each way."""
    train = gloss.glosses("train")[:TRAIN_EXAMPLES]
    dev = gloss.glosses("dev")
    predicted = {}
    for padding, length_buckets in PADDINGS.items():
        model = arms(pretrained_file, seed)["pretrained"]
        gloss.train(model, train, EPOCHS, LEARNING_RATE, tokenizer, seed, length_buckets)
        predicted[padding] = {"dev": gloss.predictions(model, dev, tokenizer)}
    return predicted


def run_redrawn(tokenizer, pretrained_file, seed):
    """{"fixed_redrawn": dev predictions}: fixed padding under `seed`'s head and data order,
    dropout drawn under `seed + REDRAWN`."""
    model = arms(pretrained_file, seed)["pretrained"]
    gloss.train(model, gloss.glosses("train")[:TRAIN_EXAMPLES], EPOCHS, LEARNING_RATE,
                tokenizer, seed, length_buckets=False, dropout_seed=seed + REDRAWN)
    return {"fixed_redrawn": {"dev": gloss.predictions(model, gloss.glosses("dev"), tokenizer)}}


def run_windows(tokenizer, pretrained_file, seed, windows=WINDOWS):
    """{"window N": dev predictions} of the pretrained arm fine-tuned under `seed` with
    length-grouped batches in label-stratified windows of N batches, for each N of `windows`."""
    train = gloss.glosses("train")[:TRAIN_EXAMPLES]
    dev = gloss.glosses("dev")
    predicted = {}
    for window in windows:
        model = arms(pretrained_file, seed)["pretrained"]
        gloss.train(model, train, EPOCHS, LEARNING_RATE, tokenizer, seed, window_batches=window)
        predicted[f"window {window}"] = {"dev": gloss.predictions(model, dev, tokenizer)}
    return predicted


def _kept(arguments, seed, name, compute, **more_settings):
    settings = {"learning_rate": LEARNING_RATE, "train_examples": TRAIN_EXAMPLES,
                "epochs": EPOCHS, "tiny_bert": str(arguments.tiny_bert), **gloss.RUN_SETTINGS,
                **more_settings}
    result, degenerate = gloss.kept(
        arguments.results_dir / f"{name}-seed{seed}.json", settings,
        lambda: scores(compute(arguments.tokenizer, arguments.tiny_bert, seed)))
    return {run: result[run]["dev"] for run in result}, degenerate


def _points(dev, run, metric):
    return 100 * (dev[run][metric] - dev["fixed"][metric])


def _row(label, values, metric, buckets, redrawn):
    return [label, metric, f"{values['buckets']:.4f}", f"{values['fixed']:.4f}",
            f"{values['fixed_redrawn']:.4f}", f"{buckets:+.2f}", f"{redrawn:+.2f}",
            "yes" if abs(buckets) <= 1.0 else "NO"]


def _measure(arguments):
    rows, by_seed = [], []
    for seed in arguments.seeds or SEEDS:
        start = time.time()
        dev, degenerate = _kept(arguments, seed, "length_buckets", run)
        redrawn, more = _kept(arguments, seed, "length_buckets-redrawn", run_redrawn)
        dev.update(redrawn)
        degenerate += more
        by_seed.append(dev)
        print(f"seed {seed} in {time.time() - start:.0f} s"
              + (f"; degenerate: {degenerate}" if degenerate else ""), flush=True)
        for metric in METRICS:
            rows.append(_row(str(seed), {run: dev[run][metric] for run in dev}, metric,
                             _points(dev, "buckets", metric),
                             _points(dev, "fixed_redrawn", metric)))
    for metric in METRICS:
        mean = {run: statistics.mean(dev[run][metric] for dev in by_seed) for run in by_seed[0]}
        rows.append(_row("mean", mean, metric,
                         statistics.mean(_points(dev, "buckets", metric) for dev in by_seed),
                         statistics.mean(_points(dev, "fixed_redrawn", metric)
                                         for dev in by_seed)))
    print("Dev split (whole), pretrained arm (differences in points from fixed padding):")
    print(gloss.table(["seed", "metric", "buckets", "fixed padding", "fixed, dropout redrawn",
                       "buckets - fixed", "redrawn - fixed", "buckets within 1 point"],
                      rows, arguments.markdown))


def _select(arguments):
    rows = []
    seeds = arguments.seeds or SEEDS
    by_seed = {seed: {**_kept(arguments, seed, "length_buckets-windows", run_windows,
                              windows=list(WINDOWS))[0],
                      **_kept(arguments, seed, "length_buckets", run)[0]} for seed in seeds}
    for window in WINDOWS:
        arm = f"window {window}"
        for metric in METRICS:
            values = [by_seed[seed][arm][metric] for seed in seeds]
            points = statistics.mean(100 * (by_seed[seed][arm][metric]
                                            - by_seed[seed]["fixed"][metric]) for seed in seeds)
            rows.append([str(window), metric, " / ".join(f"{value:.4f}" for value in values),
                         f"{statistics.mean(values):.4f}", f"{points:+.2f}"])
    for metric in METRICS:
        values = [by_seed[seed]["fixed"][metric] for seed in seeds]
        rows.append(["fixed padding", metric, " / ".join(f"{value:.4f}" for value in values),
                     f"{statistics.mean(values):.4f}", ""])
    print(f"Dev split (whole), pretrained arm, seeds {'/'.join(map(str, seeds))}:")
    print(gloss.table(["window (batches)", "metric", "per seed", "mean", "mean - fixed (points)"],
                      rows, arguments.markdown))


if __name__ == "__main__":
    arguments = gloss.script_arguments(__doc__.split("\n\n")[0], ("measure", "select"))
    (_measure if arguments.mode == "measure" else _select)(arguments)
