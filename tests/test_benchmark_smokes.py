"""Every benchmark script (every benchmarks/*.py with a `__main__` block; helpers have none)
runs its `--smoke` mode (tiny model and data: it checks that the script still runs, it measures
nothing), so that a benchmark cannot rot unnoticed. A script without `--smoke` fails.

All scripts run in ONE fresh process (tests/benchmark_smoke_runner.py), so TensorFlow is
imported once, not once per script; each script is its own test, judged on its part of that
process's output.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
BENCHMARKS = REPOSITORY / "benchmarks"
RUNNER = REPOSITORY / "tests" / "benchmark_smoke_runner.py"


def is_script(path):
    """Whether `path` has an `if __name__ == "__main__":` block at its top level."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"':
            return True
    return False


SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("*.py") if is_script(path))


def test_scripts_are_found():
    assert "pretraining_data.py" in SCRIPTS and "startup.py" in SCRIPTS
    assert "reporting.py" not in SCRIPTS and "keras_timing.py" not in SCRIPTS


def split_by_script(text):
    """{script: (verdict, its lines)} from the runner's marked stdout or stderr."""
    runs, lines = {}, []
    for line in text.splitlines():
        if line.startswith("BENCHMARK-SMOKE-START "):
            lines = []
        elif line.startswith("BENCHMARK-SMOKE-END "):
            name, verdict = line.split(" ", 2)[1:]
            runs[name] = (verdict, "\n".join(lines))
        else:
            lines.append(line)
    return runs


@pytest.fixture(scope="module")
def smoke_runs():
    """The runner's process (every script's smoke, one after another) and its output split by
    script: ({script: (verdict, stdout)}, {script: (verdict, stderr)}, process)."""
    completed = subprocess.run(
        [sys.executable, str(RUNNER), *(str(BENCHMARKS / name) for name in SCRIPTS)],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=1800)
    return split_by_script(completed.stdout), split_by_script(completed.stderr), completed


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke(smoke_runs, script):
    runs, errors, completed = smoke_runs
    assert script in runs, (f"{script}: the smoke process ended before it (exit status "
                            f"{completed.returncode}):\n{completed.stderr[-3000:]}")
    verdict, output = runs[script]
    assert verdict == "ok", f"{script} --smoke {verdict}; its stderr:\n{errors[script][1][-3000:]}"
    assert output.startswith("SMOKE RUN (--smoke)"), f"{script} --smoke printed:\n{output}"
    assert len(output.splitlines()) > 2, f"{script} --smoke printed no results:\n{output}"


def test_a_hung_script_ends_the_runner_with_its_traceback(tmp_path):
    """A smoke that never returns fails within the runner's per-script limit, naming the line
    where it waited, instead of holding the suite until the fixture's timeout."""
    hung = tmp_path / "hung.py"
    hung.write_text("import time\n\ndef wait():\n    time.sleep(600)\n\n"
                    "if __name__ == '__main__':\n    wait()\n")
    completed = subprocess.run(
        [sys.executable, "-c", "import sys, benchmark_smoke_runner as runner; "
         "runner.SCRIPT_TIME_LIMIT = 1; sys.exit(runner.main(sys.argv[1:]))", str(hung)],
        cwd=RUNNER.parent, capture_output=True, text=True, timeout=60)
    assert completed.returncode != 0
    assert "BENCHMARK-SMOKE-START hung.py" in completed.stdout
    assert "BENCHMARK-SMOKE-END" not in completed.stdout
    assert "Timeout" in completed.stderr and 'hung.py", line 4 in wait' in completed.stderr, \
        completed.stderr
