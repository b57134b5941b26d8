"""`kerasbert-demo`: the main job, from the shipped raw text to a verified model on a phone format.

    kerasbert-demo            # about 10 minutes on 2 CPU cores; writes runs/<timestamp>/
    kerasbert-demo --quick    # the same stages at toy sizes, about 2 minutes

Interrupted, the same command continues the newest unfinished run, with the settings recorded
in its `run.json`. `--run_dir=DIR` continues the run in DIR, or starts one there if DIR is
empty or new; any other DIR is refused. Every stage is a console script run with the flagfile
in `runs/<timestamp>/flags/`, so one stage can be rerun alone.
"""

from absl import app, flags

from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_boolean("quick", False, "Toy sizes: every stage in about 2 minutes.")
flags.DEFINE_string("runs_dir", "runs", "Where runs go (runs/<timestamp>/).")
flags.DEFINE_string("run_dir", None, "Continue the run in this folder, or start one in it if "
                    "it is empty or new (any other folder is refused).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.demo_pipeline import run_main_job

    run_main_job(FLAGS.runs_dir, quick=FLAGS.quick, run_dir=FLAGS.run_dir)


def run():
    run_reporting_errors(main, "kerasbert-demo", expected=("kerasbert.demo_pipeline.runner.StageError",),
                         interrupted="run the same command again to continue")


if __name__ == "__main__":
    run()
