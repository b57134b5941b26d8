"""Run a kerasbert binary with its paths on `ram://` (TensorFlow's in-memory file system, the
stand-in here for `gs://` and `s3://`), and bring back what it wrote.

The binary runs in this process (`tests.binaries.run_binary`, its `main` as its console script
would run it), on a `ram://` folder that starts as a new process's would: `RAM_ROOT` is emptied,
then the given local inputs are copied there; afterwards all of `RAM_ROOT` is copied back to a
local folder the test reads, and removed. The binary runs in its own empty working folder, and
the result says whether a local folder named `ram:` appeared there (a `ram://` path used as a
local path).
"""

import contextlib
import os
from dataclasses import dataclass

from tests.binaries import run_binary

RAM_ROOT = "ram://kerasbert-test"


@dataclass
class RamRun:
    """What a binary run on `ram://` did: its exit status, its stderr and stdout, the local copy
    of what it left under `RAM_ROOT` (`files`), and whether it made a local `ram:` folder."""
    returncode: int
    stdout: str
    stderr: str
    files: str
    local_ram_folder_made: bool

    def path(self, *parts):
        return os.path.join(self.files, *parts)


@contextlib.contextmanager
def _working_folder(folder):
    previous = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def run_on_ram(binary, flags, tmp_path, inputs=None):
    """Run `kerasbert-<binary>` with `flags` (a list; `{ram}` in a flag stands for `RAM_ROOT`)
    after copying `inputs` ({path under RAM_ROOT: local file or folder}) there; for example
    `run_on_ram("vocab", ["--input_files={ram}/corpus.txt", "--output_dir={ram}/vocab", ...],
    tmp_path, inputs={"corpus.txt": local_corpus})`, then `run.path("vocab", "vocab.txt")`.
    """
    from kerasbert import file_system

    working_folder = tmp_path / "working-folder"
    working_folder.mkdir()
    files = str(tmp_path / "ram-copy")
    if file_system.exists(RAM_ROOT):  # what an earlier run left: a new process has none
        file_system.rmtree(RAM_ROOT)
    for name, local in (inputs or {}).items():
        destination = file_system.join(RAM_ROOT, name)
        file_system.makedirs(file_system.dirname(destination))
        if os.path.isdir(local):
            file_system.copy_tree(os.path.abspath(local), destination)
        else:
            file_system.copy(os.path.abspath(local), destination)
    try:
        with _working_folder(working_folder):
            completed = run_binary(binary.replace("-", "_"),
                                   *(flag.replace("{ram}", RAM_ROOT) for flag in flags))
    finally:
        if file_system.exists(RAM_ROOT):
            file_system.copy_tree(RAM_ROOT, files)
            file_system.rmtree(RAM_ROOT)
    return RamRun(completed.returncode, completed.stdout, completed.stderr, files,
                  os.path.exists(working_folder / "ram:"))
