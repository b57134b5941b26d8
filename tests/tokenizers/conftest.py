"""Vocabularies trained once per test session and shared by the tokenizer tests."""

import json
import shutil

import filelock
import pytest

from kerasbert.tokenizers import train_wordpiece
from tests.helpers import run_shared_folder
from tests.tokenizer_cases import corpus_files


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A test that needs a WordPiece vocabulary trained on the whole shipped corpus
    (`trained_wordpiece_dir`, about 30 s per casing) is `slow`: in CI, not in the quick loop."""
    for item in items:
        if "trained_wordpiece_dir" in item.fixturenames:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def trained_wordpiece_dir(tmp_path_factory):
    """`make(lowercase)`: a directory with a WordPiece vocab.txt trained by us on the shipped
    corpus and the matching tokenizer_config.json: trained once per setting and test run, in the
    folder the xdist workers share (under a file lock), whichever worker needs it first."""
    shared = run_shared_folder(tmp_path_factory)

    def make(lowercase):
        directory = shared / ("wordpiece_uncased" if lowercase else "wordpiece_cased")
        with filelock.FileLock(f"{directory}.lock"):
            if not directory.exists():
                partial = shared / f"{directory.name}.partial"
                shutil.rmtree(partial, ignore_errors=True)
                partial.mkdir()
                train_wordpiece(corpus_files(), vocab_size=4000, lowercase=lowercase,
                                output_dir=partial)
                (partial / "tokenizer_config.json").write_text(
                    json.dumps({"do_lower_case": lowercase}))
                partial.rename(directory)
        return directory

    return make
