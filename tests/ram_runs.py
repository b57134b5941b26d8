"""Run a kerasbert binary with its paths on `ram://` (TensorFlow's in-memory file system, the
stand-in here for `gs://` and `s3://`), and bring back what it wrote.

`ram://` lives inside one process, so the binary runs in a fresh Python process that first
copies the given local inputs to `ram://`, then runs the binary's `main` as its console script
would (`sys.argv[0]` is `kerasbert-<name>`), then copies all of its `ram://` folder back to a
local folder the test reads. The process runs in its own empty working folder, and the result
says whether a local folder named `ram:` appeared there (a `ram://` path used as a local path).

Used as a program by `run_on_ram` (`python -m tests.ram_runs SPEC.json`).
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def run_on_ram(binary, flags, tmp_path, inputs=None, timeout=900, env=None):
    """Run `kerasbert-<binary>` with `flags` (a list; `{ram}` in a flag stands for `RAM_ROOT`)
    after copying `inputs` ({path under RAM_ROOT: local file or folder}) there; for example
    `run_on_ram("vocab", ["--input_files={ram}/corpus.txt", "--output_dir={ram}/vocab", ...],
    tmp_path, inputs={"corpus.txt": local_corpus})`, then `run.path("vocab", "vocab.txt")`.
    """
    working_folder = tmp_path / "working-folder"
    working_folder.mkdir()
    files = tmp_path / "ram-copy"
    spec = tmp_path / "ram-run.json"
    spec.write_text(json.dumps({
        "binary": binary,
        "flags": [flag.replace("{ram}", RAM_ROOT) for flag in flags],
        "inputs": {name: os.path.abspath(local) for name, local in (inputs or {}).items()},
        "files": str(files),
    }))
    process_env = dict(os.environ, PYTHONPATH=REPOSITORY, **(env or {}))
    completed = subprocess.run([sys.executable, "-m", "tests.ram_runs", str(spec)],
                               cwd=working_folder, env=process_env, capture_output=True,
                               text=True, timeout=timeout)
    return RamRun(completed.returncode, completed.stdout, completed.stderr, str(files),
                  os.path.exists(working_folder / "ram:"))


def _main(spec_path):
    with open(spec_path, encoding="utf-8") as file:
        spec = json.load(file)
    import importlib

    from kerasbert import file_system

    for name, local in spec["inputs"].items():
        destination = file_system.join(RAM_ROOT, name)
        file_system.makedirs(file_system.dirname(destination))
        if os.path.isdir(local):
            file_system.copy_tree(local, destination)
        else:
            file_system.copy(local, destination)
    module = importlib.import_module(f"kerasbert.cli.{spec['binary'].replace('-', '_')}")
    sys.argv = [f"kerasbert-{spec['binary']}", *spec["flags"]]
    status = 0
    try:
        module.run()
    except SystemExit as exit_:  # as the interpreter ends: a message is printed, status 1
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        if file_system.exists(RAM_ROOT):
            file_system.copy_tree(RAM_ROOT, spec["files"])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    _main(sys.argv[1])
