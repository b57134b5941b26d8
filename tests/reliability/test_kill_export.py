"""kill -9 during `kerasbert-export` (a tiny BERT encoder to ONNX) at seeded random points,
each time rerun with the same flags: after a kill the destination holds nothing (an export is
built beside it and renamed into place only once verified), and the last rerun writes a
verified export. A kill that lands after that rename finds the export finished: it injected no
fault and is not counted (the folder is emptied, since export refuses to overwrite, and the
next point is tried)."""

import json
import os
import shutil

import pytest

import kerasbert
from tests.reliability.faults import (KillChain, binary, chain_figures, checked_run, kill_points)

pytestmark = pytest.mark.slow

FAULT = "kill -9 during export (kerasbert-export)"


def _destination_empty(directory):
    return not os.path.exists(directory) or not os.listdir(directory)


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, figures):
    root = tmp_path_factory.mktemp("kill_export")
    encoder = kerasbert.zoo.build("bert_tiny_uncased", vocab_size=500, num_layers=2,
                                  hidden_size=32, num_heads=2, intermediate_size=64,
                                  max_positions=64)
    encoder.save(root / "encoder.keras")

    def command(output_dir):
        return binary("export", f"--model={root / 'encoder.keras'}",
                      f"--output_dir={output_dir}", "--formats=onnx", "--max_seq_length=16")

    reference = checked_run(command(root / "reference"), root / "logs" / "reference")
    # An export starts over on a rerun; the first third of its CPU time is Python and
    # TensorFlow starting up.
    # Spare points: a run that finishes before its kill, or is killed after its export was
    # renamed into place, is checked and its export removed; a second seeded pass from early
    # to late follows the first.
    points = [point for seed in (1405, 1415) for point in kill_points(
        seed=seed, span=reference.cpu_seconds, count=8, low=0.35, high=0.85)]
    output = root / "exports" / "killed"
    chain = KillChain(command(output), root / "logs",
                      [lambda point=point: {"kill_at_cpu": point} for point in points],
                      after_kill=lambda: _destination_empty(output),
                      reset=lambda: shutil.rmtree(output),
                      finished_ok=lambda: _verified(output), complete=lambda: _verified(output))
    report_path = output / "export_report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    figures(FAULT, *chain_figures(chain, chain.left, _verified(output)))
    return chain, report, output


def _verified(output):
    """Whether `output` holds an export whose report says every artifact verified."""
    report_path = output / "export_report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return bool(report) and all(entry["verified"] for entry in report["artifacts"].values())


def test_every_kill_landed_and_the_last_rerun_finished(outcome):
    chain, _, _ = outcome
    assert chain.injected >= 5 and not chain.problems(), "\n".join(chain.problems())


def test_a_kill_leaves_nothing_at_the_destination(outcome):
    chain, _, _ = outcome
    assert all(chain.left)


def test_the_rerun_writes_a_verified_export(outcome):
    _, report, output = outcome
    assert sorted(os.listdir(output)) == ["export_report.json", "model.onnx"]
    assert report["artifacts"]["model.onnx"]["verified"]
