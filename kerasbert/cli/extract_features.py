"""`kerasbert-extract-features`: the vectors of chosen layers for every token of raw text (the BERT
paper's feature-based approach), as JSON lines in the layout of Google's `extract_features.py`.

    kerasbert-extract-features --model=hf/bert-base-uncased --input_file=sentences.txt \\
        --output_file=features.jsonl --layers=-1,-2,-3,-4 --max_seq_length=128

`--input_file` holds one text a line, or a pair as `text_a ||| text_b`; blank lines are skipped.
Each output line is `{"linex_index": <0-based line number>, "features": [{"token": ...,
"layers": [{"index": -1, "values": [...]}, ...]}, ...]}`, special tokens included. With
`--combine=concat|sum|mean` each token has one `"values"` instead of `"layers"`; with
`--word_pooling=first|mean` the entries are the whitespace-separated words of the text (no
special tokens), each with its first sub-token's or its sub-tokens' mean vectors.

Layer indices: -1 is the last layer, -2 the one before, ...; 0 is the embedding output and `k`
the k-th transformer layer (Google's script counts transformer layers from 0, so its
non-negative `i` is `i + 1` here). `--model` takes what `kerasbert-export` takes (a `.keras`
file, a `kerasbert-pretrain` or `kerasbert-finetune` directory, a local Hugging Face folder, an
original Google checkpoint prefix); the tokenizer is the model's own unless `--vocab_file` or
`--tokenizer_dir` names one. Texts are truncated to `--max_seq_length` tokens (default 128, or
the model's positions if fewer). The output appears only when complete. Errors are reported in one
line and the exit status is 1.
"""

from absl import app, flags, logging

from kerasbert.choices import FEATURE_COMBINATIONS as COMBINATIONS
from kerasbert.choices import WORD_POOLINGS
from kerasbert.cli.data_flags import tokenizer_arguments  # (--vocab_file, --max_seq_length, ...)
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS

flags.DEFINE_string("model", None, "A .keras file, a kerasbert-pretrain or kerasbert-finetune "
                    "directory, a local Hugging Face folder or a Google checkpoint prefix.",
                    required=True)
flags.DEFINE_string("input_file", None, "Texts, one a line (UTF-8, .gz allowed); a pair as "
                    "'text_a ||| text_b'.", required=True)
flags.DEFINE_string("output_file", None, "Where the JSON lines go.", required=True)
flags.DEFINE_list("layers", ["-1", "-2", "-3", "-4"], "Hidden states to write: -1 the last "
                  "layer, 0 the embedding output, k the k-th layer.")
flags.DEFINE_enum("combine", None, list(COMBINATIONS), "Write one vector per token, the "
                  "layers concatenated, summed or averaged, instead of each layer's.")
flags.DEFINE_enum("word_pooling", None, list(WORD_POOLINGS), "Write whitespace-separated words "
                  "instead of sub-tokens, each with its first sub-token's or their mean vectors.")
flags.DEFINE_integer("batch_size", 32, "Texts run through the model at once.", lower_bound=1)
flags.DEFINE_integer("round_digits", 6, "Decimals kept in the values (Google's script: 6).",
                     lower_bound=0)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.models.feature_files import FeatureFileSettings, extract_feature_file

    logging.set_verbosity(logging.WARNING)
    layers = _layer_indices(FLAGS.layers)
    if FLAGS.vocab_file is not None and FLAGS.tokenizer_dir is not None:
        raise ValueError("Give at most one of --vocab_file and --tokenizer_dir")
    extract_feature_file(FeatureFileSettings(
        FLAGS.model, FLAGS.input_file, FLAGS.output_file, tuple(layers), combine=FLAGS.combine,
        word_pooling=FLAGS.word_pooling, tokenizer=tokenizer_arguments(),
        max_seq_length=FLAGS.max_seq_length,
        shrink_to_model=not FLAGS["max_seq_length"].present, batch_size=FLAGS.batch_size,
        round_digits=FLAGS.round_digits))


def _layer_indices(values):
    indices = []
    for value in values:
        try:
            indices.append(int(value))
        except ValueError:
            raise ValueError(f"--layers: {value!r} is not an integer layer index") from None
    return indices


def run():
    run_reporting_errors(main, "kerasbert-extract-features")


if __name__ == "__main__":
    run()
