"""The demo data shipped in kerasbert.data.demo: present, well-formed, as documented, rebuildable."""

import doctest
import gzip
import os

import pytest

from kerasbert.data import demo
from kerasbert.data.demo import rebuild, rst_prose

# The counts README.md documents.
CORPUS_DOCUMENTS, CORPUS_SENTENCES, CORPUS_WORDS = 734, 18_639, 335_574
SPLIT_SIZES = {"train": 93_304, "dev": 11_739, "test": 11_574}
NUM_LABELS = 45
SHIPPED = sorted([os.path.basename(p) for p in demo.pretraining_corpus_files()]
                 + [os.path.basename(p) for p in demo.classification_files().values()]
                 + ["wordnet_lexnames.txt", "LICENSE.PSF.txt", "LICENSE.WordNet.txt"])


def read_gzip_text(path):
    with gzip.open(path, "rb") as f:
        return f.read().decode("utf-8")          # strict: fails on invalid UTF-8


def read_tsv(path):
    lines = read_gzip_text(path).split("\n")
    assert lines[-1] == "", "file must end with a newline"
    return lines[0], [line.split("\t") for line in lines[1:-1]]


def test_accessors_return_existing_absolute_paths():
    paths = demo.pretraining_corpus_files() + list(demo.classification_files().values())
    assert len(demo.pretraining_corpus_files()) == 4
    assert sorted(demo.classification_files()) == ["dev", "test", "train"]
    for path in paths:
        assert os.path.isabs(path) and os.path.getsize(path) > 0, path
    for name in ("README.md", "LICENSE.PSF.txt", "LICENSE.WordNet.txt"):
        assert os.path.getsize(os.path.join(demo.DATA_DIR, name)) > 0


def test_licence_files_hold_the_licences():
    with open(os.path.join(demo.DATA_DIR, "LICENSE.PSF.txt"), encoding="utf-8") as f:
        psf = f.read()
    with open(os.path.join(demo.DATA_DIR, "LICENSE.WordNet.txt"), encoding="utf-8") as f:
        wordnet = f.read()
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in psf
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in wordnet


def test_corpus_format_and_counts():
    documents = []
    for path in demo.pretraining_corpus_files():
        text = read_gzip_text(path)
        assert text.endswith("\n") and not text.endswith("\n\n"), path
        assert not text.startswith("\n") and "\n\n\n" not in text, "empty document in " + path
        assert "\r" not in text and "\t" not in text
        for document in text[:-1].split("\n\n"):
            sentences = document.split("\n")
            assert len(sentences) >= rebuild.MIN_DOCUMENT_SENTENCES, document
            for sentence in sentences:
                assert sentence == sentence.strip() and sentence, repr(sentence)
                assert len(sentence.split()) >= 5 and sentence[-1] in ".!?:)]\"'", sentence
            documents.append(sentences)
    sentences = [s for document in documents for s in document]
    assert len(documents) == CORPUS_DOCUMENTS
    assert len(sentences) == CORPUS_SENTENCES
    assert sum(len(s.split()) for s in sentences) == CORPUS_WORDS
    # Markup is gone: no roles, inline literals or directives are left.
    assert not [s for s in sentences if ":func:`" in s or "``" in s or s.startswith(".. ")]


def test_classification_labels():
    labels = demo.classification_labels()
    assert len(labels) == NUM_LABELS == len(set(labels))
    assert labels[:3] == ["adj.all", "adj.pert", "adv.all"] and labels[-1] == "adj.ppl"
    assert labels.index("noun.animal") == 5 and labels.index("verb.motion") == 38


def test_classification_files():
    labels = set(demo.classification_labels())
    texts = {}
    for split, path in demo.classification_files().items():
        header, rows = read_tsv(path)
        assert header == "label\ttext"
        assert len(rows) == SPLIT_SIZES[split]
        for row in rows:
            assert len(row) == 2, row
            label, text = row
            assert label in labels, row
            assert text and text == text.strip() and "  " not in text, row
        assert {label for label, _ in rows} == labels      # every label in every split
        texts[split] = {text for _, text in rows}
        assert len(texts[split]) == len(rows), "duplicate texts in " + split
    assert not texts["train"] & texts["dev"]
    assert not texts["train"] & texts["test"]
    assert not texts["dev"] & texts["test"]


def test_module_examples_run():
    for module in (demo, rst_prose, rebuild):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__


@pytest.mark.parametrize("source, expected", [
    ("See :func:`~os.path.join` and :pep:`8`.", "See join and PEP 8."),
    ("A `link <https://example.org>`_ and **bold** *words*\\ s.", "A link and bold wordss."),
    ("Use ``x = 1`` (see :ref:`the guide <guide>`) [#]_.", "Use x = 1 (see the guide)."),
    ("Fixed in :issue:`123` and :gh:`45`.", "Fixed in bpo-123 and gh-45."),
])
def test_inline_markup_becomes_text(source, expected):
    assert rst_prose.inline(source) == expected


def test_unresolvable_reference_drops_the_sentence():
    assert not rst_prose.is_prose(rst_prose.inline("For details see the section :ref:`nowhere` below."))


def test_sentence_splitter_keeps_abbreviations_and_versions():
    assert rst_prose.split_sentences(
        "Python 3.11 is fast, e.g. in loops. Mr. Smith agrees, cf. the notes. It ends here!") == [
        "Python 3.11 is fast, e.g. in loops.", "Mr. Smith agrees, cf. the notes.", "It ends here!"]


def test_code_tables_and_directives_are_dropped():
    page = "\n".join([
        "Page title", "==========", "",
        "This page has a first paragraph that is plain prose.", "",
        ".. code-block:: python", "", "   print('This line of code must not appear anywhere.')", "",
        "===== =====", "Key   Value", "===== =====", "a     This table cell must not appear at all.",
        "===== =====", "",
        ".. note::", "   This note body is prose and stays in the output.", "",
        ".. index:: single: this index entry must not appear", "",
        "An example follows here, with some more words::", "", "   >>> print('Hidden code here.')", "",
        "Section", "-------", "", "The second section starts a new document of its own.",
    ])
    assert rst_prose.rst_documents(page) == [
        ("Page title", ["This page has a first paragraph that is plain prose.",
                        "This note body is prose and stays in the output.",
                        "An example follows here, with some more words:"]),
        ("Section", ["The second section starts a new document of its own."])]


def test_missing_sources_name_the_apt_packages(tmp_path, capsys):
    missing = str(tmp_path / "absent")
    with pytest.raises(rebuild.MissingSourcesError, match="apt-get install .*python3.11-doc wordnet-base"):
        rebuild.rebuild(str(tmp_path / "out"), pydoc_dir=missing, wordnet_dir=missing)
    assert rebuild.main(["--output_dir", str(tmp_path / "out"), "--pydoc_dir", missing,
                         "--wordnet_dir", missing]) == 1
    assert "apt-get install --no-install-recommends python3.11-doc wordnet-base" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_rebuild_reproduces_the_shipped_files(tmp_path):
    """With the Debian packages installed the rebuild matches the shipped files byte for byte
    (at the recorded package versions); without them the script says what to install."""
    try:
        rebuild.check_sources()
    except rebuild.MissingSourcesError as error:           # e.g. a fresh CI machine
        assert rebuild.APT_INSTALL in str(error)
        assert rebuild.main(["--output_dir", str(tmp_path)]) == 1
        assert not os.listdir(tmp_path)
        return
    written = rebuild.rebuild(str(tmp_path))
    assert sorted(os.path.basename(p) for p in written) == SHIPPED
    if rebuild.installed_versions() != rebuild.SOURCE_VERSIONS:
        # Other package versions may change the content: the rebuild must still be deterministic.
        again = rebuild.rebuild(str(tmp_path / "again"))
        for first, second in zip(written, again):
            with open(first, "rb") as a, open(second, "rb") as b:
                assert a.read() == b.read(), first
        return
    for path in written:
        shipped = os.path.join(demo.DATA_DIR, os.path.basename(path))
        if path.endswith(".gz"):
            assert read_gzip_text(path) == read_gzip_text(shipped), path
        with open(path, "rb") as new, open(shipped, "rb") as old:
            assert new.read() == old.read(), path
