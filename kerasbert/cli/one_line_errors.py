"""How a binary reports an expected error: one line, the binary's name first, exit status 1,
no traceback."""

import re
import sys

from absl import app

# TensorFlow prints a failed `tf.debugging.Assert` as "assertion failed: [part] [part] ...".
_ASSERTION = re.compile(r"assertion failed: ((?:\[[^\]\n]*\] ?)+)")


def _assertion_message(error):
    """The text of the input check that failed in TensorFlow (a bad corpus line, a damaged
    TFRecord, a record of the wrong length), or None if `error` is some other error."""
    match = _ASSERTION.search(str(error))
    return match and " ".join(re.findall(r"\[([^\]\n]*)\]", match.group(1)))


def run_reporting_errors(main, program):
    """`absl.app.run(main)`, with an expected error from `main` reported as one line
    `"<program>: error: <message>"` (whitespace collapsed) and exit status 1: a `ValueError`, an
    `OSError`, or a failed input check inside TensorFlow (`tf.debugging.Assert` in a `tf.data`
    pipeline or a model, e.g. a truncated TFRecord named with its file and record number)."""
    def main_reporting_errors(argv):
        try:
            main(argv)
        except (ValueError, OSError) as error:
            raise SystemExit(f"{program}: error: {' '.join(str(error).split())}") from None
        except Exception as error:
            tensorflow = sys.modules.get("tensorflow")
            message = (_assertion_message(error)
                       if tensorflow is not None and isinstance(error, tensorflow.errors.OpError) else None)
            if message is None:
                raise
            raise SystemExit(f"{program}: error: {' '.join(message.split())}") from None
    app.run(main_reporting_errors)
