"""The tokenizer and instance flags the data and training binaries share (absl allows a flag to
be defined once per process, so they live here and both binaries import them)."""

from absl import app, flags

from kerasbert.data.instances import OBJECTIVES
from kerasbert.tokenizers.vocabulary_files import load_tokenizer

FLAGS = flags.FLAGS
flags.DEFINE_string("vocab_file", None, "vocab.txt (WordPiece), *.model (SentencePiece) or "
                    "vocab.json (byte-level BPE, with --merges_file).")
flags.DEFINE_string("merges_file", None, "merges.txt, for a byte-level BPE --vocab_file.")
flags.DEFINE_string("tokenizer_dir", None, "A Hugging Face tokenizer directory, instead of "
                    "--vocab_file.")
flags.DEFINE_boolean("do_lower_case", True, "Lower-case the text (WordPiece and SentencePiece).")
flags.DEFINE_enum("objective", "nsp", OBJECTIVES, "Instances (and, for training, heads): nsp "
                  "(BERT: MLM+NSP), sop (ALBERT: MLM+SOP), full_sentences / doc_sentences "
                  "(RoBERTa: MLM), electra (generator + replaced-token detection).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per instance, special tokens included.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Most masked tokens per instance.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of the tokens to mask.")


def tokenizer_from_flags(needed_for="the text"):
    """The tokenizer the flags name; a usage error unless exactly one source is given."""
    if (FLAGS.vocab_file is None) == (FLAGS.tokenizer_dir is None):
        raise app.UsageError(f"{needed_for} needs exactly one of --vocab_file and --tokenizer_dir")
    return load_tokenizer(FLAGS.vocab_file, FLAGS.merges_file, FLAGS.tokenizer_dir,
                          lowercase=FLAGS.do_lower_case)
