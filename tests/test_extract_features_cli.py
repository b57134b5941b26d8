"""`kerasbert-extract-features` end to end: raw text in, JSON lines in the layout of Google's
`extract_features.py` out, equal to the library's records; one-line errors that leave nothing
half-written."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kerasbert
from kerasbert.models import extract_features, feature_extractor
from tests.binaries import run_binary as run_in_process
from tests.models.test_features import save_family_folder

BINARY = os.path.join(os.path.dirname(sys.executable), "kerasbert-extract-features")
PROGRAM = "kerasbert-extract-features: error: "
LINES = ["The  quick brown fox jumps over the lazy dog!", "",
         "Who wrote it? ||| Guido did, in 1991", "  café naïve résumé  ", "x"]
# What the library reads for LINES: blank lines skipped, pairs split, ends stripped.
TEXTS = [LINES[0], ("Who wrote it?", "Guido did, in 1991"), "café naïve résumé", "x"]
LINE_NUMBERS = [0, 2, 3, 4]


def run_binary(*flags):
    """The binary run in this process (`tests.binaries`); the error cases below run as processes."""
    return run_in_process("extract_features", *flags)


def start_binary(*flags):
    return subprocess.Popen([BINARY, *map(str, flags)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture
def input_file(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def model_folder(family, tmp_path):
    """A Hugging Face folder (model and tokenizer) of a random `family` model."""
    directory = tmp_path / family
    directory.mkdir()
    save_family_folder(family, directory)
    return directory


def library_records(directory, layers, combine, word_pooling):
    encoder = kerasbert.convert.from_hf(directory)
    extractor = feature_extractor(encoder, layers, combine=combine, word_pooling=word_pooling)
    return list(extract_features(TEXTS, kerasbert.tokenizers.from_hf(directory), extractor,
                                 max_seq_length=encoder.config.max_sequence_length))


def read_json_lines(path):
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file]


@pytest.mark.slow
def test_writes_each_layer_of_each_token_as_google_does(input_file, tmp_path):
    model = model_folder("bert", tmp_path)
    output = tmp_path / "out" / "features.jsonl"
    result = run_binary(f"--model={model}", f"--input_file={input_file}",
                        f"--output_file={output}", "--layers=-1,0", "--batch_size=2",
                        "--round_digits=7")
    assert result.returncode == 0, result.stderr
    assert f"Wrote the tokens of 4 texts to {output}" in result.stdout
    lines = read_json_lines(output)
    assert [line["linex_index"] for line in lines] == LINE_NUMBERS
    for line, record in zip(lines, library_records(model, (-1, 0), None, None),
                            strict=True):
        assert [feature["token"] for feature in line["features"]] == record["tokens"]
        assert record["tokens"][0] == "[CLS]" and record["tokens"][-1] == "[SEP]"
        for feature, expected in zip(line["features"], record["features"]):
            assert list(feature) == ["token", "layers"]
            assert [layer["index"] for layer in feature["layers"]] == [-1, 0]
            np.testing.assert_allclose([layer["values"] for layer in feature["layers"]],
                                       expected, atol=1e-6, rtol=0)
    assert sorted(os.listdir(output.parent)) == ["features.jsonl"]


@pytest.mark.slow
def test_combined_layers_of_words_with_a_given_tokenizer(input_file, tmp_path):
    model = model_folder("roberta", tmp_path)
    output = tmp_path / "words.jsonl"
    result = run_binary(f"--model={model}", f"--tokenizer_dir={model}",
                        f"--input_file={input_file}", f"--output_file={output}",
                        "--layers=-1,-2", "--combine=concat", "--word_pooling=mean")
    assert result.returncode == 0, result.stderr
    lines = read_json_lines(output)
    records = library_records(model, (-1, -2), "concat", "mean")
    assert [line["linex_index"] for line in lines] == LINE_NUMBERS
    assert [feature["token"] for feature in lines[2]["features"]] == ["café", "naïve", "résumé"]
    for line, record in zip(lines, records, strict=True):
        assert [feature["token"] for feature in line["features"]] == record["tokens"]
        values = np.array([feature["values"] for feature in line["features"]])
        assert values.shape == (len(record["tokens"]), 64)
        np.testing.assert_allclose(values, record["features"], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_errors_are_one_line_and_write_nothing(input_file, tmp_path):
    model = model_folder("bert", tmp_path)
    runs = {  # flags -> what the message says
        (f"--input_file={input_file}", "--layers=-1,5"):
            "layer index 5 is out of range: the encoder has 2 transformer layers",
        (f"--input_file={tmp_path / 'missing.txt'}",):
            f"--input_file {tmp_path / 'missing.txt'}: no such file",
    }
    processes = {flags: start_binary(f"--model={model}", *flags,
                                     f"--output_file={tmp_path / 'out' / 'features.jsonl'}")
                 for flags in runs}  # at once: each spends most of its time starting up
    for flags, process in processes.items():
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 1, stderr
        assert "Traceback" not in stderr
        last = stderr.strip().splitlines()[-1]
        assert last.startswith(PROGRAM) and runs[flags] in last, stderr
    assert not (tmp_path / "out").exists()


def test_a_blank_input_is_an_error_and_writes_nothing(tmp_path):
    """Nothing to extract is not success: every line blank is one line naming the file, status
    1, and no output file (as data creation refuses to write zero instances)."""
    model = model_folder("bert", tmp_path)
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\t\n", encoding="utf-8")
    result = run_binary(f"--model={model}", f"--input_file={blank}",
                        f"--output_file={tmp_path / 'out' / 'features.jsonl'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"{PROGRAM}--input_file {blank}: no text (every line is blank); " \
                   "nothing to extract"
    assert not (tmp_path / "out").exists()
