"""Run benchmark scripts' `--smoke` modes one after another in this one process (TensorFlow is
imported once, not once per script): `python tests/benchmark_smoke_runner.py SCRIPT...`.

Each script runs as `python SCRIPT --smoke` would run it (`runpy`, `__name__ == "__main__"`, a
fresh `sys.argv`, its folder first on `sys.path`), between two marker lines on stdout and stderr:
`BENCHMARK-SMOKE-START <name>` and `BENCHMARK-SMOKE-END <name> ok` or `... FAILED <error>`. A
script fails when it raises, or exits with a status other than 0 or None (argparse's exit 2 for
an unknown `--smoke` among them). Flags an absl script defined are removed before the next one
defines its own. The exit status is 1 if any script failed.

A script still running after `SCRIPT_TIME_LIMIT` seconds ends the process with every thread's
traceback on stderr (`faulthandler`: it fires even while a thread waits inside TensorFlow), so a
hung smoke fails in minutes and shows where it waited.
"""

import faulthandler
import os
import runpy
import sys
import traceback

SCRIPT_TIME_LIMIT = 300


def forget_absl_flags():
    """Remove the absl flags a script run as `__main__` defined (absl would keep the first
    script's flags and defaults for the next script defining a flag of the same name)."""
    flags = sys.modules.get("absl.flags")
    if flags is None:
        return
    for flag in flags.FLAGS.flags_by_module_dict().get("__main__", []):
        for name in {flag.name, flag.short_name} - {None}:
            if name in flags.FLAGS:
                delattr(flags.FLAGS, name)
    flags.FLAGS.unparse_flags()


def run_smoke(path):
    """None if `python path --smoke` ran to the end here, else what went wrong."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, "--smoke"]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    faulthandler.dump_traceback_later(SCRIPT_TIME_LIMIT, exit=True)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            return f"exited with {exit_.code!r}"
    except BaseException as error:  # noqa: BLE001 - any error of the script is its failure
        traceback.print_exc()
        return f"{type(error).__name__}: {error}".splitlines()[0]
    finally:
        faulthandler.cancel_dump_traceback_later()
        sys.argv, sys.path[:] = saved_argv, saved_path
        forget_absl_flags()
        if "keras" in sys.modules:
            sys.modules["keras"].backend.clear_session()
    return None


def main(paths):
    failed = False
    for path in paths:
        name = os.path.basename(path)
        for stream in (sys.stdout, sys.stderr):
            print(f"BENCHMARK-SMOKE-START {name}", file=stream, flush=True)
        error = run_smoke(path)
        for stream in (sys.stdout, sys.stderr):
            print(f"BENCHMARK-SMOKE-END {name} " + ("ok" if error is None else f"FAILED {error}"),
                  file=stream, flush=True)
        failed |= error is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
