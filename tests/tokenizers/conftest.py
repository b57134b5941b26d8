"""Vocabularies trained once per test session and shared by the tokenizer tests."""

import json

import pytest

from kerasbert.tokenizers import train_wordpiece
from tests.tokenizer_cases import corpus_files


@pytest.fixture(scope="session")
def trained_wordpiece_dir(tmp_path_factory):
    """`make(lowercase)`: a directory with a WordPiece vocab.txt trained by us on the shipped
    corpus and the matching tokenizer_config.json (trained once per setting)."""
    directories = {}

    def make(lowercase):
        if lowercase not in directories:
            directory = tmp_path_factory.mktemp("wordpiece_uncased" if lowercase else "wordpiece_cased")
            train_wordpiece(corpus_files(), vocab_size=4000, lowercase=lowercase, output_dir=directory)
            (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lowercase}))
            directories[lowercase] = directory
        return directories[lowercase]

    return make
