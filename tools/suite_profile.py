"""Where the test suite's time goes: a table by kind of test and the slowest tests, from pytest's
own durations (BUILD.md, "Where the time goes").

    .venv/bin/python tools/suite_profile.py                  # runs the whole suite, then the tables
    .venv/bin/python tools/suite_profile.py -- -m "not slow" # pytest arguments after --
    .venv/bin/python tools/suite_profile.py --log ci.log     # the tables of a run already made

Without `--log` it runs `python -m pytest --durations=0 --durations-min=0` (plus any arguments
after `--`) from the repository root, shows its output as it comes, times it, and prints the
tables after it; the exit status is pytest's. With `--log FILE` it reads the output of a run made with
`--durations=0` (CI's log, say: `PYTEST_ADDOPTS="--durations=0 --durations-min=0" bash .ci/run
> ci.log`; without `--durations-min=0` pytest leaves out the tests under 5 ms, which the "tests"
column then does not count).

A test's seconds are its setup, call and teardown together, so a module-scoped fixture (a
trained model, an export) counts in the test that made it. The seconds are worker seconds: with
two workers, the kinds add up to about twice the wall clock. `--markdown` prints Markdown.
"""

import argparse
import collections
import re
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent

# "12.34s call     tests/export/test_x.py::test_y[param]", as `--durations` prints it.
DURATION_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*?)\s*$")
# "==== 1873 passed, 2 skipped in 3989.12s (1:06:29) ====", pytest's last line.
SUMMARY_LINE = re.compile(r"^=+ (.*) in (\d+(?:\.\d+)?)s(?: \([0-9:]+\))? =+$")

# The kinds, first match wins; a module that matches nothing is "unit and parity".
BENCHMARK_SMOKES = "benchmark smokes"
FAULT_INJECTION = "fault injection"
LEARNING_PROOFS = "learning proofs"
DOCS = "docs"
EXPORT = "export"
BINARIES = "binaries"
UNIT_AND_PARITY = "unit and parity"
KINDS = (UNIT_AND_PARITY, BINARIES, LEARNING_PROOFS, FAULT_INJECTION, EXPORT, DOCS,
         BENCHMARK_SMOKES)
KIND_RULES = (
    (BENCHMARK_SMOKES, re.compile(r"^tests/test_benchmark_smokes\.py")),
    (FAULT_INJECTION, re.compile(r"^tests/reliability/")),
    (LEARNING_PROOFS, re.compile(
        r"^tests/training/test_(learning|finetune_learning|distillation_proof|"
        r"finetune_tasks_learn|bfloat16|embedding_learning)\.py")),
    (DOCS, re.compile(r"^tests/test_(docs|docstrings)\.py")),
    (EXPORT, re.compile(r"^tests/export/")),
    # Modules whose tests run the console scripts (in-process `main` or a new process).
    (BINARIES, re.compile(
        r"^tests/(.*_cli\.py|test_demo\.py|test_binary_errors\.py|test_startup\.py|"
        r"test_packaging\.py|data/test_(create_pretraining_data|distributed_creation|"
        r"data_service|document_cap)\.py|training/test_(preemption|distribute|"
        r"text_embedding_finetune|finetune_hf_folders)\.py|"
        r".*remote_paths\.py)")),
)


def kind_of(test_id):
    """The kind of the test `test_id` ("tests/x.py::test_y"), by its module's path.

    >>> kind_of("tests/reliability/test_kill_vocab.py::test_kills"), kind_of("tests/test_config.py::t")
    ('fault injection', 'unit and parity')
    """
    path = test_id.split("::", 1)[0]
    return next((kind for kind, rule in KIND_RULES if rule.match(path)), UNIT_AND_PARITY)


def read_durations(lines):
    """({test id: seconds, setup + call + teardown}, pytest's summary line's (outcome, seconds)
    or None) from a pytest run's output lines."""
    seconds, summary = collections.defaultdict(float), None
    for line in lines:
        match = DURATION_LINE.match(line)
        if match:
            seconds[match.group(3)] += float(match.group(1))
            continue
        match = SUMMARY_LINE.match(line.strip())
        if match:
            summary = (match.group(1), float(match.group(2)))
    return dict(seconds), summary


def by_kind(seconds):
    """[(kind, number of tests, seconds)] in `KINDS` order, for the tests in `seconds`."""
    counts, totals = collections.Counter(), collections.defaultdict(float)
    for test_id, value in seconds.items():
        counts[kind_of(test_id)] += 1
        totals[kind_of(test_id)] += value
    return [(kind, counts[kind], totals[kind]) for kind in KINDS]


def table(header, rows, markdown):
    """`rows` (tuples of str) under `header`, aligned, or a Markdown table."""
    if markdown:
        return "\n".join("| " + " | ".join(row) + " |"
                         for row in [header, ["---"] * len(header), *rows])
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) if column == 0 else cell.rjust(width)
                               for column, (cell, width) in enumerate(zip(row, widths)))
                     for row in [header, *rows])


def report(seconds, summary, wall_seconds=None, slowest=20, markdown=False):
    """The tables: worker seconds by kind, and the `slowest` tests."""
    total = sum(seconds.values())
    kinds = [(kind, str(count), f"{value:.0f}", f"{100 * value / total:.1f}%" if total else "-")
             for kind, count, value in by_kind(seconds)]
    kinds.append(("total", str(len(seconds)), f"{total:.0f}", "100%"))
    ranked = sorted(seconds.items(), key=lambda item: -item[1])[:slowest]
    slow = [(test_id, kind_of(test_id), f"{value:.1f}") for test_id, value in ranked]
    lines = []
    if summary:
        lines.append(f"pytest: {summary[0]} in {summary[1]:.0f} s")
    if wall_seconds is not None:
        lines.append(f"wall clock of the pytest command: {wall_seconds:.0f} s")
    lines += ["", table(("kind", "tests", "worker s", "share"), kinds, markdown), "",
              table((f"{len(slow)} slowest tests", "kind", "s"), slow, markdown)]
    return "\n".join(lines)


def run_pytest(arguments):
    """Run the suite with `--durations=0`, echoing its output; (lines, exit status, seconds)."""
    command = [sys.executable, "-m", "pytest", "--durations=0", "--durations-min=0", *arguments]
    start, lines = time.monotonic(), []
    with subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as process:
        for line in process.stdout:
            sys.stdout.write(line)
            lines.append(line.rstrip("\n"))
    return lines, process.returncode, time.monotonic() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help="the output of a pytest run made with "
                                                 "--durations=0 (default: run the suite now)")
    parser.add_argument("--slowest", type=int, default=20, help="how many slowest tests to list")
    parser.add_argument("--markdown", action="store_true", help="Markdown tables")
    parser.add_argument("pytest_arguments", nargs="*", help="after --: passed to pytest")
    options = parser.parse_args(argv)
    status, wall = 0, None
    if options.log:
        lines = options.log.read_text(encoding="utf-8", errors="replace").splitlines()
    else:
        lines, status, wall = run_pytest(options.pytest_arguments)
    seconds, summary = read_durations(lines)
    if not seconds:
        print("no --durations lines in the output: run pytest with --durations=0",
              file=sys.stderr)
        return status or 1
    print("\n" + report(seconds, summary, wall, options.slowest, options.markdown))
    return status


if __name__ == "__main__":
    sys.exit(main())
