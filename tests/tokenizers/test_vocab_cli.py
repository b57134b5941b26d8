"""`kerasbert-vocab`: trains each vocabulary kind from text files, with a progress bar (the
binary runs in this process: `tests.binaries.run_binary`)."""

import os

import pytest

from kerasbert.data import demo
from kerasbert.tokenizers import from_hf
from tests.binaries import run_binary


def _run(*flags):
    return run_binary("vocab", *flags)


@pytest.mark.parametrize("kind,size,files", [
    ("wordpiece", 2000, ["vocab.txt"]),
    ("byte_pair", 600, ["vocab.json", "merges.txt"]),
    ("sentence_piece", 600, ["spiece.model"]),
])
@pytest.mark.slow
def test_trains_a_loadable_vocabulary(tmp_path, kind, size, files):
    """Also: what a killed run left beside each file is removed, a look-alike name is kept."""
    for name in files:
        (tmp_path / f".tmp-{name}-0a1b2c3d").write_text("half-written")
        (tmp_path / f".tmp-{name}-draft").write_text("the user's")
    shard = demo.pretraining_corpus_files()[0]
    result = _run(f"--input_files={shard}", f"--type={kind}", f"--vocab_size={size}",
                  f"--output_dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(files + [f".tmp-{name}-draft" for name in files])
    assert "/" in result.stdout and "line" in result.stdout  # the progress bar's count and unit
    tokenizer = from_hf(tmp_path)
    assert 100 < tokenizer.vocabulary_size() <= size
    assert tokenizer.tokenize(["Python is a programming language."]).shape[0] == 1


@pytest.mark.slow
def test_bad_flags_are_named(tmp_path):
    result = _run(f"--input_files={tmp_path}/nothing*.txt", "--type=wordpiece", "--vocab_size=100",
                  f"--output_dir={tmp_path}")
    assert result.returncode != 0 and "no file matches" in result.stderr
    result = _run(f"--input_files={tmp_path}", "--type=gpt", "--vocab_size=100",
                  f"--output_dir={tmp_path}")
    assert result.returncode != 0 and "--type" in result.stderr


@pytest.mark.parametrize("kind", ["wordpiece", "byte_pair", "sentence_piece"])
def test_a_blank_corpus_is_an_error_and_writes_nothing(tmp_path, kind):
    """No text is not a vocabulary: one line naming the files (WordPiece's trainer used to
    stop inside tensorflow-text with a bare StopIteration)."""
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n", encoding="utf-8")
    result = _run(f"--input_files={blank}", f"--type={kind}", "--vocab_size=100",
                  f"--output_dir={tmp_path / 'vocab'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"kerasbert-vocab: error: text files ['{blank}']: no text "
                                     "(every line is blank); nothing to train a vocabulary on")
    assert not (tmp_path / "vocab").exists()
