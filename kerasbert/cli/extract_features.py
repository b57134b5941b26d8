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

import collections
import contextlib
import io
import os
import re

from absl import app, flags, logging

from kerasbert import file_system
from kerasbert.choices import FEATURE_COMBINATIONS as COMBINATIONS
from kerasbert.choices import WORD_POOLINGS
from kerasbert.cli import data_flags  # noqa: F401  (--vocab_file, --max_seq_length, ...)
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
    from kerasbert.export.model_sources import load_export_model
    from kerasbert.models.features import extract_features, feature_extractor, write_json_lines
    from kerasbert.models.tasks import encoder_of
    from kerasbert.tokenizers.vocabulary_files import load_tokenizer

    logging.set_verbosity(logging.WARNING)
    layers = _layer_indices(FLAGS.layers)
    if not file_system.isfile(FLAGS.input_file):
        raise FileNotFoundError(f"--input_file {FLAGS.input_file}: no such file")
    if _same_file(FLAGS.output_file, FLAGS.input_file):
        raise ValueError(f"--output_file {FLAGS.output_file} is the --input_file")
    if FLAGS.vocab_file is not None and FLAGS.tokenizer_dir is not None:
        raise ValueError("Give at most one of --vocab_file and --tokenizer_dir")

    model, tokenizer = load_export_model(FLAGS.model)
    try:
        encoder = encoder_of(model)
    except TypeError as error:
        raise ValueError(f"--model {FLAGS.model}: {error}") from None
    if FLAGS.vocab_file is not None or FLAGS.tokenizer_dir is not None:
        tokenizer = load_tokenizer(FLAGS.vocab_file, FLAGS.merges_file, FLAGS.tokenizer_dir,
                                   lowercase=FLAGS.do_lower_case)
    if tokenizer is None:
        raise ValueError(f"--model {FLAGS.model} comes with no tokenizer: give --vocab_file or "
                         "--tokenizer_dir")
    max_seq_length = _max_seq_length(encoder.config)
    if tokenizer.vocabulary_size() > encoder.config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocabulary_size()} tokens, more than "
                         f"the {encoder.config.vocab_size} of the model's vocabulary: not its "
                         "tokenizer")
    extractor = feature_extractor(encoder, layers, combine=FLAGS.combine,
                                  word_pooling=FLAGS.word_pooling)

    line_numbers = collections.deque()  # of the texts read but not yet written

    def texts():
        for line_number, text in _numbered_texts(FLAGS.input_file):
            line_numbers.append(line_number)
            yield text

    records = extract_features(texts(), tokenizer, extractor, batch_size=FLAGS.batch_size,
                               max_seq_length=max_seq_length)
    count = write_json_lines((dict(record, index=line_numbers.popleft()) for record in records),
                             FLAGS.output_file, None if FLAGS.combine else layers,
                             FLAGS.round_digits)
    unit = "words" if FLAGS.word_pooling else "tokens"
    print(f"Wrote the {unit} of {count} texts to {FLAGS.output_file}")


def _same_file(first, second):
    """Whether two paths name the same file (local paths after resolving links)."""
    if file_system.is_local(first) and file_system.is_local(second):
        return (os.path.realpath(file_system.local_path(first))
                == os.path.realpath(file_system.local_path(second)))
    return file_system.absolute(first) == file_system.absolute(second)


def _layer_indices(values):
    indices = []
    for value in values:
        try:
            indices.append(int(value))
        except ValueError:
            raise ValueError(f"--layers: {value!r} is not an integer layer index") from None
    return indices


def _max_seq_length(config):
    """--max_seq_length, which must fit the model's positions; its default shrinks to fit."""
    if not FLAGS["max_seq_length"].present:
        return min(FLAGS.max_seq_length, config.max_sequence_length)
    if FLAGS.max_seq_length > config.max_sequence_length:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} is more than the "
                         f"{config.max_sequence_length} positions of the model")
    return FLAGS.max_seq_length


def _numbered_texts(path):
    """`(0-based line number, text or (text_a, text_b))` of each non-blank line, streamed."""
    with _open_text(path) as file:
        try:
            for line_number, line in enumerate(file):
                line = line.strip()
                if line:
                    pair = re.fullmatch(r"(.*) \|\|\| (.*)", line)
                    yield line_number, pair.groups() if pair else line
        except UnicodeDecodeError as error:
            raise ValueError(f"--input_file {path}: not UTF-8 text ({error})") from None


@contextlib.contextmanager
def _open_text(path):
    """`path` opened as UTF-8 text, gunzipped if it is gzip."""
    from kerasbert.tokenizers.text_files import is_gzip, open_decompressed

    with open_decompressed(path, is_gzip(path)) as raw:
        yield io.TextIOWrapper(raw, encoding="utf-8")


def run():
    run_reporting_errors(main, "kerasbert-extract-features")


if __name__ == "__main__":
    run()
