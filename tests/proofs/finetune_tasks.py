"""The task-family learning proofs' margins: how far above its bounds each synthetic task of
tests/training/test_finetune_tasks_learn.py lands, over several seeds.

The test fine-tunes a tiny random encoder with `kerasbert-finetune` on each task's synthetic
files (SQuAD v1.1 and v2.0, CoNLL-2003, SWAG, STS-B) made under seed 0, and asserts that every
metric of `BOUNDS[task]` on the dev file is above its bound. `measure` repeats that for other
seeds: seed s makes the files with `random.Random(DATA_SEEDS[task] + 100 * s)`, the encoder
with `keras.utils.set_random_seed(s)` and fine-tunes with `--seed=s` (seed 0 is exactly the
test's run). It prints each run's metrics, each metric's smallest margin over the seeds and the
seconds each run took; `--epochs task=N` tries another number of epochs for a task (the flags
are otherwise the test's), which is how the test's epochs were chosen. Only dev files exist:
the tasks are synthetic, and a test file would be another draw of the same generator.

    .venv/bin/python -m tests.proofs.finetune_tasks measure --seeds 0,1,2
    .venv/bin/python -m tests.proofs.finetune_tasks measure --seeds 0,1,2 --epochs swag=2
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import transformers

from tests.proofs import gloss
from tests.training import test_finetune_tasks_learn as tasks

MEASURED_SEEDS = (0, 1, 2)
FLAGS = {"squad_v1": tasks.SQUAD_V1_FLAGS, "squad_v2": tasks.SQUAD_V2_FLAGS,
         "conll2003": tasks.CONLL_FLAGS, "swag": tasks.SWAG_FLAGS, "stsb": tasks.GLUE_FLAGS}


def with_epochs(flags, epochs):
    """`flags` with `--num_train_epochs` set to `epochs` (None: unchanged)."""
    if epochs is None:
        return flags
    return tuple(f"--num_train_epochs={epochs}" if flag.startswith("--num_train_epochs=")
                 else flag for flag in flags)


def metrics(task, encoder_file, tokenizer, directory, seed, flags):
    """{metric: value} of `BOUNDS[task]` after one fine-tuning run."""
    if task == "squad_v1":
        dev, predictions, results, late = tasks.squad_v1_outcome(encoder_file, tokenizer,
                                                                 directory, seed, flags)
        results = {**results, "later_window_exact": tasks.later_window_exact(dev, predictions,
                                                                             late)}
    elif task == "squad_v2":
        results = tasks.squad_v2_outcome(encoder_file, tokenizer, directory, seed, flags)[2]
    else:
        outcome = {"conll2003": tasks.conll_outcome, "swag": tasks.swag_outcome,
                   "stsb": tasks.stsb_outcome}[task]
        results = outcome(encoder_file, directory, seed, flags)[2]
    return {metric: float(results[metric]) for metric in tasks.BOUNDS[task]}


def _epochs_argument(text):
    task, epochs = text.split("=")
    if task not in FLAGS:
        raise argparse.ArgumentTypeError(f"unknown task {task!r}; one of {sorted(FLAGS)}")
    return task, int(epochs)


def measure(seeds, epochs, task_names, markdown):
    tokenizer = transformers.BertTokenizerFast(tasks.VOCAB, do_lower_case=True)
    rows, margins = [], {}
    with tempfile.TemporaryDirectory() as folder:
        for seed in seeds:
            encoder_file = tasks.save_encoder(Path(folder) / f"encoder-{seed}.keras", seed)
            for task in task_names:
                flags = with_epochs(FLAGS[task], epochs.get(task))
                directory = Path(folder) / f"{task}-{seed}"
                directory.mkdir()
                start = time.time()
                seen = metrics(task, encoder_file, tokenizer, directory, seed, flags)
                seconds = time.time() - start
                for metric, bound in tasks.BOUNDS[task].items():
                    margins.setdefault((task, metric), []).append(seen[metric] - bound)
                epoch_flag = next(flag for flag in flags if "epochs" in flag)
                rows.append([task, str(seed), epoch_flag.split("=")[1], ", ".join(
                    f"{metric} {value:.3f}" for metric, value in seen.items()), f"{seconds:.0f}"])
                print(" ".join(rows[-1]), flush=True)
    print(gloss.table(["task", "seed", "epochs", "dev metrics", "seconds"], rows, markdown))
    print(gloss.table(
        ["task", "metric", "bound", "smallest margin", "median margin"],
        [[task, metric, f"{tasks.BOUNDS[task][metric]:g}", f"{min(values):+.3f}",
          f"{statistics.median(values):+.3f}"] for (task, metric), values in margins.items()],
        markdown))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("measure",))
    parser.add_argument("--seeds", type=lambda text: [int(seed) for seed in text.split(",")],
                        default=MEASURED_SEEDS, help="comma-separated seeds")
    parser.add_argument("--epochs", type=_epochs_argument, action="append", default=[],
                        help="task=N: fine-tune that task for N epochs instead of the test's")
    parser.add_argument("--tasks", type=lambda text: text.split(","), default=list(FLAGS),
                        help="comma-separated tasks (default: all)")
    parser.add_argument("--markdown", action="store_true", help="tables in Markdown")
    arguments = parser.parse_args()
    measure(arguments.seeds, dict(arguments.epochs), arguments.tasks, arguments.markdown)
