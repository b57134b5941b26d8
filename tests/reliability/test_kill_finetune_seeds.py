"""kill -9 during a multi-seed `kerasbert-finetune` run (`--num_seeds=2`: each seed trains in
`model_dir/seed_<s>/`, then the median seed's files are copied up): killed at seeded random
points that walk through both seeds, each time rerun with the same flags. Every rerun resumes
the seed it was in (a finished seed is not trained again), and the last one ends bit for bit
where the uninterrupted run ends: every tensor of each seed's final checkpoint, and every
result file of the run (each seed's and the copied median's: evaluation results, history, dev
predictions) byte for byte."""

import glob
import json
import os
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from tests.reliability.faults import (KillChain, chain_figures, checked_run, recorded,
                                      checkpoint_values, finetune_command, kill_points,
                                      same_values)

pytestmark = pytest.mark.slow

FAULT = "kill -9 during multi-seed fine-tuning (kerasbert-finetune --num_seeds=2)"
ROWS = {"train": 48, "dev": 32}
SEEDS = (0, 1)
# Per seed: 48 examples in batches of 8 for 1 epoch, 6 steps, a checkpoint every 2.
INTERVAL, STEPS = 2, 6


def _result_files(model_dir):
    """`{relative path: text}` of every JSON and TSV file the run wrote."""
    paths = glob.glob(str(model_dir / "**" / "*.json"), recursive=True) + glob.glob(
        str(model_dir / "**" / "*.tsv"), recursive=True)
    return {os.path.relpath(path, model_dir): open(path, encoding="utf-8").read()
            for path in sorted(paths) if not path.endswith("kerasbert_run.json")}


def _finished_files_intact(model_dir):
    """Whether every result file under its final name, in any seed's folder, is whole (JSON
    parses, a saved model is a complete zip)."""
    for path in glob.glob(str(model_dir / "**" / "*.json"), recursive=True):
        try:
            json.loads(open(path, encoding="utf-8").read())
        except ValueError:
            return False
    return all(zipfile.is_zipfile(path) and zipfile.ZipFile(path).testzip() is None
               for path in glob.glob(str(model_dir / "**" / "*.keras"), recursive=True))


def _final_values(model_dir):
    return {seed: checkpoint_values(model_dir / f"seed_{seed}" / f"ckpt-{STEPS}")
            for seed in SEEDS}


def _next_checkpoints(model_dir):
    """The two checkpoints a rerun writes next, across seeds: `(first, second)` prefixes."""
    points = []
    for seed in SEEDS:
        latest = tf.train.latest_checkpoint(str(model_dir / f"seed_{seed}"))
        step = int(latest.rsplit("-", 1)[1]) if latest else 0
        points += [model_dir / f"seed_{seed}" / f"ckpt-{later}"
                   for later in range(step + INTERVAL, STEPS + 1, INTERVAL)]
    return points[0], points[min(1, len(points) - 1)]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, figures):
    root = tmp_path_factory.mktemp("kill_finetune_seeds")
    command = finetune_command(root, ROWS, 1, "--num_train_epochs=1", "--learning_rate=2e-3",
                               f"--checkpoint_interval={INTERVAL}", f"--num_seeds={len(SEEDS)}")

    steps = range(INTERVAL, STEPS + 1, INTERVAL)
    reference_dir = root / "reference"
    reference = checked_run(
        command(reference_dir), root / "logs" / "reference",
        events={step: recorded(reference_dir / "seed_0" / f"ckpt-{step}")
                for step in steps})
    expected, expected_results = _final_values(reference_dir), _result_files(reference_dir)
    times = [reference.events[step] for step in steps]
    interval = sorted(later - earlier for earlier, later in zip(times, times[1:]))[len(times) // 2]
    model_dir = root / "killed"

    def plan(delay):
        first, second = _next_checkpoints(model_dir)
        return {"marker": recorded(first), "kill_after": delay, "kill_when": recorded(second)}

    # Each run is killed a seeded random fraction of a checkpoint interval after its first new
    # checkpoint (of whichever seed it is in), at the latest when it writes its second: five
    # kills walk through seed 0, the move to seed 1 and seed 1.
    chain = KillChain(command(model_dir), root / "logs",
                      [lambda delay=delay: plan(delay)
                       for delay in kill_points(seed=2711, span=interval, high=1.0)],
                      after_kill=lambda: _finished_files_intact(model_dir))
    final = _final_values(model_dir) if chain.final.returncode == 0 else {}
    results = _result_files(model_dir) if chain.final.returncode == 0 else {}
    same = (chain.final.returncode == 0 and results == expected_results
            and all(same_values(final[seed], expected[seed]) for seed in SEEDS))
    figures(FAULT, *chain_figures(chain, chain.left, same))
    return expected, expected_results, chain, final, results


def test_every_kill_landed_in_both_seeds_and_the_last_rerun_finished(outcome):
    chain = outcome[2]
    assert chain.injected >= 5 and not chain.problems(), "\n".join(chain.problems())
    restored = [line for run in chain.killed[1:] + [chain.final]
                for line in run.stdout.splitlines() if line.startswith("Restored")]
    assert len(set(restored)) >= 3, restored
    assert any("seed_1" in line for line in restored), restored  # a kill landed in seed 1


def test_a_kill_leaves_no_half_written_result(outcome):
    assert all(outcome[2].left)


def test_the_resumed_run_ends_bit_for_bit_as_the_uninterrupted_one(outcome):
    expected, expected_results, _, final, results = outcome
    assert final.keys() == expected.keys() == set(SEEDS)
    for seed in SEEDS:
        assert len(expected[seed]) > 20 and final[seed].keys() == expected[seed].keys()
        for name in expected[seed]:
            np.testing.assert_array_equal(final[seed][name], expected[seed][name],
                                          err_msg=f"seed {seed}: {name}")
    assert {"eval_results.json", "seed_0/eval_results.json", "seed_1/eval_results.json",
            "dev_predictions.tsv"} <= set(expected_results)
    assert results == expected_results
