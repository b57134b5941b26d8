"""Data and tokenizers on TensorFlow's file systems: `ram://` (in-memory, the stand-in here for
`gs://` and `s3://`) gives what the local disk gives, from the library in one process and from
`kerasbert-vocab` and `kerasbert-create-pretraining-data` run with every path on `ram://`.

Every test runs in an empty working folder and must leave no local folder named `ram:` there (a
`ram://` path used as a local one)."""

import csv
import gzip
import json
import os
import shutil
import subprocess
import sys
import uuid

import numpy as np
import pytest
import tensorflow as tf

import kerasbert.data.demo as demo
import kerasbert.zoo
from kerasbert import file_system
from kerasbert.data.conll import ConllSentence, read_conll, write_conll_predictions
from kerasbert.data.corpus import CorpusStats, corpus_files, document_windows
from kerasbert.data.glue import glue_examples, write_dev_predictions, write_test_predictions
from kerasbert.data.manifest import (finish_intent, intent_path, manifest_path, read_manifest,
                                     start_intent, task_manifest, write_manifest)
from kerasbert.data.masking import MaskedLmMasker
from kerasbert.data.pretraining import PretrainingDataConfig, instance_batches, pretraining_dataset
from kerasbert.data.service import DISTRIBUTED_EPOCH, distribute, start_dispatcher, start_worker
from kerasbert.data.squad import read_squad
from kerasbert.data.squad_decoding import SquadPredictions, write_squad_predictions
from kerasbert.data.swag import swag_examples, write_swag_predictions
from kerasbert.data.tfrecords import (completed_shards, read_pretraining_records,
                                      serialize_instances, shard_paths, write_tfrecord)
from kerasbert.tokenizers.byte_pair_training import train_byte_pair
from kerasbert.tokenizers.sentence_piece import load_sentence_piece_tokenizer
from kerasbert.tokenizers.sentence_piece_training import train_sentence_piece
from kerasbert.tokenizers.text_files import iterate_lines
from kerasbert.tokenizers.vocabulary_files import load_tokenizer
from kerasbert.tokenizers.wordpiece_training import train_wordpiece
from tests.ram_runs import run_on_ram

TEXTS = ["The list is sorted in place.", "Ünïcode wörds, numbers 3.14 and ‘quotes’!"]


@pytest.fixture(autouse=True)
def no_local_ram_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield
    assert not os.path.exists(tmp_path / "ram:"), "a ram:// path was used as a local path"


@pytest.fixture
def ram():
    folder = f"ram://test-data-remote-{uuid.uuid4().hex}"
    yield folder
    file_system.rmtree(folder)


@pytest.fixture(scope="module")
def local_corpus(tmp_path_factory):
    """Two corpus files, one plain and one gzip: about 1,500 lines of the shipped corpus."""
    folder = tmp_path_factory.mktemp("corpus")
    with gzip.open(demo.pretraining_corpus_files()[0], "rt", encoding="utf-8") as file:
        lines = file.read().split("\n")[:1500]
    (folder / "part-0.txt").write_text("\n".join(lines[:700]) + "\n", encoding="utf-8")
    with gzip.open(folder / "part-1.txt.gz", "wt", encoding="utf-8") as file:
        file.write("\n".join(lines[700:]) + "\n")
    return folder


def _upload(local_folder, remote_folder):
    file_system.copy_tree(str(local_folder), remote_folder)
    return remote_folder


def _bytes(path):
    return file_system.read_bytes(str(path))


# Vocabularies.

@pytest.mark.slow
def test_vocabularies_are_trained_from_and_to_ram(ram, local_corpus, tmp_path):
    corpus = _upload(local_corpus, file_system.join(ram, "corpus"))
    remote_files = [file_system.join(corpus, "part-0.txt"), file_system.join(corpus, "part-1.txt.gz")]
    local_files = [str(local_corpus / "part-0.txt"), str(local_corpus / "part-1.txt.gz")]
    assert list(iterate_lines(remote_files)) == list(iterate_lines(local_files))

    train_wordpiece(remote_files, 400, output_dir=file_system.join(ram, "wordpiece"))
    train_wordpiece(local_files, 400, output_dir=str(tmp_path / "wordpiece"))
    train_byte_pair(remote_files, 400, output_dir=file_system.join(ram, "byte_pair"))
    train_byte_pair(local_files, 400, output_dir=str(tmp_path / "byte_pair"))
    train_sentence_piece(remote_files, 300, output_dir=file_system.join(ram, "sentence_piece"))
    train_sentence_piece(local_files, 300, output_dir=str(tmp_path / "sentence_piece"))
    for kind, names in [("wordpiece", ["vocab.txt"]), ("byte_pair", ["merges.txt", "vocab.json"]),
                        ("sentence_piece", ["spiece.model"])]:
        assert file_system.listdir(file_system.join(ram, kind)) == names
        for name in names:
            assert _bytes(file_system.join(ram, kind, name)) == _bytes(tmp_path / kind / name)

    tokenizers = {
        "wordpiece": (load_tokenizer(file_system.join(ram, "wordpiece", "vocab.txt")),
                      load_tokenizer(str(tmp_path / "wordpiece" / "vocab.txt"))),
        "byte_pair": (load_tokenizer(file_system.join(ram, "byte_pair", "vocab.json"),
                                     file_system.join(ram, "byte_pair", "merges.txt")),
                      load_tokenizer(str(tmp_path / "byte_pair" / "vocab.json"),
                                     str(tmp_path / "byte_pair" / "merges.txt"))),
        "sentence_piece": (load_sentence_piece_tokenizer(file_system.join(ram, "sentence_piece")),
                           load_sentence_piece_tokenizer(str(tmp_path / "sentence_piece"))),
        "zoo": (kerasbert.zoo.build_tokenizer("roberta_base", file_system.join(ram, "byte_pair")),
                kerasbert.zoo.build_tokenizer("roberta_base", str(tmp_path / "byte_pair"))),
    }
    for remote, local in tokenizers.values():
        assert remote.tokenize(TEXTS).to_list() == local.tokenize(TEXTS).to_list()


def test_a_missing_remote_vocabulary_or_corpus_is_named(ram):
    with pytest.raises(FileNotFoundError, match="test-data-remote-.*/vocab.txt"):
        load_tokenizer(file_system.join(ram, "vocab.txt"))
    with pytest.raises(FileNotFoundError, match="test-data-remote-.*/corpus/"):
        corpus_files(file_system.join(ram, "corpus", "*.txt"))
    with pytest.raises(FileNotFoundError, match="test-data-remote-.*/corpus.txt"):
        train_wordpiece([file_system.join(ram, "corpus.txt")], 100)


# Corpora and pretraining data.

@pytest.mark.slow
def test_corpus_windows_and_pretraining_batches_on_ram_are_the_local_ones(ram, local_corpus):
    corpus = _upload(local_corpus, file_system.join(ram, "corpus"))
    remote_stats, local_stats = CorpusStats(), CorpusStats()
    remote = [window.to_list() for window in document_windows(
        file_system.join(corpus, "part-*"), 16, stats=remote_stats)]
    local = [window.to_list() for window in document_windows(
        str(local_corpus / "part-*"), 16, stats=local_stats)]
    assert remote == local and remote_stats.as_dict() == local_stats.as_dict()
    assert local_stats.as_dict()["documents"] > 30

    tokenizer = _wordpiece()
    batches = [list(pretraining_dataset(pattern, tokenizer, PretrainingDataConfig(
                        batch_size=8, max_seq_length=64, shuffle_buffer=50), seed=3).take(4))
               for pattern in (file_system.join(corpus, "part-*"), str(local_corpus / "part-*"))]
    for remote_batch, local_batch in zip(*batches):
        assert remote_batch.keys() == local_batch.keys()
        for name in remote_batch:
            np.testing.assert_array_equal(remote_batch[name], local_batch[name])


def _wordpiece():
    return kerasbert.zoo.build_tokenizer("bert_tiny_uncased", demo.vocabulary_dir("wordpiece"))


def _write_data_set(corpus_pattern, output_file):
    """What `kerasbert-create-pretraining-data --num_shards=2` does, from the library: the
    intent, masked shards, the manifest, the intent removed."""
    files = corpus_files(corpus_pattern)
    tokenizer = _wordpiece()
    masker = MaskedLmMasker.for_tokenizer(tokenizer, max_predictions_per_seq=10)
    paths = shard_paths(output_file, 2)
    assert start_intent(output_file, {"dupe_factor": 1}, files, [])
    assert file_system.exists(intent_path(output_file))
    for index, path in enumerate(paths):
        batches = instance_batches(files, tokenizer, PretrainingDataConfig("nsp", 64),
                                   seed=index, shard=(index, 2))
        write_tfrecord(path, (serialize_instances(masker(batch, tf.constant([5, index], tf.int64)))
                              for batch in batches))
    assert completed_shards(paths) == [True, True]
    write_manifest(manifest_path(output_file), task_manifest(
        {path: ["corpus"] for path in paths}, seed=5, flags={"dupe_factor": 1}, task_index=0,
        num_tasks=1))
    finish_intent(output_file)
    return paths


@pytest.mark.slow
def test_pretraining_shards_and_manifest_on_ram_are_the_local_ones(ram, local_corpus, tmp_path):
    corpus = _upload(local_corpus, file_system.join(ram, "corpus"))
    remote_paths = _write_data_set(file_system.join(corpus, "part-*"),
                                   file_system.join(ram, "data", "train.tfrecord"))
    local_paths = _write_data_set(str(local_corpus / "part-*"), str(tmp_path / "train.tfrecord"))
    assert remote_paths == [file_system.join(ram, "data", f"train-0000{i}-of-00002.tfrecord")
                            for i in range(2)]
    assert file_system.listdir(file_system.join(ram, "data")) == [
        "train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord",
        "train.tfrecord.manifest.json"]
    for remote, local in zip(remote_paths, local_paths):
        assert _bytes(remote) == _bytes(local)
    remote_manifest = read_manifest(manifest_path(file_system.join(ram, "data", "train.tfrecord")))
    assert remote_manifest == read_manifest(manifest_path(str(tmp_path / "train.tfrecord")))
    assert remote_manifest["instances"] > 100

    records = [list(read_pretraining_records(pattern, 64, 10).batch(1000).take(1))[0]
               for pattern in (file_system.join(ram, "data", "train-*"),
                               str(tmp_path / "train-*"))]
    for name in records[0]:
        np.testing.assert_array_equal(records[0][name], records[1][name])


# Task files and predictions.

GLUE_DEV = ("sentence\tlabel\r\n"
            "a stray \r stays in the field\t1\r\n"
            "plain line\t0\n")
CONLL = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"
SQUAD = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
    "context": "Paris is the capital of France.",
    "qas": [{"id": "a", "question": "Capital?", "is_impossible": False,
             "answers": [{"text": "Paris", "answer_start": 0}]},
            {"id": "b", "question": "Of Peru?", "is_impossible": True, "answers": []}]}]}]}
SWAG_HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
               "ending0", "ending1", "ending2", "ending3", "label"]


@pytest.fixture
def task_files(tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "dev.tsv").write_bytes(GLUE_DEV.encode())
    shutil.copy(demo.classification_files()["dev"], folder / "wordnet_gloss-dev.tsv.gz")
    (folder / "conll.txt").write_text(CONLL)
    (folder / "dev-v2.0.json").write_text(json.dumps(SQUAD))
    with open(folder / "val.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(SWAG_HEADER)
        writer.writerow(["0", "v", "1", "A man, smiling.", "A man smiles.", "He", "gold",
                         "waves.", "sleeps,\nthen wakes.", "eats.", "hides.", "1"])
    return folder


def _read_tasks(folder, join):
    return {
        "sst2": list(glue_examples("sst2", join(folder, "dev.tsv"))),
        "wordnet_gloss": list(glue_examples("wordnet_gloss",
                                            join(folder, "wordnet_gloss-dev.tsv.gz"))),
        "conll": [(s.words, s.tags, s.line) for s in read_conll(join(folder, "conll.txt"))],
        "squad": [(e.qas_id, e.context, e.answers, e.is_impossible)
                  for e in read_squad(join(folder, "dev-v2.0.json"))],
        "swag": list(swag_examples(join(folder, "val.csv"))),
    }


def test_task_files_on_ram_read_as_the_local_ones(ram, task_files):
    remote = _read_tasks(_upload(task_files, file_system.join(ram, "tasks")), file_system.join)
    local = _read_tasks(str(task_files), os.path.join)
    assert remote == local
    assert remote["sst2"][0].text_a == "a stray \r stays in the field"
    assert len(remote["wordnet_gloss"]) > 100 and remote["swag"][0].endings[1] == "sleeps,\nthen wakes."


def _write_predictions(folder, join, examples):
    file_system.makedirs(folder)
    write_dev_predictions(join(folder, "dev_predictions.tsv"), "sst2", examples["sst2"], [1, 0])
    write_test_predictions(folder, "sst2", "test", examples["sst2"], [0, 1])
    write_squad_predictions(folder, SquadPredictions({"a": "Paris", "b": ""}, {"a": [
        {"text": "Paris", "probability": 1.0, "start_logit": 2.0, "end_logit": 3.0}]},
        {"a": -2.0, "b": 4.0}))
    sentences = [ConllSentence(words, tags, "-", line) for words, tags, line in examples["conll"]]
    write_conll_predictions(join(folder, "conll_predictions.txt"), sentences,
                            [["B-ORG", "O"], ["O"]])
    write_swag_predictions(join(folder, "swag_predictions.tsv"), examples["swag"], [3])


def test_predictions_are_written_to_ram_as_locally(ram, task_files, tmp_path):
    examples = _read_tasks(str(task_files), os.path.join)
    _write_predictions(file_system.join(ram, "out"), file_system.join, examples)
    _write_predictions(str(tmp_path / "out"), os.path.join, examples)
    names = sorted(os.listdir(tmp_path / "out"))
    assert file_system.listdir(file_system.join(ram, "out")) == names == [
        "SST-2.tsv", "conll_predictions.txt", "dev_predictions.tsv", "nbest_predictions.json",
        "null_odds.json", "predictions.json", "swag_predictions.tsv"]
    for name in names:
        assert _bytes(file_system.join(ram, "out", name)) == _bytes(tmp_path / "out" / name)


def test_the_data_service_dispatcher_journals_on_ram(ram):
    work_dir = file_system.join(ram, "service")
    dispatcher = start_dispatcher(0, work_dir)
    worker = start_worker(dispatcher.target)
    try:
        served = distribute(tf.data.Dataset.range(3), dispatcher.target, DISTRIBUTED_EPOCH)
        assert sorted(int(value) for value in served) == [0, 1, 2]
    finally:
        worker.stop()
        dispatcher.stop()
    assert "tf_data_dispatcher_journal" in file_system.listdir(work_dir)


# The binaries, with every path on ram:// (in this process, on a ram:// folder emptied first).

@pytest.mark.slow
def test_kerasbert_vocab_on_ram_writes_what_the_library_writes(local_corpus, tmp_path):
    run = run_on_ram("vocab", ["--input_files={ram}/corpus/part-*", "--type=wordpiece",
                               "--vocab_size=400", "--output_dir={ram}/vocab"],
                     tmp_path, inputs={"corpus": local_corpus})
    assert run.returncode == 0, run.stderr[-3000:]
    assert not run.local_ram_folder_made
    assert "Wrote ram://kerasbert-test/vocab/vocab.txt" in run.stdout
    local = train_wordpiece([str(local_corpus / "part-0.txt"), str(local_corpus / "part-1.txt.gz")],
                            400)
    assert os.listdir(run.path("vocab")) == ["vocab.txt"]
    with open(run.path("vocab", "vocab.txt"), encoding="utf-8") as file:
        assert file.read().splitlines() == local


def _creation_flags(corpus, output_file, vocab_file):
    return [f"--input_file={corpus}", f"--output_file={output_file}", f"--vocab_file={vocab_file}",
            "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2",
            "--num_shards=2", "--random_seed=11"]


def _without_paths(manifest):
    """A manifest without what names the corpus, vocabulary and output (local or on ram://)."""
    flags = {name: value for name, value in manifest["flags"].items()
             if name not in ("input_file", "vocab_file")}
    shards = [{key: value for key, value in shard.items() if key != "input_files"}
              for shard in manifest["shards"]]
    return {**manifest, "flags": flags, "shards": shards}


@pytest.mark.slow
def test_kerasbert_create_pretraining_data_on_ram_writes_the_local_files(local_corpus, tmp_path):
    vocab = os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt")
    run = run_on_ram("create-pretraining-data", _creation_flags(
        "{ram}/corpus/part-*", "{ram}/data/train.tfrecord", "{ram}/vocab.txt"),
        tmp_path, inputs={"corpus": local_corpus, "vocab.txt": vocab})
    assert run.returncode == 0, run.stderr[-3000:]
    assert not run.local_ram_folder_made
    assert "documents:" in run.stdout and "instances:" in run.stdout

    local = tmp_path / "local"
    local.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.cli.create_pretraining_data", *_creation_flags(
            local_corpus / "part-*", local / "train.tfrecord", vocab)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]

    names = ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord",
             "train.tfrecord.manifest.json"]
    assert sorted(os.listdir(run.path("data"))) == sorted(os.listdir(local)) == names
    for name in names[:2]:
        assert _bytes(run.path("data", name)) == _bytes(local / name)
    manifests = [read_manifest(os.path.join(folder, names[2])) for folder in (run.path("data"), local)]
    assert _without_paths(manifests[0]) == _without_paths(manifests[1])
    assert manifests[0]["flags"]["input_file"] == ["ram://kerasbert-test/corpus/part-*"]
    assert [shard["input_files"] for shard in manifests[0]["shards"]] == [
        ["ram://kerasbert-test/corpus/part-0.txt"], ["ram://kerasbert-test/corpus/part-1.txt.gz"]]
