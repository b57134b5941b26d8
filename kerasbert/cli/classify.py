"""`kerasbert-classify`: label raw texts with an exported classifier, through the raw-text TFLite
file and the SavedModel's `serve_text`, and check that both runtimes give the same labels.

    kerasbert-classify --export_dir=exports/gloss --input_file=sentences.txt

Trusted exports only: the SavedModel and the TFLite file run in this process, with this
process's rights (a SavedModel can read and write files), so give it only exports you made or
trust as you would a program.
"""

import json

from absl import app, flags, logging

from kerasbert import file_system
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
    from kerasbert.atomic_files import write_atomically
    from kerasbert.export.errors import ExportError
    from kerasbert.export.text_classification import classify

    logging.set_verbosity(logging.WARNING)
    texts = [line.strip() for line in file_system.read_text(FLAGS.input_file).splitlines()
             if line.strip()]
    if not texts:
        raise ExportError(f"{FLAGS.input_file}: no text lines")
    predictions = classify(FLAGS.export_dir, texts, FLAGS.runtimes)
    width = min(60, max(len(text) for text in texts))
    print("  ".join(["text".ljust(width), *FLAGS.runtimes]))
    for index, text in enumerate(texts):
        shown = text if len(text) <= width else text[:width - 3] + "..."
        print("  ".join([shown.ljust(width), *(predictions[runtime][index]
                                               for runtime in FLAGS.runtimes)]))
    if FLAGS.output_file:
        write_atomically(FLAGS.output_file, json.dumps(
            [{"text": text, **{runtime: predictions[runtime][index] for runtime in FLAGS.runtimes}}
             for index, text in enumerate(texts)], indent=1) + "\n")


def run():
    run_reporting_errors(main, "kerasbert-classify",
                         expected=("kerasbert.export.errors.ExportError",))


if __name__ == "__main__":
    run()
