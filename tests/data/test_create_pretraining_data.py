"""`kerasbert-create-pretraining-data`: Google-format records, byte-identical reruns, resume.

The binary runs in this process (`tests.binaries.run_binary`), except where it is killed."""

import glob
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import kerasbert.data.demo
from kerasbert.data.tfrecords import read_pretraining_records
from tests.binaries import run_binary

VOCAB = os.path.join(kerasbert.data.demo.vocabulary_dir("wordpiece"), "vocab.txt")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Four shards of real text, about a tenth of the shipped corpus each."""
    directory = tmp_path_factory.mktemp("corpus")
    lines = []
    for path in kerasbert.data.demo.pretraining_corpus_files():
        with gzip.open(path, "rt", encoding="utf-8") as file:
            lines.extend(file.read().split("\n")[:1200])
    text = "\n".join(lines)
    documents = [d for d in text.split("\n\n") if d.strip()]
    for index in range(4):
        (directory / f"part-{index}.txt").write_text("\n\n".join(documents[index::4]) + "\n")
    return str(directory / "part-*.txt")


def _flags(corpus, output, *extra):
    return [f"--input_file={corpus}", f"--output_file={output}", f"--vocab_file={VOCAB}",
            "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2",
            "--random_seed=7", *extra]


def _binary(*flags):
    return run_binary("create_pretraining_data", *flags)


def _run(corpus, output, *extra):
    result = _binary(*_flags(corpus, output, *extra))
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _digests(directory):
    return {name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
            for name in sorted(os.listdir(directory))}


@pytest.fixture(scope="module")
def first_run(corpus, tmp_path_factory):
    directory = tmp_path_factory.mktemp("first")
    stdout = _run(corpus, directory / "train.tfrecord", "--num_shards=3")
    return directory, stdout


@pytest.mark.slow
def test_shards_hold_masked_nsp_instances(first_run):
    directory, stdout = first_run
    assert sorted(os.listdir(directory)) == [
        f"train-0000{i}-of-00003.tfrecord" for i in range(3)] + ["train.tfrecord.manifest.json"]
    instances = list(read_pretraining_records(str(directory / "*.tfrecord"), 64, 10)
                     .batch(100_000).take(1))[0]
    instances = {name: value.numpy() for name, value in instances.items()}
    count = len(instances["token_ids"])
    assert count > 500
    assert 0.4 < instances["next_sentence_labels"].mean() < 0.65
    weights = instances["masked_lm_weights"]
    real = instances["padding_mask"].sum()
    assert abs(weights.sum() / real - 0.15) < 0.02
    positions = instances["masked_lm_positions"]
    picked = np.take_along_axis(instances["token_ids"], positions, axis=1)[weights > 0]
    assert 0.75 < (picked == 4).mean() < 0.85          # [MASK] is id 4 in the shipped vocab
    assert f"instances: {count:,}" in stdout
    for words in ("documents:", "tokens:", "masked:", "random next", "seconds:"):
        assert words in stdout


@pytest.mark.slow
def test_same_flags_give_byte_identical_files(corpus, first_run, tmp_path):
    _run(corpus, tmp_path / "train.tfrecord", "--num_shards=3")
    assert _digests(tmp_path) == _digests(first_run[0])


@pytest.mark.slow
def test_gzip_and_other_objectives(corpus, tmp_path):
    stdout = _run(corpus, tmp_path / "sop.tfrecord.gz", "--objective=sop", "--compression=gzip",
                  "--ngram=3")
    assert "swapped" in stdout
    with open(tmp_path / "sop.tfrecord.gz", "rb") as file:
        assert file.read(2) == b"\x1f\x8b"
    instances = list(read_pretraining_records(str(tmp_path / "sop.tfrecord.gz"), 64, 10,
                                              compression="auto").batch(100_000))[0]
    assert 0.4 < instances["next_sentence_labels"].numpy().mean() < 0.6


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_files(corpus, first_run, tmp_path):
    """SIGKILL after the first shard is complete; a rerun keeps it and writes the rest."""
    output = tmp_path / "train.tfrecord"
    process = subprocess.Popen([sys.executable, "-m", "kerasbert.cli.create_pretraining_data",
                                *_flags(corpus, output, "--num_shards=3")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first_shard = tmp_path / "train-00000-of-00003.tfrecord"
    deadline = time.time() + 300
    while not first_shard.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert first_shard.exists()
    finished = [name for name in os.listdir(tmp_path) if name.endswith(".tfrecord")]
    assert len(finished) < 3, "the run ended before it could be killed"
    assert (tmp_path / "train.tfrecord.intent.json").exists()  # written before the first shard
    kept = first_shard.stat().st_mtime_ns
    stdout = _run(corpus, output, "--num_shards=3")
    assert "train-00000-of-00003.tfrecord is complete; skipped" in stdout
    assert first_shard.stat().st_mtime_ns == kept
    leftovers = {name for name in os.listdir(tmp_path) if name.startswith(".tmp")}
    assert {name: digest for name, digest in _digests(tmp_path).items()
            if name not in leftovers} == _digests(first_run[0])


@pytest.mark.slow
def test_an_unfinished_output_refuses_other_flags_and_goes_on_with_its_own(corpus, first_run,
                                                                          tmp_path):
    """Task 0 of 2 leaves an unfinished data set (shards 0 and 2, no complete manifest) and its
    intent; task 1 with another --dupe_factor is refused in one line, changing nothing; task 1
    with the same flags finishes it (the same shards as one process) and removes the intent."""
    output = tmp_path / "train.tfrecord"
    _run(corpus, output, "--num_shards=3", "--num_tasks=2", "--task_index=0")
    intent = json.loads((tmp_path / "train.tfrecord.intent.json").read_text())
    assert intent["flags"]["dupe_factor"] == 2 and intent["flags"]["random_seed"] == 7
    assert intent["input_files"] == sorted(glob.glob(corpus))
    before = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
    refused = _binary(*_flags(corpus, output, "--num_shards=3", "--num_tasks=2",
                              "--task_index=1", "--dupe_factor=1"))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    line = refused.stderr.strip().splitlines()[-1]
    assert line.startswith("kerasbert-create-pretraining-data: error: ")
    assert "is unfinished" in line and "--dupe_factor: recorded 2, given 1" in line
    assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == before
    _run(corpus, output, "--num_shards=3", "--num_tasks=2", "--task_index=1")
    assert not (tmp_path / "train.tfrecord.intent.json").exists()
    shards = {name: digest for name, digest in _digests(tmp_path).items()
              if name.endswith(".tfrecord")}
    assert shards == {name: digest for name, digest in _digests(first_run[0]).items()
                      if name.endswith(".tfrecord")}


@pytest.mark.slow
def test_bad_flags_are_reported(corpus, tmp_path):
    result = _binary(f"--input_file={tmp_path}/missing-*.txt",
                     f"--output_file={tmp_path}/x.tfrecord", f"--vocab_file={VOCAB}")
    assert result.returncode != 0 and "missing-*.txt" in result.stderr
    result = _binary(f"--input_file={corpus}", f"--output_file={tmp_path}/x.tfrecord")
    assert result.returncode != 0 and "--vocab_file" in result.stderr
    assert not os.path.exists(tmp_path / "x.tfrecord")


@pytest.mark.slow
def test_a_share_too_small_for_an_instance(tmp_path):
    """Six documents, in one file: one window, so with two shards the second gets no instance. In
    one task it is written empty, with a warning (the task made instances); as the only shard of
    task 1 of 2 it is an error that names the share and writes nothing (the task made none)."""
    small = tmp_path / "small.txt"
    small.write_text("\n\n".join("\n".join(f"The function returns value {number} of the list "
                                            f"in section {document}." for number in range(4))
                                  for document in range(6)) + "\n")
    one = _binary(*_flags(small, tmp_path / "one" / "train.tfrecord", "--num_shards=2"))
    two = _binary(*_flags(small, tmp_path / "two" / "train.tfrecord", "--num_shards=2",
                          "--num_tasks=2", "--task_index=1"))
    assert one.returncode == 0, one.stderr[-3000:]
    empty = tmp_path / "one" / "train-00001-of-00002.tfrecord"
    assert (f"warning: {empty} holds no instances: its share of the corpus was too small; use "
            "fewer --num_shards") in one.stdout
    manifest = json.loads((tmp_path / "one" / "train.tfrecord.manifest.json").read_text())
    assert [shard["instances"] > 0 for shard in manifest["shards"]] == [True, False]
    assert two.returncode == 1 and "Traceback" not in two.stderr, two.stderr[-3000:]
    assert two.stderr.strip().splitlines()[-1] == (
        f"kerasbert-create-pretraining-data: error: no instances for task 1 of 2 of "
        f"{tmp_path / 'two' / 'train.tfrecord'}: the 6 documents read from {small} (0 of them "
        "without a single token; 0 lines were skipped as not valid UTF-8 (or longer than 1 MiB)) "
        "were too few for one instance; use fewer --num_shards or --num_tasks. Nothing was "
        "written")
    assert os.listdir(tmp_path / "two") == []


@pytest.mark.slow
def test_a_corpus_without_text_is_an_error_that_leaves_nothing(tmp_path):
    """Every line skipped (a binary file; Latin-1 text), or, in `bytes(range(256))` repeated, one
    "document" of control characters that gives no token: a one-line error naming the files, the
    skipped lines and the documents without a token, not an empty TFRecord and exit status 0; as
    task 0 of 2 (sharded by window) too. What a killed run left for the output file is
    removed; a look-alike name is kept (and is all that is left)."""
    binary = tmp_path / "binary" / "image.bin"
    binary.parent.mkdir()
    binary.write_bytes(b"\n".join(bytes(range(0x80, 0x100)) * 3 for _ in range(40)))
    latin = tmp_path / "latin" / "text.txt"
    latin.parent.mkdir()
    latin.write_bytes("\n".join(["Le café est très fort."] * 30 + ["", "Où est la gare ?"] * 5)
                      .encode("latin-1"))
    garbage = tmp_path / "garbage" / "all_bytes.txt"
    garbage.parent.mkdir()
    garbage.write_bytes(bytes(range(256)) * 40)
    # (corpus, lines skipped, documents read, documents without a token, extra flags, shard):
    # the blank lines of the Latin-1 file are valid; in `bytes(range(256))` each repetition has
    # one line break, and the first line (bytes 0-9) is valid UTF-8: one document, no token.
    cases = [(binary, 40, 0, 0, [], "train.tfrecord"), (latin, 35, 0, 0, [], "train.tfrecord"),
             (garbage, 40, 1, 1, [], "train.tfrecord"),
             (garbage, 40, 1, 1, ["--num_shards=2", "--num_tasks=2"],
              "train-00000-of-00002.tfrecord")]
    for index, (*_, shard) in enumerate(cases):
        (tmp_path / f"out-{index}").mkdir()
        (tmp_path / f"out-{index}" / f".tmp-{shard}-0a1b2c3d").write_bytes(b"half-written")
        (tmp_path / f"out-{index}" / f".tmp-{shard}-mine").write_bytes(b"the user's")
    results = [_binary(*_flags(path, tmp_path / f"out-{index}" / "train.tfrecord", *extra))
               for index, (path, _, _, _, extra, _) in enumerate(cases)]
    for index, (case, result) in enumerate(zip(cases, results)):
        path, lines, documents, without_tokens, extra, shard = case
        stderr = result.stderr.strip()
        assert result.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
        last_line = stderr.splitlines()[-1]
        assert last_line.startswith("kerasbert-create-pretraining-data: error: no instances"), last_line
        assert f"{path} gave no document with a token ({documents} documents read, " \
               f"{without_tokens} of them without a single token); {lines} lines were skipped " \
               "as not valid UTF-8" in last_line
        assert last_line.endswith("Nothing was written")
        assert os.listdir(tmp_path / f"out-{index}") == [f".tmp-{shard}-mine"]
