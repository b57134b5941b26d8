"""kerasbert's console scripts start without TensorFlow's C++ start-up messages on the terminal.

Loading TensorFlow prints lines such as "Could not find cuda drivers" and "All log messages
before absl::InitializeLog() is called are written to STDERR" straight to file descriptor 2,
before `TF_CPP_MIN_LOG_LEVEL` applies: to a user of a binary they are noise. A `kerasbert-*`
console script imports TensorFlow and starts its devices with descriptor 2 sent to a temporary
file (replayed if that fails) and C++ logging below errors off unless `TF_CPP_MIN_LOG_LEVEL` is already set.
Python programs that import kerasbert are left alone.
"""

import contextlib
import os
import sys
import tempfile

CONSOLE_SCRIPT_PREFIX = "kerasbert-"


def is_console_script(program=None):
    """Whether `program` (default: this process's `sys.argv[0]`) is one of kerasbert's binaries.

    >>> is_console_script("/venv/bin/kerasbert-export"), is_console_script("/venv/bin/pytest")
    (True, False)
    """
    program = sys.argv[0] if program is None and sys.argv else program or ""
    return os.path.basename(program).startswith(CONSOLE_SCRIPT_PREFIX)


@contextlib.contextmanager
def stderr_captured():
    """Send file descriptor 2 to a temporary file while the block runs; write what it caught
    to the real stderr only if the block raises.

    >>> with stderr_captured():
    ...     _ = os.write(2, b"not shown")
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            capture.seek(0)
            os.write(2, capture.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def import_tensorflow_quietly():
    """Import TensorFlow as a console script should (see the module docstring)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with stderr_captured():
        import tensorflow
        tensorflow.config.list_logical_devices()  # device start-up logs too ("cuInit")
