"""Instance builders: pairs really are consecutive (or from another document), labels balanced,
nothing lost, lengths respected. Token ids here name their document and position, so every
instance can be traced back to the text it came from."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data.instances import build_instances
from kerasbert.tokenizers import SpecialTokenLayout

BERT = SpecialTokenLayout(start_id=1, end_id=2, pad_id=0)
ROBERTA = SpecialTokenLayout(start_id=1, end_id=2, pad_id=0, pair_separators=2,
                             second_segment_id=0)
# Token id = FIRST_ID + document * DOCUMENT_SPAN + position in the document.
FIRST_ID, DOCUMENT_SPAN = 10, 10_000


def _documents(seed, count=40, max_sentences=30, max_sentence_length=40):
    """Documents of random shape; token ids tell document and position."""
    rng = np.random.default_rng(seed)
    documents = []
    for document in range(count):
        sentences, position = [], 0
        for _ in range(rng.integers(1, max_sentences + 1)):
            length = int(rng.integers(1, max_sentence_length + 1))
            base = FIRST_ID + document * DOCUMENT_SPAN + position
            sentences.append(list(range(base, base + length)))
            position += length
        documents.append(sentences)
    return documents


def _segments(row, layout):
    """(A tokens, B tokens) of a packed row."""
    tokens = [int(t) for t in row if t != layout.pad_id]
    assert tokens[0] == layout.start_id and tokens[-1] == layout.end_id
    body = tokens[1:-1]
    ends = [i for i, t in enumerate(body) if t == layout.end_id]
    if not ends:
        return body, []
    return body[:ends[0]], body[ends[0] + layout.pair_separators:]


def _origin(tokens):
    documents = {(t - FIRST_ID) // DOCUMENT_SPAN for t in tokens}
    assert len(documents) == 1, "a segment mixes documents"
    positions = [(t - FIRST_ID) % DOCUMENT_SPAN for t in tokens]
    assert positions == list(range(positions[0], positions[0] + len(positions))), \
        "a segment is not contiguous text"
    return documents.pop(), positions[0], positions[-1]


def _build(documents, objective, max_seq_length=64, seed=(3, 4), layout=BERT, **kwargs):
    batch = build_instances(tf.ragged.constant(documents, dtype=tf.int32), objective, layout,
                            max_seq_length, tf.constant(seed, tf.int64), **kwargs)
    return {name: value.numpy() for name, value in batch.items()}


def _many(objective, windows=12, **kwargs):
    batches = [_build(_documents(seed), objective, seed=(seed, 7), **kwargs)
               for seed in range(windows)]
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


def test_nsp_pairs_are_continuations_or_from_another_document():
    batch = _many("nsp")
    labels = batch["next_sentence_labels"]
    count = len(labels)
    assert count > 1500
    # Label 1 = random next: about half, as in Google's data (p=0.5 plus one-sentence chunks).
    assert 0.45 < labels.mean() < 0.62
    for row, label, segments in zip(batch["token_ids"], labels, batch["segment_ids"]):
        a, b = _segments(row, BERT)
        assert a and b and len(a) + len(b) <= 64 - 3
        document_a, _, last_a = _origin(a)
        document_b, first_b, _ = _origin(b)
        if label == 1:
            assert document_b != document_a
        else:
            assert document_b == document_a and first_b > last_a
        length = 3 + len(a) + len(b)
        assert segments[:len(a) + 2].tolist() == [0] * (len(a) + 2)
        assert segments[len(a) + 2:length].tolist() == [1] * (len(b) + 1)
        assert not segments[length:].any()


def test_nsp_continuations_are_adjacent_unless_truncated():
    batch = _many("nsp")
    adjacent = truncated = 0
    for row, label in zip(batch["token_ids"], batch["next_sentence_labels"]):
        if label:
            continue
        a, b = _segments(row, BERT)
        gap = _origin(b)[1] - _origin(a)[2] - 1
        if len(a) + len(b) < 64 - 3:
            assert gap == 0
        adjacent += gap == 0
        truncated += gap > 0
    # Google's truncation removes from the front or the back at random: both happen.
    assert adjacent > 100 and truncated > 10


def test_nsp_short_sequences():
    """With short_seq_prob=1 every document gets a random target in [2, max - 3]."""
    long_documents = _documents(5, max_sentences=60, max_sentence_length=8)
    full = _build(long_documents, "nsp", short_seq_prob=0.0)["padding_mask"].sum(1)
    short = _build(long_documents, "nsp", short_seq_prob=1.0)["padding_mask"].sum(1)
    assert np.median(full) >= 58 and np.median(short) < 50


def test_sop_pairs_are_consecutive_and_swapped_half_the_time():
    batch = _many("sop")
    labels = batch["next_sentence_labels"]
    assert len(labels) > 800
    spread = 5 * np.sqrt(0.25 / len(labels))
    assert abs(labels.mean() - 0.5) < spread
    for row, label in zip(batch["token_ids"], labels):
        a, b = _segments(row, BERT)
        assert a and b and len(a) + len(b) <= 64 - 3
        document_a, first_a, last_a = _origin(a)
        document_b, first_b, last_b = _origin(b)
        assert document_a == document_b
        if label == 0:
            assert first_b > last_a
        else:
            assert last_b < first_a


@pytest.mark.parametrize("objective", ["doc_sentences", "full_sentences"])
def test_roberta_blocks_hold_every_token_once_in_order(objective):
    documents = _documents(11, max_sentence_length=90)
    batch = _build(documents, objective, max_seq_length=64, layout=ROBERTA)
    tokens = []
    for row in batch["token_ids"]:
        a, b = _segments(row, ROBERTA) if objective == "doc_sentences" else (
            [int(t) for t in row if t != 0][1:-1], [])
        assert not b and 0 < len(a) <= 62
        if objective == "doc_sentences":
            _origin(a)
        tokens.extend(t for t in a if t != ROBERTA.end_id)
    assert tokens == [t for document in documents for sentence in document for t in sentence]
    assert not batch["segment_ids"].any() and not batch["next_sentence_labels"].any()


def test_full_sentences_cross_documents_with_a_separator():
    documents = _documents(12, count=30, max_sentences=3, max_sentence_length=10)
    batch = _build(documents, "full_sentences", max_seq_length=128, layout=ROBERTA)
    row = [int(t) for t in batch["token_ids"][0] if t != 0][1:-1]
    separators = [i for i, t in enumerate(row) if t == ROBERTA.end_id]
    assert separators, "no document boundary inside a 126-token block of short documents"
    for index in separators:
        if 0 < index < len(row) - 1:
            before, after = row[index - 1], row[index + 1]
            assert (after - FIRST_ID) // DOCUMENT_SPAN == (before - FIRST_ID) // DOCUMENT_SPAN + 1


def test_electra_segments_are_consecutive_text():
    batch = _many("electra", max_seq_length=64)
    assert not batch["next_sentence_labels"].any()
    single = 0
    for row in batch["token_ids"]:
        a, b = _segments(row, BERT)
        assert len(a) + len(b) + (3 if b else 2) <= 64
        document, _, last_a = _origin(a)
        if not b:
            single += 1
            continue
        document_b, first_b, _ = _origin(b)
        assert document_b == document and first_b > last_a
        if len(a) + len(b) < 64 - 3:
            assert first_b == last_a + 1
    # 10% one-segment instances on purpose, plus chunks that fit in the first half.
    assert 0.1 <= single / len(batch["token_ids"]) < 0.6


@pytest.mark.parametrize("objective", ["nsp", "sop", "electra", "doc_sentences"])
def test_deterministic_under_a_seed(objective):
    documents = _documents(3)
    first = _build(documents, objective, seed=(1, 2))
    again = _build(documents, objective, seed=(1, 2))
    other = _build(documents, objective, seed=(1, 3))
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    if objective != "doc_sentences":
        assert not np.array_equal(first["token_ids"][:len(other["token_ids"])],
                                  other["token_ids"][:len(first["token_ids"])])


@pytest.mark.slow
def test_in_graph_and_edge_cases():
    graph = tf.function(lambda documents: build_instances(
        documents, "nsp", BERT, 32, tf.constant([5, 6], tf.int64)))
    ragged = tf.ragged.constant(_documents(4, count=5), dtype=tf.int32)
    eager = build_instances(ragged, "nsp", BERT, 32, tf.constant([5, 6], tf.int64))
    np.testing.assert_array_equal(graph(ragged)["token_ids"], eager["token_ids"])
    # One document: no random next sentence exists, so only continuations.
    alone = _build(_documents(9, count=1), "nsp")
    assert len(alone["token_ids"]) and not alone["next_sentence_labels"].any()
    # Empty sentences and documents are ignored; nothing left gives no instances.
    empty = build_instances(tf.ragged.constant([[[]], [[], []]], dtype=tf.int32,
                                               ragged_rank=2), "nsp", BERT, 32, [1, 1])
    assert empty["token_ids"].shape.as_list() == [0, 32]


def test_bad_arguments_are_named():
    documents = tf.ragged.constant(_documents(1, count=2), dtype=tf.int32)
    with pytest.raises(ValueError, match="objective"):
        build_instances(documents, "mlm", BERT, 32, [1, 1])
    with pytest.raises(ValueError, match="max_seq_length=4"):
        build_instances(documents, "nsp", BERT, 4, [1, 1])
    with pytest.raises(ValueError, match="short_seq_prob"):
        build_instances(documents, "nsp", BERT, 32, [1, 1], short_seq_prob=2.0)
    with pytest.raises(ValueError, match="documents must be ragged"):
        build_instances(tf.constant([[1, 2]]), "nsp", BERT, 32, [1, 1])
