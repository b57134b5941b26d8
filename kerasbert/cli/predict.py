"""`kerasbert-predict` (alias `kerasbert-classify`): answers to raw text from an export, for
every task: labels, entities, answer spans, choices.

    kerasbert-predict --export_dir=exports/gloss --input_file=sentences.txt
    kerasbert-predict --export_dir=exports/squad --input_file=questions.jsonl \\
        --output_file=answers.jsonl
    cat corpus.txt | kerasbert-predict --export_dir=exports/embedder --query="a small cat"

Input: one text a line, or JSON lines with the task's fields (`text` and an optional
`text_pair`; `text`; `question` and `context`; `context` and `choices`), from standard input
when --input_file is "-" or absent. Output: JSON lines, each record with its answer
(`kerasbert.export.predictions`; an embedding model's `embedding`); with --query, a text
embedding export ranks the input lines instead and prints the --top_k nearest with their
cosine similarities. A classifier exported with its
raw-text TFLite file is run by that file and the SavedModel, which must agree.

Trusted exports only: the SavedModel and the TFLite file run in this process, with this
process's rights (a SavedModel can read and write files), so give it only exports you made or
trust as you would a program.
"""

from absl import app, flags, logging

from kerasbert.choices import PREDICT_RUNTIMES as RUNTIMES
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_string("export_dir", None, "A kerasbert-export folder made with --text_signatures. "
                    "Trusted exports only: its SavedModel and TFLite file run in this process.",
                    required=True)
flags.DEFINE_string("input_file", "-", "Texts, one a line, or JSON lines of records (UTF-8); "
                    "- (the default): standard input.")
flags.DEFINE_enum("input_format", "auto", ["auto", "text", "jsonl"], "text: one text a line; "
                  "jsonl: one JSON object a line; auto: jsonl for .jsonl and .json files.")
flags.DEFINE_list("runtimes", None, f"Any of {', '.join(RUNTIMES)}; with two, their answers "
                  "must agree (default: both when the export has model_text.tflite with the "
                  "task's signature, else saved_model).")
flags.DEFINE_string("query", None, "Text embedding exports: rank the input lines by cosine "
                    "similarity to this text and print the --top_k nearest.")
flags.DEFINE_integer("top_k", 10, "With --query: how many lines to print.", lower_bound=1)
flags.DEFINE_string("output_file", None, "Write the answers here as JSON lines (default: print "
                    "them).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.export.predictions import predict_file

    logging.set_verbosity(logging.WARNING)
    predict_file(FLAGS.export_dir, FLAGS.input_file, FLAGS.input_format, FLAGS.runtimes,
                 FLAGS.output_file, query=FLAGS.query, top_k=FLAGS.top_k)


EXPECTED_ERRORS = ("kerasbert.export.errors.ExportError",)


def run():
    run_reporting_errors(main, "kerasbert-predict", expected=EXPECTED_ERRORS)


if __name__ == "__main__":
    run()
