"""The document cap of a "documents" corpus: a run of lines without a blank line is cut into
documents of at most `MAX_DOCUMENT_LINES` lines (counted, and said in the binary's summary),
while corpora whose documents are shorter give exactly the windows and instances they gave
before the cap."""

import hashlib
import random

import pytest
import tensorflow as tf

import kerasbert.data.demo
import kerasbert.zoo
from kerasbert.data.corpus import MAX_DOCUMENT_LINES, CorpusStats, document_windows
from kerasbert.data.pretraining import PretrainingDataConfig, instance_batches
from tests.binaries import run_binary

# `document_windows` reads lines in chunks of this many (`kerasbert.data.corpus._CHUNK_LINES`):
# windows are given out at the end of a chunk.
CHUNK_LINES = 1024
VOCAB = f"{kerasbert.data.demo.vocabulary_dir('wordpiece')}/vocab.txt"


def _mixed_corpus(path):
    """Documents of 0 to 3,000 lines, one to three blank (or blank-looking) lines apart."""
    rng = random.Random(24)
    lines = []
    for number in range(300):
        count = rng.choice([1, 2, 3, 5, 8, 40, 200, 1500, 3000]) if number % 7 else rng.choice([0, 1])
        lines += [f"doc {number} sentence {i} " + "w" * rng.randrange(5) for i in range(count)]
        lines += [rng.choice(["", "   ", "\t"]) for _ in range(rng.choice([1, 1, 2, 3]))]
    path.write_text("\n".join(lines))
    return lines


def _expected_windows(lines, window_size, cap):
    """The rule, spelled out: a document ends at a blank line or after `cap` lines; finished
    documents are given out at the end of a chunk once there are `window_size`, and at the
    end of the file. Also returns how many documents were cut."""
    windows, finished, current, run, cut = [], [], [], 0, 0
    for start in range(0, len(lines), CHUNK_LINES):
        for line in lines[start:start + CHUNK_LINES]:
            if not line.strip():
                finished += [current] if current else []
                current, run = [], 0
                continue
            run += 1
            cut += run == cap + 1
            current.append(line)
            if len(current) == cap:
                finished.append(current)
                current = []
        if len(finished) >= window_size:
            windows.append(finished)
            finished = []
    finished += [current] if current else []
    return windows + ([finished] if finished else []), cut


def _windows(path, window_size, stats=None, **kwargs):
    return [[[sentence.decode() for sentence in document] for document in window.to_list()]
            for window in document_windows(str(path), window_size, stats=stats,
                                           num_parallel_files=1, **kwargs)]


def test_a_corpus_without_blank_lines_is_read_as_documents_of_the_cap(tmp_path):
    path = tmp_path / "no-blank-lines.txt"
    lines = [f"Sentence {i} of a corpus without a blank line." for i in range(200_000)]
    path.write_text("\n".join(lines) + "\n")
    stats = CorpusStats()
    windows = _windows(path, 64, stats)
    assert MAX_DOCUMENT_LINES == 65_536
    assert [len(document) for document in windows[0]] == [65_536, 65_536, 65_536, 3_392]
    assert len(windows) == 1 and sum(windows[0], []) == lines
    assert stats.as_dict()["split_documents"] == 1 and stats.as_dict()["documents"] == 4


@pytest.mark.parametrize("window_size", [4, 64])
def test_documents_are_cut_at_the_cap_and_windows_follow_the_rule(tmp_path, window_size):
    lines = _mixed_corpus(tmp_path / "mixed.txt")
    stats = CorpusStats()
    windows = _windows(tmp_path / "mixed.txt", window_size, stats, max_document_lines=100)
    expected, cut = _expected_windows(lines, window_size, cap=100)
    assert windows == expected
    assert max(len(document) for window in windows for document in window) == 100
    assert stats.as_dict()["split_documents"] == cut == 79  # the documents of over 100 lines


def test_max_document_lines_must_be_positive(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(ValueError, match="max_document_lines must be positive, got 0"):
        document_windows(str(tmp_path / "a.txt"), max_document_lines=0)


def _windows_digest(files, window_size):
    digest, sizes = hashlib.sha256(), []
    for window in document_windows(files, window_size, num_parallel_files=1):
        sizes.append(int(window.nrows()))
        digest.update(b"window %d" % sizes[-1])
        for document in window.to_list():
            digest.update(repr(document).encode())
    return len(sizes), sum(sizes), digest.hexdigest()


# Computed with the code before the cap (commit 33d6747, where `document_windows` carried the
# unfinished lines with `tf.concat`): the same corpora must give the same windows.
@pytest.mark.parametrize("source, window_size, expected", [
    ("mixed", 4, (38, 280, "eba1c1ce0f09d37251fa08cc98812b89a9cf2909a73dd2d80c1eb64bc520bbca")),
    ("mixed", 64, (5, 280, "9591ea593f6e7818c83223fa1fc2c060a63ff61ba77577daba0a5c997a859773")),
    ("demo", 16, (23, 734, "89525fd80f5fc83ad86ed7377279dc313170d8e99730bf65df26e01a7ea9eb46")),
    ("demo", 64, (12, 734, "3cdd140babd911c696d53e284f3674e4e08a72cfc3f6487a5eb0794e8f849ab2")),
])
def test_normal_corpora_give_the_windows_they_gave_before_the_cap(tmp_path, source, window_size,
                                                                   expected):
    if source == "mixed":
        _mixed_corpus(tmp_path / "mixed.txt")
        files = str(tmp_path / "mixed.txt")
    else:
        files = kerasbert.data.demo.pretraining_corpus_files()
    assert _windows_digest(files, window_size) == expected


@pytest.mark.slow
def test_normal_corpora_give_the_instances_they_gave_before_the_cap():
    tokenizer = kerasbert.zoo.build_tokenizer(
        "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    digest, instances = hashlib.sha256(), 0
    for batch in instance_batches(kerasbert.data.demo.pretraining_corpus_files()[:2], tokenizer,
                                  PretrainingDataConfig("nsp", 64), seed=7):
        for name in sorted(batch):
            digest.update(batch[name].numpy().tobytes())
        instances += int(batch["token_ids"].shape[0])
    # As computed before the cap (commit 33d6747).
    assert (instances, digest.hexdigest()) == (
        5071, "f51ba1d6881c3daff34372e49622edfc124666522e3d4124ddfd0dd310d3533c")


def _create_pretraining_data(corpus, output):
    """`kerasbert-create-pretraining-data`, in this process (`tests.binaries.run_binary`)."""
    result = run_binary(
        "create_pretraining_data", f"--input_file={corpus}", f"--output_file={output}",
        f"--vocab_file={VOCAB}", "--max_seq_length=64", "--max_predictions_per_seq=10",
        "--dupe_factor=1")
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_the_summary_says_how_many_documents_were_split(tmp_path):
    (tmp_path / "long.txt").write_text("".join(f"Line {i}.\n" for i in range(70_000)))
    stdout = _create_pretraining_data(tmp_path / "long.txt", tmp_path / "long.tfrecord")
    assert "documents: 2 (70,000 sentences, 0 lines skipped, 1 longer than 65,536 lines split)" \
        in stdout


def test_a_reader_checkpointed_with_lines_waiting_resumes_where_it_was(tmp_path):
    """Training checkpoints the data iterator: the lines waiting in the reader's state (a
    `tf.TensorArray`) are saved and restored with it."""
    (tmp_path / "c.txt").write_text("".join(
        "".join(f"doc {d} line {i}\n" for i in range(d % 13 * 40 + 1)) + "\n" for d in range(400)))
    windows = document_windows(str(tmp_path / "c.txt"), 8)
    iterator = iter(windows)
    for _ in range(3):
        next(iterator)
    saved = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "checkpoint"))
    expected = [next(iterator).to_list() for _ in range(3)]
    restored = iter(windows)
    tf.train.Checkpoint(iterator=restored).restore(saved)
    assert [next(restored).to_list() for _ in range(3)] == expected
