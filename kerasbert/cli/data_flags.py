"""The tokenizer flags the data, pretraining and fine-tuning binaries share (absl allows a flag
to be defined once per process, so they live here and the binaries import them)."""

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("vocab_file", None, "vocab.txt (WordPiece), *.model (SentencePiece) or "
                    "vocab.json (byte-level BPE, with --merges_file).")
flags.DEFINE_string("merges_file", None, "merges.txt, for a byte-level BPE --vocab_file.")
flags.DEFINE_string("tokenizer_dir", None, "A Hugging Face tokenizer directory, instead of "
                    "--vocab_file.")
flags.DEFINE_boolean("do_lower_case", True, "Lower-case the text (WordPiece and SentencePiece).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per instance or example (window), special "
                     "tokens included.", lower_bound=4)


def check_tokenizer_flags(needed_for="the text"):
    """A usage error unless exactly one tokenizer source is given."""
    if (FLAGS.vocab_file is None) == (FLAGS.tokenizer_dir is None):
        raise app.UsageError(f"{needed_for} needs exactly one of --vocab_file and --tokenizer_dir")


def tokenizer_from_flags(needed_for="the text"):
    """The tokenizer the flags name; a usage error unless exactly one source is given."""
    check_tokenizer_flags(needed_for)
    from kerasbert.tokenizers.vocabulary_files import load_tokenizer

    return load_tokenizer(FLAGS.vocab_file, FLAGS.merges_file, FLAGS.tokenizer_dir,
                          lowercase=FLAGS.do_lower_case)


def tokenizer_arguments():
    """The tokenizer flags as `load_tokenizer` arguments, as given, or None without a tokenizer
    flag."""
    if FLAGS.vocab_file is None and FLAGS.tokenizer_dir is None:
        return None
    return {"vocab_file": FLAGS.vocab_file, "merges_file": FLAGS.merges_file,
            "tokenizer_dir": FLAGS.tokenizer_dir, "lowercase": FLAGS.do_lower_case}
