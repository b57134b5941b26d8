"""What the proofs share: the shipped WordNet gloss set's splits, one training recipe (AdamW
with 10% warm-up and linear decay), predictions and accuracy, the session's tiny BERT for a
script, and the table printing."""

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import keras
import numpy as np

import kerasbert.data.demo
from kerasbert.data.glue import (example_labels, examples_dataset, glue_examples,
                                 predictions_from_logits)
from kerasbert.data.length_buckets import WINDOW_BATCHES
from kerasbert.training import create_optimizer
from tests.helpers import STEPS_PER_EXECUTION, demo_wordpiece_tokenizer
from tests.pretrain_tiny_bert import pretrained_file

TASK = "wordnet_gloss"
MAX_LENGTH, BATCH = 32, 32
EVAL_SPLITS = ("dev", "test")
# What the kept results (`kept`) also depend on: how `train` batches, and the dropout seeds of
# a loaded model set by the seed (`finetuning.arms`; before 2026-12-01 they were not).
RUN_SETTINGS = {"window_batches": WINDOW_BATCHES, "strata": "label ids",
                "loaded_dropout_seeds": "seeded"}
DEFAULT_TINY_BERT = Path(tempfile.gettempdir()) / "kerasbert_proofs" / "pretrained_tiny_bert.keras"


def glosses(split):
    """The `GlueExample`s of a split of the shipped gloss set ("train", "dev" or "test"), in
    file order (each file is ordered by a hash: any prefix is a random sample)."""
    return list(glue_examples(TASK, kerasbert.data.demo.classification_files()[split]))


def labels():
    return kerasbert.data.demo.classification_labels()


def train(model, examples, epochs, learning_rate, tokenizer, seed, length_buckets=True,
          dropout_seed=None, window_batches=WINDOW_BATCHES):
    """`epochs` passes over `examples` in shuffled batches of `BATCH` examples (remainder
    dropped), grouped by length within label-stratified windows of `window_batches` batches and
    each padded to its length bucket (`length_buckets=False`: the pass's order, padded to
    `MAX_LENGTH` tokens), AdamW at `learning_rate` with 10% warm-up and linear decay; the
    shuffle is `seed`, and so is the global seed (the dropout draws) unless `dropout_seed` is
    given."""
    steps = epochs * (len(examples) // BATCH)
    keras.utils.set_random_seed(seed if dropout_seed is None else dropout_seed)
    model.compile(optimizer=create_optimizer("adamw", learning_rate, num_train_steps=steps,
                                             num_warmup_steps=steps // 10),
                  steps_per_execution=STEPS_PER_EXECUTION)
    model.fit(examples_dataset(TASK, examples, tokenizer, MAX_LENGTH, BATCH, shuffle=True,
                               seed=seed, drop_remainder=True, length_buckets=length_buckets,
                               window_batches=window_batches),
              epochs=epochs, verbose=0)


def predictions(model, examples, tokenizer):
    """The predicted label ids of `model` on `examples`."""
    logits = model.predict(examples_dataset(TASK, examples, tokenizer, MAX_LENGTH, 256,
                                            length_buckets=False), verbose=0)["logits"]
    return np.asarray(predictions_from_logits(TASK, logits))


def gold(examples):
    return np.asarray(example_labels(TASK, examples))


def accuracy(predicted, examples):
    return float(np.mean(predicted == gold(examples)))


def script_arguments(description, modes):
    """The proof scripts' command line: a mode, `--seeds`, `--tiny_bert`, `--markdown`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("mode", choices=modes)
    parser.add_argument("--seeds", type=lambda text: [int(seed) for seed in text.split(",")],
                        help="comma-separated seeds (default: the mode's own)")
    parser.add_argument("--tiny_bert", type=Path, default=DEFAULT_TINY_BERT,
                        help="the session's tiny BERT (tests/pretrain_tiny_bert.py), trained "
                             "there in a fresh process if missing (minutes)")
    parser.add_argument("--markdown", action="store_true", help="tables in Markdown")
    parser.add_argument("--results_dir", type=Path, default=DEFAULT_TINY_BERT.parent / "results",
                        help="each seed's results are kept there and reused by a later run with "
                             "the same settings (so seeds can run in parallel processes)")
    arguments = parser.parse_args()
    arguments.tiny_bert = pretrained_file(arguments.tiny_bert)
    arguments.tokenizer = demo_wordpiece_tokenizer()
    return arguments


def kept(path, settings, compute):
    """`compute()` (a JSON-able value), or what an earlier call with the same `settings` kept
    in the JSON file `path`; a result is kept only once complete."""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as file:
            saved = json.load(file)
        if saved["settings"] == settings:
            return saved["result"]
    result = compute()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(f"{path}.partial", "w", encoding="utf-8") as file:
        json.dump({"settings": settings, "result": result}, file)
    os.replace(f"{path}.partial", path)
    return result


def table(header, rows, markdown=False):
    """`rows` (lists of str) under `header`, aligned, or as a Markdown table."""
    if markdown:
        lines = [header, ["---"] * len(header), *rows]
        return "\n".join("| " + " | ".join(line) + " |" for line in lines)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths))
                     for row in [header, *rows])


def span(values, digits=3):
    """"low-high (median m)" of `values`."""
    return (f"{min(values):.{digits}f}-{max(values):.{digits}f} "
            f"(median {statistics.median(values):.{digits}f})")
