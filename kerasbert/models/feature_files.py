"""Features of a text file as JSON lines, in the layout of Google's `extract_features.py`
(`kerasbert-extract-features` calls `extract_feature_file`): the texts, one a line or a pair as
`text_a ||| text_b`, run through a saved model's encoder by `kerasbert.models.features`.
"""

import collections
import contextlib
import dataclasses
import io
import os
import re
from typing import Optional

from kerasbert import file_system
from kerasbert.models.features import extract_features, feature_extractor, write_json_lines


@dataclasses.dataclass(frozen=True)
class FeatureFileSettings:
    """What `extract_feature_file` writes: the features of `input_file`'s texts (UTF-8, .gz
    allowed) from `model` (what `kerasbert-export` takes: a `.keras` file, a pretraining or
    fine-tuning directory, a local Hugging Face folder, a Google checkpoint prefix) to
    `output_file`. `layers`: hidden-state indices (-1 the last layer, 0 the embedding output);
    `combine` and `word_pooling`: `feature_extractor`'s; `tokenizer`: `load_tokenizer` arguments
    instead of the model's own tokenizer; `max_seq_length` tokens per text, which must fit the
    model's positions unless `shrink_to_model` (then it shrinks to fit); `batch_size` texts at
    once; `round_digits` decimals kept.

    >>> FeatureFileSettings("model.keras", "texts.txt", "features.jsonl").layers
    (-1, -2, -3, -4)
    """

    model: str
    input_file: str
    output_file: str
    layers: tuple = (-1, -2, -3, -4)
    combine: Optional[str] = None
    word_pooling: Optional[str] = None
    tokenizer: Optional[dict] = None
    max_seq_length: int = 128
    shrink_to_model: bool = False
    batch_size: int = 32
    round_digits: int = 6


def extract_feature_file(settings):
    """Write the features `settings` (a `FeatureFileSettings`) asks for, whole or not at all,
    and print what was written; the number of texts. A `ValueError` (or `FileNotFoundError`)
    names a bad input, model or tokenizer."""
    from kerasbert.export.model_sources import load_export_model
    from kerasbert.models.tasks import encoder_of
    from kerasbert.tokenizers.vocabulary_files import load_tokenizer

    if not file_system.isfile(settings.input_file):
        raise FileNotFoundError(f"--input_file {settings.input_file}: no such file")
    if _same_file(settings.output_file, settings.input_file):
        raise ValueError(f"--output_file {settings.output_file} is the --input_file")
    first = _numbered_texts(settings.input_file)
    if next(first, None) is None:  # nothing would be written: an error, as data creation's
        raise ValueError(f"--input_file {settings.input_file}: no text (every line is blank); "
                         "nothing to extract")
    first.close()
    model, tokenizer = load_export_model(settings.model)
    try:
        encoder = encoder_of(model)
    except TypeError as error:
        raise ValueError(f"--model {settings.model}: {error}") from None
    if settings.tokenizer is not None:
        tokenizer = load_tokenizer(**settings.tokenizer)
    if tokenizer is None:
        raise ValueError(f"--model {settings.model} comes with no tokenizer: give --vocab_file or "
                         "--tokenizer_dir")
    max_seq_length = _max_seq_length(settings, encoder.config)
    if tokenizer.vocabulary_size() > encoder.config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocabulary_size()} tokens, more than "
                         f"the {encoder.config.vocab_size} of the model's vocabulary: not its "
                         "tokenizer")
    layers = list(settings.layers)
    extractor = feature_extractor(encoder, layers, combine=settings.combine,
                                  word_pooling=settings.word_pooling)

    line_numbers = collections.deque()  # of the texts read but not yet written

    def texts():
        for line_number, text in _numbered_texts(settings.input_file):
            line_numbers.append(line_number)
            yield text

    records = extract_features(texts(), tokenizer, extractor, batch_size=settings.batch_size,
                               max_seq_length=max_seq_length)
    count = write_json_lines((dict(record, index=line_numbers.popleft()) for record in records),
                             settings.output_file, None if settings.combine else layers,
                             settings.round_digits)
    unit = "words" if settings.word_pooling else "tokens"
    print(f"Wrote the {unit} of {count} texts to {settings.output_file}")
    return count


def _same_file(first, second):
    """Whether two paths name the same file (local paths after resolving links)."""
    if file_system.is_local(first) and file_system.is_local(second):
        return (os.path.realpath(file_system.local_path(first))
                == os.path.realpath(file_system.local_path(second)))
    return file_system.absolute(first) == file_system.absolute(second)


def _max_seq_length(settings, config):
    """`max_seq_length`, which must fit the model's positions, or shrinks to fit them."""
    if settings.shrink_to_model:
        return min(settings.max_seq_length, config.max_sequence_length)
    if settings.max_seq_length > config.max_sequence_length:
        raise ValueError(f"--max_seq_length={settings.max_seq_length} is more than the "
                         f"{config.max_sequence_length} positions of the model")
    return settings.max_seq_length


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
