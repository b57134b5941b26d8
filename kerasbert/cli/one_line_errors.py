"""How every kerasbert binary ends when it cannot finish: one line on stderr, the binary's name
first, and an exit status; with `--traceback`, the full traceback after that line.

- Bad input, as kerasbert itself reports it: a flag that does not parse or is out of bounds, a
  usage error, an error raised by a `raise` statement in kerasbert's own code or of a class
  kerasbert defines (bad input, a damaged file, a JSON run file naming its field), an error
  class the binary names (`expected`, by dotted name, so that naming it imports nothing), an
  `OSError` about a file (it names the file), a failed input check inside TensorFlow
  (`tf.debugging.Assert`: the check's own text) or a file TensorFlow cannot find, read or
  write: `<program>: error: <message>`, status 1.
- Anything else (a `TypeError`, a shape or broadcasting error raised inside numpy or
  TensorFlow, an internal TensorFlow error) is most likely a bug, and its line says so:
  `<program>: unexpected <class>: <message>; ...rerun with --traceback and report...`, status
  1.
- Ctrl-C (`KeyboardInterrupt`): `<program>: interrupted` and what was saved, status 130. The
  training loop saves a checkpoint first (`kerasbert.training.preemption`).

A binary's module imports only absl and light modules, so that `--help` and a flag error answer
at once; TensorFlow is imported (quietly: `kerasbert.quiet_startup`) once the flags are parsed,
before `main` runs and imports the library.
"""

import importlib.util
import os
import signal
import sys
import traceback

from absl import app, flags

from kerasbert.cli.binary_help import binary_help, wants_help
from kerasbert.op_errors import assertion_message, op_error_message
from kerasbert.quiet_startup import INTERRUPTED_EXIT_STATUS, import_tensorflow_quietly

flags.DEFINE_boolean("traceback", False, "After the one-line error, print the full traceback "
                     "(to see where an error came from, or to report an unexpected one).")

def one_line(text):
    """`text` with its whitespace (newlines too) collapsed to single spaces."""
    return " ".join(str(text).split())


def interrupted_line(program, detail=None):
    """The line a binary ends with after Ctrl-C: `<program>: interrupted`, then `detail` (the
    checkpoint saved, how to continue) if any."""
    detail = one_line(detail or "")
    return f"{program}: interrupted" + (f"; {detail}" if detail else "")


def _exit_interrupted(program, interrupt, detail=None):
    sys.stdout.flush()
    if sys.stderr.isatty():
        sys.stderr.write("\n")  # after the "^C" the terminal echoed, or a progress bar
    sys.stderr.write(interrupted_line(program, str(interrupt) or detail) + "\n")
    sys.stderr.flush()
    raise SystemExit(INTERRUPTED_EXIT_STATUS)


def _is_expected(error, expected):
    """Whether `error` is an instance of a class named in `expected` ("package.module.Class"). A
    class whose module was never imported cannot have raised it."""
    for name in expected:
        module, _, class_name = name.rpartition(".")
        cls = getattr(sys.modules.get(module), class_name, None)
        if cls is not None and isinstance(error, cls):
            return True
    return False


# TensorFlow's errors about files: a path that is missing, unreadable, damaged or in the way.
_FILE_OP_ERRORS = ("NotFoundError", "PermissionDeniedError", "DataLossError",
                   "AlreadyExistsError")


def _own_folders():
    """The folders of kerasbert's code: the package's and kerasbert.export's (which installs
    from a folder of its own), found without importing it."""
    export = importlib.util.find_spec("kerasbert.export")
    return [os.path.dirname(os.path.dirname(__file__)),
            *(export.submodule_search_locations if export else [])]


def _raised_by_kerasbert(error):
    """Whether `error` was raised by a `raise` statement in kerasbert's own code, or is of a
    class kerasbert defines."""
    if type(error).__module__.split(".")[0] == "kerasbert":
        return True
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    own = os.path.abspath(last.filename).startswith(tuple(
        os.path.abspath(folder) + os.sep for folder in _own_folders()))
    return own and (last.line or "").lstrip().startswith("raise")


def is_input_error(error):
    """Whether `error` reports bad input, as the module docstring lists (else it is
    unexpected)."""
    if isinstance(error, (app.UsageError, flags.Error)):
        return True
    if isinstance(error, OSError) and (error.filename is not None or _raised_by_kerasbert(error)):
        return True
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None and isinstance(error, tensorflow.errors.OpError):
        return (assertion_message(error) is not None
                or type(error).__name__ in _FILE_OP_ERRORS)
    return _raised_by_kerasbert(error)


def unexpected_line(program, error, message):
    """The line of an unexpected error: what it was, and how to report it."""
    return (f"{program}: unexpected {type(error).__name__}: {message}; this looks like a bug in "
            "kerasbert rather than bad input: rerun the same command with --traceback and "
            "report the command and all it printed to the kerasbert developers")


def _exit_with_line(program, error, message, expected=False):
    """End the binary with `error`'s one line (and its traceback after it with --traceback)."""
    message = one_line(message)
    line = (f"{program}: error: {message}" if expected or is_input_error(error)
            else unexpected_line(program, error, message))
    if getattr(flags.FLAGS, "traceback", False) and flags.FLAGS.is_parsed():
        sys.stdout.flush()
        sys.stderr.write(line + "\n")
        traceback.print_exception(error, file=sys.stderr)
        sys.stderr.flush()
        raise SystemExit(1)
    raise SystemExit(line)


# Strategies that connect to a cluster before TensorFlow's devices may start.
CLUSTER_STRATEGIES = ("multi_worker_mirrored", "tpu")


def _joins_a_cluster():
    """Whether the binary's parsed `--strategy` flag names a strategy of `CLUSTER_STRATEGIES`."""
    return getattr(flags.FLAGS, "strategy", None) in CLUSTER_STRATEGIES


def run_reporting_errors(main, program, expected=(), interrupted=None):
    """`absl.app.run(main)`, ending as the module docstring says.

    Args:
        main: the binary's `main(argv)`.
        program: its name, e.g. `"kerasbert-pretrain"`.
        expected: dotted names of error classes besides `ValueError` and `OSError` that are
            reported as one line (e.g. `"kerasbert.training.loop.TrainingError"`).
        interrupted: what to say after "interrupted" when Ctrl-C came with nothing to say
            (e.g. "run the same command again to continue").
    """
    def parse_flags(argv):
        if wants_help(argv):
            sys.stdout.write(binary_help(main.__module__, program))
            raise SystemExit(0)
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            raise SystemExit(f"{program}: error: {one_line(error)}") from None

    def main_reporting_errors(argv):
        try:
            import_tensorflow_quietly(start_devices=not _joins_a_cluster())
            main(argv)
        except KeyboardInterrupt as interrupt:
            _exit_interrupted(program, interrupt, interrupted)
        except Exception as error:
            tensorflow = sys.modules.get("tensorflow")
            is_op_error = tensorflow is not None and isinstance(error, tensorflow.errors.OpError)
            _exit_with_line(program, error, op_error_message(error) if is_op_error else error,
                            expected=_is_expected(error, expected))

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        # Ctrl-C is a KeyboardInterrupt again (a console script exits at once while it starts:
        # `kerasbert.quiet_startup`).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        app.run(main_reporting_errors, flags_parser=parse_flags)
    except KeyboardInterrupt as interrupt:  # while flags were parsed, before main
        _exit_interrupted(program, interrupt, interrupted)
