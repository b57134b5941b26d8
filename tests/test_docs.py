"""Every example in README.md and docs/*.md runs.

Per page, in document order, in one temporary working directory: every ```python block (all
of a page's blocks share one namespace, as one script would) and every ```bash block that runs
a kerasbert binary (with this venv's bin first on PATH; a command that is one binary with
literal flags runs in this process, `tests.binaries`, the rest in bash). Left out, by name: README's set-up
section, whose commands create the venv and install kerasbert into it (the test runs inside
that venv). A failing block fails its page's test, naming the file and line.
"""

import dataclasses
import os
import re
import shlex
import subprocess
import sys
import traceback
from pathlib import Path

import keras
import pytest

from tests.binaries import run_binary

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md"] + sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md"))
INDEX_PAGE = "docs/README.md"
SETUP_PAGE, SETUP_SECTION = "README.md", "Set up on a fresh machine"
RUN_LANGUAGES = ("python", "bash")
BINARY = re.compile(r"(?<![\w-])kerasbert-[a-z][a-z-]*")
# What makes a command more than one program with literal arguments.
SHELL_SYNTAX = re.compile(r"[$`|&;<>(){}*?]|^\s*\w+=")
COMPOUND_KEYWORDS = {"for", "while", "until", "if", "case", "select", "function"}
INSTALLS = re.compile(r"pip install|-m venv")
LINK = re.compile(r"\]\(([^)\s]+)\)")
BASH_TIMEOUT_SECONDS = 600


@dataclasses.dataclass(frozen=True)
class Block:
    """A fenced code block: its page, the line of its first code line, language and section."""

    page: str
    line: int
    language: str
    code: str
    section: str

    @property
    def where(self):
        return f"{self.page}:{self.line}"


def read_blocks(page):
    """The fenced code blocks of `page`, with the heading each one stands under."""
    blocks, section, fence = [], "", None
    for number, line in enumerate((ROOT / page).read_text(encoding="utf-8").splitlines(), 1):
        if fence is None:
            if line.startswith("```"):
                fence = (line[3:].strip(), number + 1, [])
            elif line.startswith("#"):
                section = line.lstrip("#").strip()
        elif line.startswith("```"):
            language, first, lines = fence
            blocks.append(Block(page, first, language, "\n".join(lines) + "\n", section))
            fence = None
        else:
            fence[2].append(line)
    assert fence is None, f"{page}:{fence[1] - 1}: code block never closed"
    return blocks


def is_setup(block):
    return block.page == SETUP_PAGE and block.section == SETUP_SECTION


def runs(block):
    """Whether the test runs `block`: Python always; shell when it runs a kerasbert binary,
    except README's set-up commands."""
    if block.language == "python":
        return True
    return block.language == "bash" and bool(BINARY.search(block.code)) and not is_setup(block)


def run_python(block, namespace):
    # Blank lines in front keep the page's line numbers in tracebacks.
    code = compile("\n" * (block.line - 1) + block.code, block.page, "exec")
    try:
        exec(code, namespace)
    except Exception as error:  # noqa: BLE001 (any failure of a documented example is reported)
        frames = [frame for frame in traceback.extract_tb(error.__traceback__)
                  if frame.filename == block.page]
        line = frames[-1].lineno if frames else block.line
        pytest.fail(f"{block.page}:{line}: the python block at line {block.line} failed: "
                    f"{type(error).__name__}: {error}\n\n{traceback.format_exc()}", pytrace=False)


def commands(code):
    """The commands of a bash block, one per line with its continuation lines joined; comments
    and blank lines left out."""
    joined = re.sub(r"\\\n\s*", "", code)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def in_process_binary(command):
    """`(binary module, flags)` where `command` is one kerasbert binary with literal flags (no
    expansion, redirection, pipe or background job) that `tests.binaries` can run in this
    process; None otherwise."""
    if SHELL_SYNTAX.search(command):
        return None
    program, *flags = shlex.split(command)
    if not BINARY.fullmatch(program):
        return None
    return program.removeprefix("kerasbert-").replace("-", "_"), flags


def run_bash(block, directory):
    """Run a bash block in `directory`. A command that is one kerasbert binary with literal
    flags runs in this process (`tests.binaries`: no TensorFlow start-up per command); the
    rest of the block runs in bash, in order, as it would."""
    lines = commands(block.code)
    if any(line.split()[0] in COMPOUND_KEYWORDS for line in lines):
        lines = [block.code]  # a loop or a condition runs in bash, whole
    pending = []
    for command in lines:
        binary = in_process_binary(command)
        if binary is None:
            pending.append(command)
            continue
        _run_in_bash("\n".join(pending), block, directory)
        pending = []
        module, flags = binary
        run = run_binary(module, *flags)
        if run.returncode != 0:
            _failed(block, run.returncode, run.stdout, run.stderr, f"`{command}` (in this process)")
    _run_in_bash("\n".join(pending), block, directory)


def _run_in_bash(code, block, directory):
    if not code:
        return
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=directory, env=env,
                            capture_output=True, text=True, timeout=BASH_TIMEOUT_SECONDS)
    if result.returncode != 0:
        _failed(block, result.returncode, result.stdout, result.stderr, "the bash block")


def _failed(block, status, stdout, stderr, what):
    pytest.fail(f"{block.where}: {what} exited with status {status}\n{block.code}\n"
                f"--- stdout (end) ---\n{stdout[-3000:]}\n--- stderr (end) ---\n{stderr[-3000:]}",
                pytrace=False)


@pytest.fixture
def keras_state():
    """Keras' global dtype policy as it was, restored after a page (a page may change it)."""
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.mark.slow  # ~3 min for all pages: each binary starts TensorFlow, exports verify
@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page, tmp_path, monkeypatch, keras_state):
    blocks = [block for block in read_blocks(page) if runs(block)]
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    for block in blocks:
        if block.language == "python":
            run_python(block, namespace)
        else:
            run_bash(block, tmp_path)


def test_only_the_setup_commands_are_left_out():
    blocks = [block for page in PAGES for block in read_blocks(page)]
    setup = [block for block in blocks if is_setup(block)]
    assert setup, f"{SETUP_PAGE} has no code under '## {SETUP_SECTION}'"
    assert all(INSTALLS.search(block.code) for block in setup), \
        [block.where for block in setup if not INSTALLS.search(block.code)]
    installing = [block.where for block in blocks if runs(block) and INSTALLS.search(block.code)]
    assert not installing, f"blocks that would install packages when the docs run: {installing}"
    unknown = [block.where for block in blocks
               if block.language not in RUN_LANGUAGES + ("", "text")]
    assert not unknown, f"code blocks in a language the test neither runs nor knows: {unknown}"


def test_every_stage_page_has_runnable_examples_and_is_indexed():
    index = (ROOT / INDEX_PAGE).read_text(encoding="utf-8")
    for page in PAGES:
        if page in (INDEX_PAGE, "README.md"):
            continue
        assert any(runs(block) for block in read_blocks(page)), f"{page} has no runnable example"
        assert f"({Path(page).name})" in index, f"{INDEX_PAGE} does not link {page}"


def test_relative_links_point_to_files():
    broken = []
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        for target in LINK.findall(text):
            path = target.split("#")[0]
            if path and "://" not in path and not (ROOT / page).parent.joinpath(path).exists():
                broken.append(f"{page}: {target}")
    assert not broken, broken


def test_a_failing_block_names_its_page_and_line(tmp_path):
    python = Block("docs/example.md", 10, "python", "x = 1\nraise ValueError('broken')\n", "")
    with pytest.raises(pytest.fail.Exception, match=r"docs/example\.md:11: the python block at "
                                                     r"line 10 failed: ValueError: broken"):
        run_python(python, {})
    bash = Block("docs/example.md", 20, "bash", "echo to stderr >&2\nexit 3\n", "")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)docs/example\.md:20: the bash block "
                                                     r"exited with status 3.*to stderr"):
        run_bash(bash, tmp_path)
    binary = Block("docs/example.md", 30, "bash", "kerasbert-vocab --type=wordpiece \\\n"
                   "    --input_files=missing.txt --vocab_size=50 --output_dir=out\n", "")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)docs/example\.md:30: `kerasbert-vocab "
                                                     r"--type=wordpiece --input_files=missing.txt "
                                                     r"--vocab_size=50 --output_dir=out` \(in this "
                                                     r"process\) exited with status 1.*--- stderr "
                                                     r"\(end\) ---\nkerasbert-vocab: [^\n]*"
                                                     r"missing\.txt"):
        run_bash(binary, tmp_path)


def test_a_bash_block_runs_its_binaries_in_process_and_the_rest_in_bash():
    assert commands("kerasbert-x --a=1 \\\n    --b='c d'\n# note\n\nls out\n") == [
        "kerasbert-x --a=1 --b='c d'", "ls out"]
    assert in_process_binary("kerasbert-create-pretraining-data --a=1 --b='c d'") == (
        "create_pretraining_data", ["--a=1", "--b=c d"])
    for command in ("kerasbert-vocab --input_files=\"$(python -c 1)\"", "ls records",
                    "kerasbert-vocab --x=1 &", "kerasbert-predict --a=1 | head", "A=1 kerasbert-vocab"):
        assert in_process_binary(command) is None, command


def test_a_loop_runs_in_bash_whole(tmp_path):
    loop = Block("docs/example.md", 40, "bash", "for n in 1 2; do\n  kerasbert-vocab --help > /dev/null\n"
                 "  echo $n >> runs.txt\ndone\n", "")
    run_bash(loop, tmp_path)
    assert (tmp_path / "runs.txt").read_text() == "1\n2\n"
