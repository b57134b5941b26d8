"""`kerasbert-convert`: move a model between original Google TF1 checkpoints, Hugging Face and
keras-hub folders and kerasbert `.keras` files.

    kerasbert-convert --input=uncased_L-12_H-768_A-12/bert_model.ckpt --output=bert-base-hf
    kerasbert-convert --input=bert-base-hf --output=bert-base.keras
    kerasbert-convert --input=runs/gloss/model.keras --output=gloss-hf --tokenizer_dir=vocab
"""

from absl import app, flags, logging

from kerasbert.choices import CONVERT_SOURCE_FORMATS as SOURCE_FORMATS
from kerasbert.choices import CONVERT_TARGET_FORMATS as TARGET_FORMATS
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "A TF1 checkpoint prefix (config json beside it), a Hugging "
                    "Face or keras-hub folder, or a .keras file.", required=True)
flags.DEFINE_string("output", None, "A new Hugging Face folder, or a .keras file.", required=True)
flags.DEFINE_enum("input_format", "auto", ["auto", *SOURCE_FORMATS], "What --input is.")
flags.DEFINE_enum("output_format", "auto", ["auto", *TARGET_FORMATS],
                  "What to write (auto: keras when --output ends with .keras, else hf).")
flags.DEFINE_string("config_json", None, "TF1 checkpoints: the config file (default: "
                    "bert_config.json, albert_config.json or config.json beside the prefix).")
flags.DEFINE_boolean("encoder_only", False, "Convert just the encoder, leaving heads out.")
flags.DEFINE_string("tokenizer_dir", None, "Tokenizer files (vocab.txt, vocab.json + merges.txt "
                    "or spiece.model) for a Hugging Face --output, instead of the source's own.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.convert.conversions import convert

    logging.set_verbosity(logging.WARNING)
    model = convert(FLAGS.input, FLAGS.output, FLAGS.input_format, FLAGS.output_format,
                    FLAGS.config_json, FLAGS.encoder_only, FLAGS.tokenizer_dir)
    print(f"Wrote {FLAGS.output} ({model.name}, {model.count_params():,} parameters)")


def run():
    run_reporting_errors(main, "kerasbert-convert")


if __name__ == "__main__":
    run()
