"""`kerasbert-demo`: the main job (for now: every family's smallest preset, built, run, saved, reloaded)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

from kerasbert import demo, zoo  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("presets", None, "Presets to run (default: the smallest of each family).")
flags.DEFINE_string("work_dir", None, "Where to write the .keras files (default: a temporary directory).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    for name in FLAGS.presets or ():
        try:
            zoo.get_config(name)
        except zoo.UnknownPresetError as error:
            raise app.UsageError(f"--presets: {error}") from None
    rows = demo.run_demo(FLAGS.presets, FLAGS.work_dir)
    print(demo.format_table(rows))


def run():
    app.run(main)


if __name__ == "__main__":
    run()
