"""Corpus reading: documents, the bad-input policy, windows, sharding, the sentence splitter."""

import gzip

import pytest
import tensorflow as tf

import kerasbert.data.demo
from kerasbert.data.corpus import CorpusStats, corpus_files, document_dataset, document_windows
from kerasbert.data.sentence_split import split_sentences


def _documents(*args, **kwargs):
    return [[s.decode() for s in document.numpy()]
            for document in document_dataset(*args, **kwargs)]


def test_documents_are_blank_line_separated_sentences(tmp_path):
    (tmp_path / "a.txt").write_text("One.\nTwo.\n\n\n\nThree.\n   \nFour.\nFive.")
    with gzip.open(tmp_path / "b.txt.gz", "wt") as file:
        file.write("\nSix.\n\nSeven.\n\n")
    (tmp_path / "empty.txt").write_text("")
    stats = CorpusStats()
    assert _documents(str(tmp_path / "*"), stats=stats, num_parallel_files=1) == [
        ["One.", "Two."], ["Three."], ["Four.", "Five."], ["Six."], ["Seven."]]
    assert stats.as_dict() == {"documents": 5, "sentences": 7, "skipped_lines": 0,
                               "documents_without_tokens": 0, "split_documents": 0}
    assert corpus_files(str(tmp_path / "*")) == [str(tmp_path / "a.txt"),
                                                 str(tmp_path / "b.txt.gz")]


def test_whole_shipped_corpus_is_read():
    stats = CorpusStats()
    documents = _documents(kerasbert.data.demo.pretraining_corpus_files(), stats=stats)
    assert stats.as_dict() == {"documents": 734, "sentences": 18_639, "skipped_lines": 0,
                               "documents_without_tokens": 0, "split_documents": 0}
    assert len(documents) == 734 and all(documents)


def test_bad_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"Good one.\nBad \xff\xfe line.\n" + b"x" * 50 + b"\nAlso good.\n\nNext.\n")
    stats = CorpusStats()
    assert _documents(str(path), stats=stats, max_line_bytes=40) == [
        ["Good one.", "Also good."], ["Next."]]
    assert stats.as_dict()["skipped_lines"] == 2


def test_bad_lines_can_fail_naming_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"Good.\nStill good.\n\nBad \xc3 here.\n")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad.txt.*line.*\b4\b"):
        _documents(str(path), bad_lines="fail")


def test_missing_and_wrong_inputs_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        document_dataset(str(tmp_path / "nothing-here*"))
    with pytest.raises(IsADirectoryError, match="give the files"):
        document_dataset(str(tmp_path))
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="all empty"):
        document_dataset(str(tmp_path / "empty.txt"))
    (tmp_path / "a.txt").write_text("x\n")
    for argument, value in [("format", "xml"), ("bad_lines", "ignore"), ("window_size", 0)]:
        with pytest.raises(ValueError, match=argument):
            document_windows(str(tmp_path / "a.txt"), **{argument: value})


def test_paragraphs_are_split_into_sentences(tmp_path):
    (tmp_path / "p.txt").write_text(
        "Dr. Watson met Mr. Holmes. They talked! Then they left.\n\n"
        "A second paragraph is here. It has 2 sentences.\n")
    assert _documents(str(tmp_path / "p.txt"), format="paragraphs") == [
        ["Dr. Watson met Mr. Holmes.", "They talked!", "Then they left."],
        ["A second paragraph is here.", "It has 2 sentences."]]


def test_sentence_splitter_cases():
    cases = {
        "It costs $3.50. That is cheap.": ["It costs $3.50.", "That is cheap."],
        'He said "Stop." She stopped.': ['He said "Stop."', "She stopped."],
        "See Fig. 3 and e.g. the table. Next one.": ["See Fig. 3 and e.g. the table.",
                                                     "Next one."],
        "The U.S. economy grew. Prices rose.": ["The U.S. economy grew.", "Prices rose."],
        "Version 3.11 is out (really). Try it.": ["Version 3.11 is out (really).", "Try it."],
        "no capital after. so no split": ["no capital after. so no split"],
        "Wait... What? Yes!": ["Wait...", "What?", "Yes!"],
        "   ": [],
    }
    split = split_sentences(list(cases)).to_list()
    assert [[s.decode() for s in row] for row in split] == list(cases.values())


def test_windows_hold_at_least_window_size_documents(tmp_path):
    text = "".join(f"Sentence {i}.\nMore {i}.\n\n" for i in range(100))
    (tmp_path / "c.txt").write_text(text)
    sizes = [int(w.nrows()) for w in document_windows(str(tmp_path / "c.txt"), window_size=16)]
    assert sum(sizes) == 100 and all(size >= 16 for size in sizes[:-1]) and sizes[-1] >= 1


def test_input_context_gives_each_pipeline_its_own_files(tmp_path):
    for index in range(4):
        (tmp_path / f"f{index}.txt").write_text(f"File {index} one.\n\nFile {index} two.\n")
    pattern = str(tmp_path / "*.txt")
    everything = sorted(map(tuple, _documents(pattern)))
    shares = [_documents(pattern, input_context=tf.distribute.InputContext(2, index))
              for index in range(2)]
    assert not set(map(tuple, shares[0])) & set(map(tuple, shares[1]))
    assert sorted(map(tuple, shares[0] + shares[1])) == everything
