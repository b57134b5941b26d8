"""Every example in README.md and docs/*.md runs.

Per page, in document order, in one temporary working directory: every ```python block (all
of a page's blocks share one namespace, as one script would) and every ```bash block that runs
a kerasbert binary (with this venv's bin first on PATH). Left out, by name: README's set-up
section, whose commands create the venv and install kerasbert into it (the test runs inside
that venv). A failing block fails its page's test, naming the file and line.
"""

import dataclasses
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import keras
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md"] + sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md"))
INDEX_PAGE = "docs/README.md"
SETUP_PAGE, SETUP_SECTION = "README.md", "Set up on a fresh machine"
RUN_LANGUAGES = ("python", "bash")
BINARY = re.compile(r"(?<![\w-])kerasbert-[a-z]")
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


def run_bash(block, directory):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=directory, env=env,
                            capture_output=True, text=True, timeout=BASH_TIMEOUT_SECONDS)
    if result.returncode != 0:
        pytest.fail(f"{block.where}: the bash block exited with status {result.returncode}\n"
                    f"{block.code}\n--- stdout (end) ---\n{result.stdout[-3000:]}\n"
                    f"--- stderr (end) ---\n{result.stderr[-3000:]}", pytrace=False)


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
