"""`kerasbert-classify`: label raw texts with an exported classifier, through the raw-text TFLite
file and the SavedModel's `serve_text`, and check that both runtimes give the same labels.

    kerasbert-classify --export_dir=exports/gloss --input_file=sentences.txt

Trusted exports only: the SavedModel and the TFLite file run in this process, with this
process's rights (a SavedModel can read and write files), so give it only exports you made or
trust as you would a program.
"""

from absl import app, flags, logging

from kerasbert.choices import CLASSIFY_RUNTIMES as RUNTIMES
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_string("export_dir", None, "A kerasbert-export folder made with --text_signatures. "
                    "Trusted exports only: its SavedModel and TFLite file run in this process.",
                    required=True)
flags.DEFINE_string("input_file", None, "Texts to classify, one a line (UTF-8).", required=True)
flags.DEFINE_list("runtimes", list(RUNTIMES), f"Any of {', '.join(RUNTIMES)}; with two, their "
                  "labels must agree.")
flags.DEFINE_string("output_file", None, "Write the predictions here as JSON.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.export.text_classification import classify_file

    logging.set_verbosity(logging.WARNING)
    classify_file(FLAGS.export_dir, FLAGS.input_file, FLAGS.runtimes, FLAGS.output_file)


def run():
    run_reporting_errors(main, "kerasbert-classify",
                         expected=("kerasbert.export.errors.ExportError",))


if __name__ == "__main__":
    run()
