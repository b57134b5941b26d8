"""kill -9 during `kerasbert-finetune` (a tiny BERT on a slice of the shipped gloss set) at
seeded random points, each time rerun with the same flags: every rerun resumes from the last
checkpoint (and skips evaluated epochs), and the last one ends bit for bit where the
uninterrupted run ends: every tensor of the final checkpoint (weights, optimizer slots, step,
dropout seed states), the weights of the saved best model, and the results and dev predictions
byte for byte (each pass over the training set has an order made from the seed and the pass
alone, `kerasbert.data.passes`, so a restored data iterator goes on as an uninterrupted one)."""

import json
import os
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.reliability.faults import (KillChain, chain_figures, checked_run, recorded,
                                      checkpoint_values, finetune_command, kill_points,
                                      same_values)

pytestmark = pytest.mark.slow

FAULT = "kill -9 during fine-tuning (kerasbert-finetune)"
ROWS = {"train": 64, "dev": 32}
# 64 examples in batches of 8 for 2 epochs: 16 steps, a checkpoint every 2.
INTERVAL, STEPS = 2, 16
RESULTS = ("eval_history.json", "eval_results.json", "dev_predictions.tsv")


def _finished_files_intact(model_dir):
    """Whether every result file under its final name is whole (JSON parses, the model is a
    complete zip)."""
    for name in ("eval_history.json", "eval_results.json"):
        if os.path.exists(model_dir / name):
            try:
                json.loads((model_dir / name).read_text())
            except ValueError:
                return False
    model = model_dir / "model.keras"
    if os.path.exists(model) and not (zipfile.is_zipfile(model) and
                                      zipfile.ZipFile(model).testzip() is None):
        return False
    return True


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, figures):
    root = tmp_path_factory.mktemp("kill_finetune")
    command = finetune_command(root, ROWS, 2, "--num_train_epochs=2", "--learning_rate=2e-3",
                               f"--checkpoint_interval={INTERVAL}")

    steps = range(INTERVAL, STEPS + 1, INTERVAL)
    reference = checked_run(
        command(root / "reference"), root / "logs" / "reference",
        events={step: recorded(root / "reference" / f"ckpt-{step}") for step in steps})
    expected = checkpoint_values(root / "reference" / f"ckpt-{STEPS}")
    expected_results = {name: (root / "reference" / name).read_text() for name in RESULTS}
    times = [reference.events[step] for step in steps]
    interval = sorted(later - earlier for earlier, later in zip(times, times[1:]))[len(times) // 2]
    model_dir = root / "killed"

    def plan(delay):
        latest = tf.train.latest_checkpoint(str(model_dir))
        step = int(latest.rsplit("-", 1)[1]) if latest else 0
        return {"marker": recorded(model_dir / f"ckpt-{step + INTERVAL}"),
                "kill_after": delay,
                "kill_when": recorded(model_dir / f"ckpt-{step + 2 * INTERVAL}")}

    # Each run is killed a seeded random fraction of a checkpoint interval (or of the epoch's
    # evaluation, which comes in its place at an epoch's end) after its first new checkpoint, at
    # the latest when it writes its second (the machine's load changes its speed).
    chain = KillChain(command(model_dir), root / "logs",
                      [lambda delay=delay: plan(delay)
                       for delay in kill_points(seed=1404, span=interval, high=1.0)],
                      after_kill=lambda: _finished_files_intact(model_dir))
    final = checkpoint_values(model_dir / f"ckpt-{STEPS}") if chain.final.returncode == 0 else {}
    results = {name: (model_dir / name).read_text() if (model_dir / name).exists() else None
               for name in RESULTS}
    same_best_model = chain.final.returncode == 0 and _same_weights(
        root / "reference" / "model.keras", model_dir / "model.keras")
    figures(FAULT, *chain_figures(chain, chain.left,
                                  same_values(final, expected) and results == expected_results
                                  and same_best_model))
    return expected, expected_results, chain, final, results, same_best_model


def test_every_kill_landed_and_the_last_rerun_finished(outcome):
    chain = outcome[2]
    assert chain.injected >= 5 and not chain.problems(), "\n".join(chain.problems())
    restored = {line for run in chain.killed[1:] + [chain.final] for line in run.stdout.splitlines()
                if line.startswith("Restored")}
    assert len(restored) >= 3, restored


def test_a_kill_leaves_no_half_written_result(outcome):
    chain = outcome[2]
    assert all(chain.left)


def test_the_resumed_run_ends_bit_for_bit_as_the_uninterrupted_one(outcome):
    expected, expected_results, _, final, results, same_best_model = outcome
    assert len(expected) > 50 and final.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(final[name], expected[name], err_msg=name)
    for name in RESULTS:
        assert results[name] == expected_results[name], name
    assert same_best_model


def _same_weights(first, second):
    """Whether two saved models hold bit-equal weights (the files themselves differ: a `.keras`
    records when it was saved)."""
    first, second = (keras.models.load_model(path) for path in (first, second))
    return len(first.weights) == len(second.weights) > 0 and all(
        np.array_equal(ours, theirs) for ours, theirs in zip(first.get_weights(),
                                                             second.get_weights()))
