"""kill -9 during `kerasbert-vocab` at seeded random points, each time rerun with the same
flags: after a kill the vocabulary file is absent, and the last rerun writes the same bytes
as an uninterrupted run. A kill that lands after the vocabulary was written whole found the
work done: it injected no fault and is not counted (the folder is emptied and the next point
is tried)."""

import shutil

import pytest

from tests.reliability.faults import (KillChain, binary, chain_figures, checked_run, final_files,
                                      kill_points, small_corpus)

pytestmark = pytest.mark.slow

FAULT = "kill -9 during vocabulary training (kerasbert-vocab)"


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, figures):
    root = tmp_path_factory.mktemp("kill_vocab")
    corpus = small_corpus(root / "corpus")

    def command(output_dir):
        return binary("vocab", f"--input_files={','.join(corpus)}", "--type=wordpiece",
                      "--vocab_size=400", f"--output_dir={output_dir}")

    reference = checked_run(command(root / "reference"), root / "logs" / "reference")
    expected = final_files(root / "reference")
    # A second uninterrupted run: the first of a binary's runs can take much more CPU than the
    # next ones (measured here, five runs in a row: 15.5, 11.2, 10.6, 9.1, 9.6 CPU seconds; in
    # CI a slow reference left 12 of 16 points past the reruns' end), so the points are drawn
    # over the smaller of the two. Its vocabulary must be the same bytes.
    again = checked_run(command(root / "again"), root / "logs" / "again")
    assert final_files(root / "again") == expected
    span = min(reference.cpu_seconds, again.cpu_seconds)
    # Training starts over on a rerun; the first half of a run is Python and TensorFlow
    # starting up, so the kills fall in the second half of its CPU time.
    # Spare points: a run that finishes before its kill (it used less CPU than the reference),
    # or is killed after its vocabulary was written, is checked and its vocabulary removed; a
    # second seeded pass from early to late follows the first (one pass of 8 once ran out, at
    # 4 kills).
    points = [point for seed in (1401, 1411) for point in kill_points(
        seed=seed, span=span, count=8, low=0.5, high=0.95)]
    output = root / "killed"
    chain = KillChain(command(output), root / "logs",
                      [lambda point=point: {"kill_at_cpu": point} for point in points],
                      after_kill=lambda: final_files(output),
                      reset=lambda: shutil.rmtree(output),
                      finished_ok=lambda: final_files(output) == expected,
                      complete=lambda: final_files(output) == expected)
    left_ok = [left == {} for left in chain.left]
    figures(FAULT, *chain_figures(chain, left_ok, final_files(output) == expected))
    return expected, chain, left_ok, final_files(output)


def test_every_kill_landed_and_the_last_rerun_finished(outcome):
    expected, chain, _, _ = outcome
    assert list(expected) == ["vocab.txt"] and len(expected["vocab.txt"].splitlines()) > 100
    assert chain.injected >= 5 and not chain.problems(), "\n".join(chain.problems())


def test_a_kill_leaves_no_half_written_vocabulary(outcome):
    _, chain, left_ok, _ = outcome
    assert all(left_ok), [sorted(left) for left in chain.left]


def test_the_rerun_writes_the_uninterrupted_vocabulary(outcome):
    expected, _, _, final = outcome
    assert final == expected
