"""`kerasbert-vocab`: train a tokenizer vocabulary from text files."""

from absl import app, flags

from kerasbert import file_system
from kerasbert.choices import VOCABULARY_KINDS
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_list("input_files", None, "Text files or globs (plain or gzip), one sentence or "
                  "paragraph per line.", required=True)
flags.DEFINE_enum("type", None, VOCABULARY_KINDS,
                  "Vocabulary kind: wordpiece (BERT, ELECTRA), byte_pair (RoBERTa), "
                  "sentence_piece (ALBERT).", required=True)
flags.DEFINE_integer("vocab_size", None, "Vocabulary size (at most).", required=True,
                     lower_bound=1)
flags.DEFINE_string("output_dir", None, "Directory to write the vocabulary files to.", required=True)
flags.DEFINE_boolean("lowercase", None, "Lower-case the text (default: the kind's usual setting).")
flags.DEFINE_list("reserved_tokens", None, "Special tokens, first in the vocabulary "
                  "(default: the kind's usual ones).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import keras

    from kerasbert.tokenizers import vocabulary_training
    from kerasbert.tokenizers.text_files import count_lines

    for pattern in FLAGS.input_files:
        if not file_system.glob(pattern):
            raise FileNotFoundError(f"--input_files: no file matches {pattern}")
    files = sorted({path for pattern in FLAGS.input_files for path in file_system.glob(pattern)})
    bar = keras.utils.Progbar(count_lines(files), unit_name="line")
    options = {key: value for key, value in (("lowercase", FLAGS.lowercase),
                                             ("reserved_tokens", FLAGS.reserved_tokens))
               if value is not None}
    written = vocabulary_training.train(FLAGS.type, files, FLAGS.vocab_size, FLAGS.output_dir,
                                        progress=bar.add, **options)
    print(f"\nWrote {', '.join(written)}")


def run():
    run_reporting_errors(main, "kerasbert-vocab")


if __name__ == "__main__":
    run()
