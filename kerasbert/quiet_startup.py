"""kerasbert's console scripts start without TensorFlow's C++ start-up messages on the terminal.

Loading TensorFlow prints lines such as "Could not find cuda drivers" and "All log messages
before absl::InitializeLog() is called are written to STDERR" straight to file descriptor 2,
before `TF_CPP_MIN_LOG_LEVEL` applies: to a user of a binary they are noise. A binary (a
`kerasbert-*` console script, or `python -m kerasbert.cli.<binary>`) imports TensorFlow once its
flags are parsed (`kerasbert.cli.one_line_errors`; `--help` never loads it) and starts its
devices with descriptor 2 sent to a temporary file (replayed if that fails) and C++ logging
below errors off unless `TF_CPP_MIN_LOG_LEVEL` is already set. Ctrl-C while a console script
starts ends it at once with one line, `<program>: interrupted`, and status 130
(`kerasbert.cli.one_line_errors` takes over once the flags are parsed). Python programs that
import kerasbert are left alone.
"""

import atexit
import contextlib
import os
import signal
import sys
import tempfile

CONSOLE_SCRIPT_PREFIX = "kerasbert-"
INTERRUPTED_EXIT_STATUS = 130  # 128 + SIGINT: what a shell reports for a process Ctrl-C ended


def is_console_script(program=None):
    """Whether `program` (default: this process's `sys.argv[0]`) is one of kerasbert's binaries.

    >>> is_console_script("/venv/bin/kerasbert-export"), is_console_script("/venv/bin/pytest")
    (True, False)
    """
    program = sys.argv[0] if program is None and sys.argv else program or ""
    return os.path.basename(program).startswith(CONSOLE_SCRIPT_PREFIX)


def exit_on_interrupt_while_starting():
    """Until the binary's `main` starts, Ctrl-C ends the process with status 130 and one line
    (written at exit, once file descriptor 2 is the terminal again), unless SIGINT is ignored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    program = os.path.basename(sys.argv[0])

    def interrupted(signum, frame):
        del signum, frame
        atexit.register(lambda: sys.stderr.write(f"{program}: interrupted\n"))
        raise SystemExit(INTERRUPTED_EXIT_STATUS)

    signal.signal(signal.SIGINT, interrupted)


@contextlib.contextmanager
def stderr_captured():
    """Send file descriptor 2 to a temporary file while the block runs; write what it caught
    to the real stderr only if the block raises an error (not when Ctrl-C ends it).

    >>> with stderr_captured():
    ...     _ = os.write(2, b"not shown")
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        except Exception:
            os.dup2(saved, 2)
            capture.seek(0)
            os.write(2, capture.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def import_tensorflow_quietly(start_devices=True):
    """Import TensorFlow as a binary should (see the module docstring). `start_devices=False`
    leaves the devices to the binary: a multi-worker or TPU strategy must configure the cluster
    before TensorFlow's context starts ("Collective ops must be configured at program
    startup"), so its device start-up messages are not hidden."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with stderr_captured():
        import tensorflow
        if start_devices:
            tensorflow.config.list_logical_devices()  # device start-up logs too ("cuInit")
