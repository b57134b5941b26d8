"""Run a kerasbert binary in this process, as its console script would run it.

A new Python per binary run costs a TensorFlow import and the tracing of every function again
(~7 CPU s before the first useful step). Where a test's point is what the binary does, not that
it is a fresh process, `run_binary("pretrain", "--model_dir=...", ...)` calls the console
script's `run()` here instead: `sys.argv` is `["kerasbert-pretrain", *flags]`, the flags are
parsed by the binary's own absl definitions, and its errors end it through
`kerasbert.cli.one_line_errors` as they end the process. The result reads like a finished
process's: the exit status (a `SystemExit` message counts as status 1 and is written to
stderr, as the interpreter does; any other exception is printed as a traceback, status 1),
and what the binary wrote to `sys.stdout` and `sys.stderr`.

Binaries define flags of the same names (`--model_dir`, `--input_files`, ...) in absl's one
global `FLAGS`, so before each run the flags of every `kerasbert.cli` module are removed and
the binary's module (and the flag modules it imports) are imported afresh. What a run changes
in the process is put back afterwards: the global dtype policy, the signal handlers, the
environment and `sys.argv`.

Keep a real process where the process is the point: kill -9, Ctrl-C and SIGTERM, start-up
(`--help` without TensorFlow), import isolation, a console script's whole stderr (TensorFlow's
C++ start-up lines go to file descriptor 2, which this does not see).
"""

import contextlib
import dataclasses
import importlib
import io
import os
import signal
import sys
import traceback

CLI_PACKAGE = "kerasbert.cli"


@dataclasses.dataclass
class BinaryRun:
    """A binary run's exit status and output, named as `subprocess.CompletedProcess` names them."""

    args: list
    returncode: int
    stdout: str
    stderr: str


def forget_binary_flags():
    """Remove the absl flags of every `kerasbert.cli` module, and those modules, so that the
    next binary imported defines its own."""
    from absl import flags

    defined = flags.FLAGS.flags_by_module_dict()
    for module_name, module_flags in list(defined.items()):
        if module_name.startswith(CLI_PACKAGE + "."):
            for flag in list(module_flags):  # deleting a flag shortens its module's list
                for name in {flag.name, flag.short_name} - {None}:
                    if name in flags.FLAGS:
                        delattr(flags.FLAGS, name)
    package = sys.modules.get(CLI_PACKAGE)
    for name in [name for name in sys.modules if name.startswith(CLI_PACKAGE + ".")]:
        del sys.modules[name]
        # `from kerasbert.cli import instance_flags` takes the package's attribute if it is set.
        if package is not None and name.count(".") == CLI_PACKAGE.count(".") + 1:
            vars(package).pop(name.rsplit(".", 1)[1], None)
    flags.FLAGS.unparse_flags()


def exit_status(code):
    """The status a process ends with after `SystemExit(code)`: None is 0, an int itself, any
    other value (a message) 1."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


@contextlib.contextmanager
def _process_state_kept():
    """Put back what a binary's run changes in the process: dtype policy, signal handlers,
    environment, `sys.argv`, working folder."""
    import keras

    policy = keras.config.dtype_policy()
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    environment, argv, folder = dict(os.environ), list(sys.argv), os.getcwd()
    try:
        yield
    finally:
        keras.config.set_dtype_policy(policy)
        for number, handler in handlers.items():
            signal.signal(number, handler)
        os.environ.clear()
        os.environ.update(environment)
        sys.argv[:] = argv
        os.chdir(folder)
        forget_binary_flags()


def run_binary(binary, *flags):
    """Run `kerasbert-<binary>` (`binary` is its module in `kerasbert.cli`, e.g. "pretrain",
    "create_pretraining_data") with `flags` in this process; a `BinaryRun`.

    >>> run = run_binary("vocab", "--input_files=corpus.txt", "--type=wordpiece",
    ...                  "--vocab_size=0", "--output_dir=vocab")
    >>> run.returncode, run.stderr
    (1, 'kerasbert-vocab: error: flag --vocab_size=0: 0 is not a positive integer\\n')
    """
    program = "kerasbert-" + binary.replace("_", "-")
    arguments = [str(flag) for flag in flags]
    stdout, stderr = io.StringIO(), io.StringIO()
    status = 0
    with _process_state_kept(), contextlib.redirect_stdout(stdout), \
            contextlib.redirect_stderr(stderr):
        forget_binary_flags()
        module = importlib.import_module(f"{CLI_PACKAGE}.{binary}")
        sys.argv = [program, *arguments]
        try:
            module.run()
        except SystemExit as exit_:
            if exit_.code is not None and not isinstance(exit_.code, int):
                print(exit_.code, file=sys.stderr)
            status = exit_status(exit_.code)
        except Exception:  # noqa: BLE001 - what the interpreter prints for an uncaught error
            traceback.print_exc()
            status = 1
    return BinaryRun([program, *arguments], status, stdout.getvalue(), stderr.getvalue())
