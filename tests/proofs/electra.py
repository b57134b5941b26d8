"""The ELECTRA learning proof's margins over seeds, and other recipes for it.

tests/training/test_learning.py::test_tiny_electra_rtd_loss_falls trains a tiny ELECTRA
(`electra_outcome`: seed 0, `ELECTRA_STEPS` steps at `ELECTRA_LEARNING_RATE`, hidden
`ELECTRA_HIDDEN`) and asserts, on the held-out shard, that the RTD loss ends below the base-rate
guess's, that the training RTD loss falls every quarter, and that the generator's MLM accuracy
is over twice the most frequent token's. `measure` runs the same for other seeds and settings
and prints each run's two margins (base-rate loss minus RTD loss; MLM accuracy minus twice the
baseline), whether the quarters fall, and its CPU seconds.

    .venv/bin/python -m tests.proofs.electra measure --seeds 0,1,2
    .venv/bin/python -m tests.proofs.electra measure --seeds 0,1,2 --hidden_size 128 \\
        --learning_rate 1e-3
"""

import argparse
import time

import numpy as np

from tests.helpers import demo_wordpiece_tokenizer
from tests.proofs import gloss
from tests.training import test_learning as proof


def measure(seeds, steps, learning_rate, hidden_size):
    tokenizer = demo_wordpiece_tokenizer()
    rows = []
    for seed in seeds:
        start = time.process_time()
        run = proof.electra_outcome(tokenizer, seed, steps, learning_rate, hidden_size)
        rows.append([str(seed), f"{run['after']:.4f}", f"{run['base_rate']:.4f}",
                     f"{run['base_rate'] - run['after']:+.4f}", f"{run['mlm_accuracy']:.4f}",
                     f"{run['mlm_accuracy'] - 2 * run['mlm_baseline']:+.4f}",
                     str(bool(np.all(np.diff(run["quarters"]) < 0))),
                     f"{time.process_time() - start:.0f}"])
    print(f"ELECTRA, {steps} steps, peak learning rate {learning_rate}, hidden {hidden_size}:")
    print(gloss.table(["seed", "RTD loss", "base-rate loss", "RTD margin", "MLM accuracy",
                       "MLM margin", "quarters fall", "CPU s"], rows))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["measure"])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=proof.ELECTRA_STEPS)
    parser.add_argument("--learning_rate", type=float, default=proof.ELECTRA_LEARNING_RATE)
    parser.add_argument("--hidden_size", type=int, default=proof.ELECTRA_HIDDEN)
    args = parser.parse_args()
    measure([int(seed) for seed in args.seeds.split(",")], args.steps, args.learning_rate,
            args.hidden_size)


if __name__ == "__main__":
    main()
