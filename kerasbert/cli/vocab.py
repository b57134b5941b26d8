"""`kerasbert-vocab`: train a tokenizer vocabulary from text files."""

from absl import app, flags

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
    from kerasbert.tokenizers.vocabulary_training import train_from_patterns

    options = {key: value for key, value in (("lowercase", FLAGS.lowercase),
                                             ("reserved_tokens", FLAGS.reserved_tokens))
               if value is not None}
    train_from_patterns(FLAGS.type, FLAGS.input_files, FLAGS.vocab_size, FLAGS.output_dir,
                        **options)


def run():
    run_reporting_errors(main, "kerasbert-vocab")


if __name__ == "__main__":
    run()
