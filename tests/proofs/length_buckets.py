"""Length buckets leave fine-tuning's metrics where fixed padding puts them.

The fine-tuning proof's pretrained arm (tests/proofs/finetuning.py: the session's tiny BERT,
the first `TRAIN_EXAMPLES` training glosses, `EPOCHS` epochs, batches of 32, AdamW at
`LEARNING_RATE`) is fine-tuned twice per seed from the same weights, head and data order: with
length-bucketed batches (the default) and with every batch padded to 32 tokens
(`length_buckets=False`). Both are scored on the whole dev split. The issue's bar: the dev
metric with buckets within 1 point of fixed padding, for each of 3 seeds.

    .venv/bin/python -m tests.proofs.length_buckets measure   # seeds 0-2, dev only
"""

import time

from tests.proofs import gloss
from tests.proofs.finetuning import EPOCHS, LEARNING_RATE, TRAIN_EXAMPLES, arms, scores

SEEDS = (0, 1, 2)
PADDINGS = {"buckets": True, "fixed": False}


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


def _measure(arguments):
    rows = []
    for seed in arguments.seeds or SEEDS:
        start = time.time()
        settings = {"learning_rate": LEARNING_RATE, "train_examples": TRAIN_EXAMPLES,
                    "epochs": EPOCHS, "tiny_bert": str(arguments.tiny_bert)}
        result, degenerate = gloss.kept(
            arguments.results_dir / f"length_buckets-seed{seed}.json", settings,
            lambda: scores(run(arguments.tokenizer, arguments.tiny_bert, seed)))
        dev = {padding: result[padding]["dev"] for padding in PADDINGS}
        print(f"seed {seed} in {time.time() - start:.0f} s"
              + (f"; degenerate: {degenerate}" if degenerate else ""), flush=True)
        for metric in ("matthews_correlation", "accuracy"):
            points = 100 * (dev["buckets"][metric] - dev["fixed"][metric])
            rows.append([str(seed), metric, f"{dev['buckets'][metric]:.4f}",
                         f"{dev['fixed'][metric]:.4f}", f"{points:+.2f}",
                         "yes" if abs(points) <= 1.0 else "NO"])
    print("Dev split (whole), pretrained arm:")
    print(gloss.table(["seed", "metric", "buckets", "fixed padding", "difference (points)",
                       "within 1 point"], rows, arguments.markdown))


if __name__ == "__main__":
    _measure(gloss.script_arguments(__doc__.split("\n\n")[0], ("measure",)))
