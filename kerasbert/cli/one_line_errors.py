"""How every kerasbert binary ends when it cannot finish: one line on stderr, the binary's name
first, and an exit status, never a traceback.

- A flag that does not parse or is out of bounds, a usage error, a `ValueError` or `OSError`
  (bad input, a missing or damaged file, a JSON run file naming its field), or an error class
  the binary names (`expected`, by dotted name, so that naming it imports nothing):
  `<program>: error: <message>`, status 1.
- A `tf.errors.OpError` from inside TensorFlow: its first message line (for a failed input
  check, `tf.debugging.Assert`, the check's own text), status 1.
- Ctrl-C (`KeyboardInterrupt`): `<program>: interrupted` and what was saved, status 130. The
  training loop saves a checkpoint first (`kerasbert.training.preemption`).

Anything else is a bug and keeps its traceback.

A binary's module imports only absl and light modules, so that `--help` and a flag error answer
at once; TensorFlow is imported (quietly: `kerasbert.quiet_startup`) once the flags are parsed,
before `main` runs and imports the library.
"""

import re
import signal
import sys

from absl import app, flags

from kerasbert.cli.binary_help import binary_help, wants_help
from kerasbert.quiet_startup import INTERRUPTED_EXIT_STATUS, import_tensorflow_quietly

# TensorFlow prints a failed `tf.debugging.Assert` as "assertion failed: [part] [part] ...".
_ASSERTION = re.compile(r"assertion failed: ((?:\[[^\]\n]*\] ?)+)")
# Noise around an op error's own text: the function it ran in, the op's name.
_FUNCTION_NODE = re.compile(r"^\{\{function_node [^}]*\}\}\s*")
_OP_SUFFIX = re.compile(r"\s*\[Op:[^\]]*\](?:\s*name:.*)?$")


def _assertion_message(error):
    """The text of the input check that failed in TensorFlow (a bad corpus line, a damaged
    TFRecord, a record of the wrong length), or None if `error` is some other error."""
    match = _ASSERTION.search(str(error))
    return match and " ".join(re.findall(r"\[([^\]\n]*)\]", match.group(1)))


def op_error_message(error):
    """What a binary says of a `tf.errors.OpError`: the failed input check's text, else the
    first line of its message without TensorFlow's function and op names."""
    assertion = _assertion_message(error)
    if assertion:
        return assertion
    lines = [line.strip() for line in str(getattr(error, "message", error)).splitlines()]
    first = next((line for line in lines if line), type(error).__name__)
    return _OP_SUFFIX.sub("", _FUNCTION_NODE.sub("", first)) or type(error).__name__


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
        except (ValueError, OSError, app.UsageError) as error:
            raise SystemExit(f"{program}: error: {one_line(error)}") from None
        except Exception as error:
            if _is_expected(error, expected):
                raise SystemExit(f"{program}: error: {one_line(error)}") from None
            tensorflow = sys.modules.get("tensorflow")
            if tensorflow is None or not isinstance(error, tensorflow.errors.OpError):
                raise
            raise SystemExit(f"{program}: error: {one_line(op_error_message(error))}") from None

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        # Ctrl-C is a KeyboardInterrupt again (a console script exits at once while it starts:
        # `kerasbert.quiet_startup`).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        app.run(main_reporting_errors, flags_parser=parse_flags)
    except KeyboardInterrupt as interrupt:  # while flags were parsed, before main
        _exit_interrupted(program, interrupt, interrupted)
