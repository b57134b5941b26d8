"""How a binary reports an expected error: one line, the binary's name first, exit status 1,
no traceback."""

from absl import app


def run_reporting_errors(main, program):
    """`absl.app.run(main)`, with a `ValueError` or `OSError` from `main` reported as one line
    `"<program>: error: <message>"` (whitespace collapsed) and exit status 1."""
    def main_reporting_errors(argv):
        try:
            main(argv)
        except (ValueError, OSError) as error:
            raise SystemExit(f"{program}: error: {' '.join(str(error).split())}") from None
    app.run(main_reporting_errors)
