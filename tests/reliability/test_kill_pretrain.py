"""kill -9 during `kerasbert-pretrain` (tiny BERT on TFRecords) at seeded random points, each
time rerun with the same flags: every rerun resumes, and the last one ends bit for bit where an
uninterrupted run ends (weights, optimizer slots, step: the loop checkpoints the data iterator
too, so a resumed run sees the same batches). A truncated latest checkpoint is named in a
warning and the run falls back to the one before it, again ending bit for bit equal."""

import os
import shutil

import pytest
import tensorflow as tf

from kerasbert.data.demo import vocabulary_dir
from tests.helpers import demo_wordpiece_tokenizer
from tests.reliability.faults import (KillChain, chain_figures, checked_run, recorded,
                                      checkpoint_values, kill_points, pretrain_command, run,
                                      same_values,
                                      small_corpus, write_pretraining_records)

pytestmark = pytest.mark.slow

FAULT = "kill -9 during pretraining (kerasbert-pretrain)"
TRUNCATED = "truncated latest checkpoint (kerasbert-pretrain)"
VOCAB = os.path.join(vocabulary_dir("wordpiece"), "vocab.txt")
STEPS = ["--train_steps=30", "--checkpoint_interval=5", "--steps_per_loop=5"]
CHECKPOINTS = range(5, 31, 5)


def _readable(model_dir):
    """Whether the checkpoint the folder's state names (if any) reads completely."""
    latest = tf.train.latest_checkpoint(str(model_dir))
    if latest is None:
        return True
    try:
        checkpoint_values(latest)
    except Exception:  # noqa: BLE001 (any failure to read is the finding)
        return False
    return True


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, figures):
    root = tmp_path_factory.mktemp("kill_pretrain")
    records = root / "train.tfrecord"
    write_pretraining_records(records, small_corpus(root / "corpus"), demo_wordpiece_tokenizer())

    def command(model_dir):
        return pretrain_command(model_dir, records, VOCAB, *STEPS)

    reference = checked_run(
        command(root / "reference"), root / "logs" / "reference",
        events={step: recorded(root / "reference" / f"ckpt-{step}") for step in CHECKPOINTS})
    expected = checkpoint_values(root / "reference" / "ckpt-30")
    # Each run is killed a seeded random fraction of a checkpoint interval after it writes its
    # first checkpoint (at the latest when it writes its second: the machine's load changes its
    # speed): it resumes from the last one, so the kills walk through the run.
    times = [reference.events[step] for step in CHECKPOINTS]
    interval = sorted(later - earlier for earlier, later in zip(times, times[1:]))[2]
    model_dir = root / "killed"

    def plan(delay):
        latest = tf.train.latest_checkpoint(str(model_dir))
        step = int(latest.rsplit("-", 1)[1]) if latest else 0
        return {"marker": recorded(model_dir / f"ckpt-{step + 5}"), "kill_after": delay,
                "kill_when": recorded(model_dir / f"ckpt-{step + 10}")}

    chain = KillChain(command(model_dir), root / "logs",
                      [lambda delay=delay: plan(delay)
                       for delay in kill_points(seed=1403, span=interval, high=1.0)],
                      after_kill=lambda: _readable(model_dir))
    final = checkpoint_values(model_dir / "ckpt-30") if chain.final.returncode == 0 else {}
    figures(FAULT, *chain_figures(chain, chain.left, same_values(final, expected)))
    return root, expected, chain, final


def test_every_kill_landed_and_the_last_rerun_finished(outcome):
    _, _, chain, _ = outcome
    assert chain.injected >= 5 and not chain.problems(), "\n".join(chain.problems())
    assert any("Restored" in run.stdout for run in chain.killed[1:] + [chain.final])


def test_a_kill_leaves_a_readable_latest_checkpoint(outcome):
    _, _, chain, _ = outcome
    assert all(chain.left)
    # The kills came at several steps: the reruns restored more than one checkpoint.
    restored = {line for run in chain.killed[1:] + [chain.final] for line in run.stdout.splitlines()
                if line.startswith("Restored")}
    assert len(restored) >= 3, restored


def test_the_resumed_run_ends_bit_for_bit_as_the_uninterrupted_one(outcome):
    _, expected, _, final = outcome
    assert len(expected) > 50
    assert same_values(final, expected)


def test_a_truncated_latest_checkpoint_falls_back_to_the_previous_one(outcome, figures):
    root, expected, _, _ = outcome
    model_dir = root / "truncated"
    shutil.copytree(root / "reference", model_dir)
    data = model_dir / "ckpt-30.data-00000-of-00001"
    os.truncate(data, os.path.getsize(data) // 2)
    result = run(pretrain_command(model_dir, root / "train.tfrecord", VOCAB, *STEPS),
                 root / "logs" / "truncated")
    survived = result.returncode == 0 and "ckpt-25" in result.stdout + result.stderr
    final = checkpoint_values(model_dir / "ckpt-30") if result.returncode == 0 else {}
    figures(TRUNCATED, 1, int(survived and same_values(final, expected)),
            int(not same_values(final, expected)))
    assert result.returncode == 0, result.describe()
    warning = [line for line in (result.stdout + result.stderr).splitlines() if "ckpt-30" in line]
    assert warning, "no warning names the truncated ckpt-30:\n" + result.describe()
    assert "Restored" in result.stdout and "ckpt-25" in result.stdout, result.describe()
    assert same_values(final, expected)
