"""`pretraining_dataset`: masked batches, deterministic, re-masked per epoch, sharded per
worker, with memory bounded by its buffers rather than the corpus."""

import collections
import gzip
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import kerasbert.data.demo
import kerasbert.zoo
from kerasbert.data.pretraining import PretrainingDataConfig, instance_batches, pretraining_dataset

CORPUS = kerasbert.data.demo.pretraining_corpus_files()


@pytest.fixture(scope="module")
def tokenizer():
    return kerasbert.zoo.build_tokenizer("bert_tiny_uncased",
                                         kerasbert.data.demo.vocabulary_dir("wordpiece"))


def _batches(dataset, count):
    return [{name: value.numpy() for name, value in batch.items()}
            for batch in dataset.take(count)]


@pytest.mark.slow
def test_batches_are_masked_and_shaped(tokenizer):
    batches = _batches(pretraining_dataset(CORPUS, tokenizer, PretrainingDataConfig(
        batch_size=16, max_seq_length=64, max_predictions_per_seq=10, shuffle_buffer=200)), 5)
    for batch in batches:
        assert batch["token_ids"].shape == (16, 64)
        assert batch["masked_lm_positions"].shape == (16, 10)
        assert batch["next_sentence_labels"].shape == (16,)
        assert batch["masked_lm_weights"].sum() > 16
    assert set(batches[0]) == {"token_ids", "segment_ids", "padding_mask", "next_sentence_labels",
                               "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"}


@pytest.mark.slow
def test_same_seed_same_batches_and_each_epoch_new_masks(tokenizer):
    def make(seed):
        return pretraining_dataset(CORPUS, tokenizer, PretrainingDataConfig(
            batch_size=32, max_seq_length=64, max_predictions_per_seq=10, shuffle_buffer=500),
            seed=seed, epochs=2)
    first, again, other = _batches(make(1), 400), _batches(make(1), 400), _batches(make(2), 3)
    for a, b in zip(first, again):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    assert not np.array_equal(first[0]["token_ids"], other[0]["token_ids"])
    # The second epoch is built and masked anew (RoBERTa's dynamic masking).
    per_epoch = len(first) // 2
    assert per_epoch > 50
    assert not np.array_equal(first[0]["masked_lm_positions"],
                              first[per_epoch]["masked_lm_positions"])


@pytest.mark.slow
@pytest.mark.parametrize("shards", [1, 4], ids=["one_file", "four_files"])
def test_workers_see_disjoint_parts_that_cover_everything(tokenizer, tmp_path, shards):
    files = CORPUS[:1] if shards == 1 else CORPUS

    def rows(input_context=None):
        batches = instance_batches(files, tokenizer, PretrainingDataConfig("doc_sentences", 64),
                                   input_context=input_context)
        return [tuple(row) for batch in batches for row in batch["token_ids"].numpy().tolist()]

    everything = rows()
    parts = [rows(tf.distribute.InputContext(2, index)) for index in range(2)]
    assert parts[0] and parts[1]
    # doc_sentences blocks depend on their document only: the two shares add up to the whole,
    # counting repeats (the same short text can occur in two documents), so none is read twice.
    assert collections.Counter(parts[0]) + collections.Counter(parts[1]) == collections.Counter(
        everything)


_MEMORY_SCRIPT = """
import json, resource, sys
import kerasbert.data.demo, kerasbert.zoo
from kerasbert.data.pretraining import PretrainingDataConfig, pretraining_dataset
tokenizer = kerasbert.zoo.build_tokenizer("bert_tiny_uncased",
                                          kerasbert.data.demo.vocabulary_dir("wordpiece"))
count = 0
for batch in pretraining_dataset(sys.argv[1], tokenizer,
                                 PretrainingDataConfig(batch_size=64, shuffle_buffer=2000)):
    count += int(batch["token_ids"].shape[0])
print(json.dumps({"instances": count,
                  "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


@pytest.mark.slow
def test_memory_does_not_grow_with_the_corpus(tmp_path):
    """Peak RSS for a corpus 10x larger grows by less than 20%."""
    text = "".join(gzip.open(path, "rt", encoding="utf-8").read() + "\n\n" for path in CORPUS)
    results = {}
    for copies in (1, 10):
        directory = tmp_path / f"x{copies}"
        directory.mkdir()
        for index in range(copies):
            (directory / f"part-{index:02d}.txt").write_text(text)
        output = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, str(directory / "*.txt")],
                                capture_output=True, text=True, timeout=1200)
        assert output.returncode == 0, output.stderr[-3000:]
        results[copies] = json.loads(output.stdout.strip().splitlines()[-1])
    assert results[10]["instances"] > 9 * results[1]["instances"]
    assert results[10]["peak_rss_kb"] < 1.2 * results[1]["peak_rss_kb"], results
