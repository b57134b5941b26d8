"""squad_windows / squad_dataset: windows, max context, answer positions and batches.

Independent references: transformers' fast tokenizers (their overflowing windows with
`stride = capacity - doc_stride`, since their stride is the overlap) for all three tokenizer
kinds, and Model Garden's `official.nlp.data.squad_lib` (Google's BERT SQuAD code) for WordPiece.
"""

import collections
import json
import os

import numpy as np
import pytest
import transformers

import kerasbert.zoo
from kerasbert.data import demo
from kerasbert.data.squad import SquadAnswer, SquadExample, read_squad
from kerasbert.data.squad_decoding import decode_squad
from kerasbert.data.squad_features import (answer_token_span, context_windows,
                                           max_context_windows, squad_dataset, squad_windows)
from kerasbert.data.task_errors import TaskDataError
from tests.helpers import model_garden_squad_lib

PRESETS = {"wordpiece": "bert_tiny_uncased", "byte_pair": "roberta_base",
           "sentence_piece": "albert_base_v2"}
LONG_CONTEXT = ("The leader was John Smith (1895-1943). Japanese electronics lead the world. "
                * 4 + "In 1999, Zürich's café hosted 2,000 people.")


@pytest.fixture(scope="module", params=sorted(PRESETS))
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def tokenizers():
    return {kind: kerasbert.zoo.build_tokenizer(preset, demo.vocabulary_dir(kind))
            for kind, preset in PRESETS.items()}


@pytest.fixture(scope="module")
def wordpiece(tokenizers):
    return tokenizers["wordpiece"]


@pytest.fixture(scope="module")
def one_token_words():
    """Lower-case whole words of the demo WordPiece vocabulary: each is one token."""
    with open(os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt"), encoding="utf-8") as f:
        words = [line.strip() for line in f if line.strip().isalpha() and len(line.strip()) > 3]
    return words[:60]


def _hf_tokenizer(kind):
    directory = demo.vocabulary_dir(kind)
    if kind == "wordpiece":
        return transformers.BertTokenizerFast(vocab=os.path.join(directory, "vocab.txt"))
    if kind == "byte_pair":
        return transformers.RobertaTokenizerFast(vocab=os.path.join(directory, "vocab.json"),
                                                 merges=os.path.join(directory, "merges.txt"))
    return transformers.AlbertTokenizer.from_pretrained(directory)


def _batch(features):
    batch = next(iter(squad_dataset(features, batch_size=1000)))
    return {name: value.numpy() for name, value in batch.items()}


# --- windows ---

def test_context_windows_step_by_doc_stride_and_end_at_the_last_token():
    assert context_windows(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert context_windows(11, 4, 3) == [(0, 4), (3, 4), (6, 4), (9, 2)]
    # A stride beyond the window: the next window starts right after this one, no token skipped.
    assert context_windows(10, 4, 6) == [(0, 4), (4, 4), (8, 2)]
    assert context_windows(4, 4, 1) == [(0, 4)]
    assert context_windows(0, 4, 1) == [(0, 0)]


def test_doc_stride_is_the_step_and_the_answer_is_labelled_only_in_the_second_window(
        wordpiece, one_token_words):
    words = one_token_words[:40]
    context = " ".join(words)
    answer_start = len(" ".join(words[:20])) + 1
    answer = SquadAnswer(f"{words[20]} {words[21]}", answer_start)
    example = SquadExample("q", "What?", context, (answer,))
    # 24 positions - 2 question tokens - 3 special tokens: windows of 19 context tokens.
    features = squad_windows([example], wordpiece, max_seq_length=24, doc_stride=15,
                              max_query_length=8, is_training=True)
    assert [(f.window_start, f.window_length) for f in features] == [(0, 19), (15, 19), (30, 10)]
    # Hugging Face's meaning (15 tokens of overlap, a step of 4) would make 6 windows.
    all_ids = wordpiece.tokenize([context]).to_list()[0]
    for feature in features:
        span = slice(feature.window_start, feature.window_start + feature.window_length)
        assert feature.context_ids.tolist() == all_ids[span]
        assert [context[s:e] for s, e in zip(feature.char_starts, feature.char_ends)] == words[span]
    assert [(f.start_position, f.end_position) for f in features] == [(0, 0), (9, 10), (0, 0)]
    batch = _batch(features)
    assert batch["token_ids"][1, 9:11].tolist() == all_ids[20:22]
    assert batch["start_positions"].tolist() == [0, 9, 0]


@pytest.mark.slow
def test_windows_equal_transformers_overflow_with_overlap_of_capacity_minus_doc_stride(
        tokenizers, kind):
    question = "Who was the leader?"
    example = SquadExample("q", question, LONG_CONTEXT, is_impossible=True)
    features = squad_windows([example], tokenizers[kind], max_seq_length=40, doc_stride=10,
                              max_query_length=16)
    capacity = features[0].window_length
    assert len(features) > 3 and all(f.window_start == 10 * i for i, f in enumerate(features))
    expected = _hf_tokenizer(kind)(
        question, LONG_CONTEXT, max_length=40, truncation="only_second", stride=capacity - 10,
        return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length",
        return_token_type_ids=True)
    batch = _batch(features)
    assert batch["token_ids"].tolist() == expected["input_ids"]
    assert batch["segment_ids"].tolist() == expected["token_type_ids"]
    assert batch["padding_mask"].tolist() == expected["attention_mask"]
    for row, feature in enumerate(features):
        spans = [tuple(span) for span, sequence in
                 zip(expected["offset_mapping"][row], expected.sequence_ids(row)) if sequence == 1]
        assert list(zip(feature.char_starts.tolist(), feature.char_ends.tolist())) == spans
        first_context = expected.sequence_ids(row).index(1)
        assert feature.context_offset == first_context


# --- max context ---

@pytest.mark.parametrize("num_tokens, capacity, stride", [
    (10, 4, 3), (37, 12, 5), (37, 12, 12), (50, 20, 7), (9, 9, 2), (23, 8, 1), (64, 16, 10)])
def test_max_context_windows_equal_model_garden_check_is_max_context(num_tokens, capacity, stride):
    squad_lib, _ = model_garden_squad_lib()
    windows = context_windows(num_tokens, capacity, stride)
    doc_span = collections.namedtuple("DocSpan", ["start", "length"])
    spans = [doc_span(start, length) for start, length in windows]
    best = max_context_windows(windows, num_tokens)
    for token in range(num_tokens):
        expected = [index for index in range(len(spans))
                    if squad_lib._check_is_max_context(spans, index, token)]
        assert [best[token]] == expected


def test_every_context_token_has_exactly_one_max_context_window(wordpiece):
    example = SquadExample("q", "Who was the leader?", LONG_CONTEXT, is_impossible=True)
    features = squad_windows([example], wordpiece, max_seq_length=32, doc_stride=6,
                              max_query_length=8)
    num_tokens = features[-1].window_start + features[-1].window_length
    owners = np.zeros(num_tokens, int)
    for feature in features:
        owners[feature.window_start:feature.window_start + feature.window_length] += \
            feature.max_context
    assert owners.tolist() == [1] * num_tokens
    # Window 0 keeps its first tokens but not its last ones, which window 1 sees with more context.
    assert features[0].max_context[:12].all() and not features[0].max_context[-3:].any()


# --- answer positions ---

def test_answer_token_span_is_first_and_last_overlapping_token():
    starts, ends = np.array([0, 4, 5, 9, 9]), np.array([3, 5, 8, 9, 12])
    assert answer_token_span(starts, ends, 4, 8) == (1, 2)
    assert answer_token_span(starts, ends, 6, 7) == (2, 2)  # inside one token
    assert answer_token_span(starts, ends, 2, 10) == (0, 4)  # empty-span token 3 never counts
    assert answer_token_span(starts, ends, 3, 4) is None


def _squad_file(tmp_path, paragraphs, version="1.1"):
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"version": version, "data": [
        {"title": "t", "paragraphs": [{"context": c, "qas": qas} for c, qas in paragraphs]}]}))
    return str(path)


def _answerable(qas_id, question, context, text, occurrence=0):
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(text, start + 1)
    return {"id": qas_id, "question": question, "answers": [{"text": text, "answer_start": start}],
            "is_impossible": False}


def test_features_equal_model_garden_squad_lib_for_wordpiece(tmp_path, wordpiece):
    squad_lib, tokenization = model_garden_squad_lib()
    short = "Python's list.sort() method sorts the list in place; sorted() returns a new list."
    path = _squad_file(tmp_path, [
        (LONG_CONTEXT, [
            _answerable("a", "When was John Smith born?", LONG_CONTEXT, "1895", 2),
            _answerable("b", "Which country leads the world in electronics? " * 3, LONG_CONTEXT,
                        "Japan"),
            _answerable("c", "How many people?", LONG_CONTEXT, "2,000 people"),
            {"id": "d", "question": "Who lost?", "answers": [], "is_impossible": True}]),
        (short, [_answerable("e", "What sorts in place?", short, "list.sort() method")])],
        version="v2.0")
    vocab = os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt")
    theirs = []
    squad_lib.convert_examples_to_features(
        squad_lib.read_squad_examples(path, is_training=True, version_2_with_negative=True),
        tokenization.FullTokenizer(vocab, do_lower_case=True), max_seq_length=64, doc_stride=16,
        max_query_length=12, is_training=True, output_fn=theirs.append)
    ours = squad_windows(read_squad(path), wordpiece, max_seq_length=64, doc_stride=16,
                          max_query_length=12, is_training=True)
    assert len(ours) == len(theirs) > 20
    batch = _batch(ours)
    assert batch["token_ids"].tolist() == [f.input_ids for f in theirs]
    assert batch["segment_ids"].tolist() == [f.segment_ids for f in theirs]
    assert batch["padding_mask"].tolist() == [f.input_mask for f in theirs]
    assert [(f.example_index, f.window_index) for f in ours] == \
        [(f.example_index, f.doc_span_index) for f in theirs]
    assert [(f.start_position, f.end_position) for f in ours] == \
        [(f.start_position, f.end_position) for f in theirs]
    assert sum(f.start_position > 0 for f in ours) >= 4
    for mine, other in zip(ours, theirs):
        positions = range(mine.context_offset, mine.context_offset + mine.window_length)
        assert sorted(other.token_is_max_context) == list(positions)
        assert [other.token_is_max_context[p] for p in positions] == mine.max_context.tolist()


def test_gold_positions_decode_back_to_the_gold_answer_for_every_tokenizer(tokenizers, kind):
    """Round trip: training labels -> one-hot logits -> decode_squad -> the exact gold text."""
    context = LONG_CONTEXT + " Finally the Denver Broncos beat the Carolina Panthers."
    examples = [
        SquadExample("early", "Who?", context, (SquadAnswer("John Smith", 15),)),
        SquadExample("late", "Who won?", context,
                     (SquadAnswer("Denver Broncos", context.index("Denver Broncos")),)),
        SquadExample("middle", "What lead?", context,
                     (SquadAnswer("Japanese electronics", context.index("Japanese", 200)),)),
        SquadExample("accents", "Where?", context,
                     (SquadAnswer("Zürich's café", context.index("Zürich")),)),
        SquadExample("none", "Who lost?", context, is_impossible=True),
    ]
    features = squad_windows(examples, tokenizers[kind], max_seq_length=48, doc_stride=12,
                              max_query_length=8, is_training=True)
    assert len(features) > 2 * len(examples)
    start_logits, end_logits = np.zeros([2, len(features), 48])
    for feature in features:
        start_logits[feature.feature_index, feature.start_position] = 10.0
        end_logits[feature.feature_index, feature.end_position] = 10.0
    for feature in features:
        if feature.start_position:
            first = feature.start_position - feature.context_offset
            last = feature.end_position - feature.context_offset
            answer = examples[feature.example_index].answers[0]
            assert (feature.char_starts[first], feature.char_ends[last]) == (answer.start,
                                                                              answer.end)
    decoded = decode_squad(examples, features, start_logits, end_logits,
                           version_2_with_negative=True)
    assert decoded.texts == {"early": "John Smith", "late": "Denver Broncos",
                             "middle": "Japanese electronics", "accents": "Zürich's café",
                             "none": ""}


def test_window_holding_part_of_the_answer_is_labelled_null(wordpiece, one_token_words):
    words = one_token_words[:30]
    context = " ".join(words)
    text = " ".join(words[8:14])
    example = SquadExample("q", "What?", context, (SquadAnswer(text, context.index(text)),))
    features = squad_windows([example], wordpiece, max_seq_length=15, doc_stride=6,
                              max_query_length=4, is_training=True)
    # Windows of 10 tokens every 6 tokens; answer tokens 8..13 lie whole only in window 1.
    assert [f.window_start for f in features] == [0, 6, 12, 18, 24]
    assert [(f.start_position, f.end_position) for f in features] == [
        (0, 0), (4 + 2, 4 + 7), (0, 0), (0, 0), (0, 0)]


def test_question_is_cut_to_max_query_length_and_left_stripped(tokenizers, kind):
    tokenizer = tokenizers[kind]
    question = "  Which method of the list sorts it in place and returns nothing at all?"
    feature, = squad_windows([SquadExample("q", question, "The list.", is_impossible=True)],
                              tokenizer, max_seq_length=32, max_query_length=5)
    expected = tokenizer.tokenize([question.lstrip()]).to_list()[0][:5]
    assert feature.question_ids.tolist() == expected
    assert feature.context_offset == 1 + 5 + tokenizer.layout.pair_separators


def test_answer_that_covers_no_token_raises_naming_the_question(wordpiece):
    example = SquadExample("q-space", "What?", "list  value", (SquadAnswer(" ", 5),))
    with pytest.raises(TaskDataError, match="question 'q-space': the answer ' ' covers no token"):
        squad_windows([example], wordpiece, max_seq_length=16, max_query_length=4,
                       is_training=True)
    # Without training labels, the answer is not looked at.
    assert len(squad_windows([example], wordpiece, max_seq_length=16, max_query_length=4)) == 1


def test_settings_that_leave_no_room_raise(wordpiece):
    example = SquadExample("q", "What?", "list", is_impossible=True)
    with pytest.raises(ValueError, match="max_seq_length=67 leaves no room"):
        squad_windows([example], wordpiece, max_seq_length=67, max_query_length=64)
    with pytest.raises(ValueError, match="doc_stride must be at least 1"):
        squad_windows([example], wordpiece, doc_stride=0)


# --- batches ---

@pytest.fixture(scope="module")
def many_features(wordpiece):
    examples = [SquadExample(f"q{i}", f"Question {i}?", LONG_CONTEXT[:40 + 9 * i],
                             (SquadAnswer("leader", 4),)) for i in range(12)]
    return squad_windows(examples, wordpiece, max_seq_length=24, doc_stride=8,
                          max_query_length=6, is_training=True)


def test_dataset_batches_follow_the_contract(many_features):
    batches = list(squad_dataset(many_features, batch_size=8))
    assert [len(b["token_ids"]) for b in batches][:-1] == [8] * (len(batches) - 1)
    for batch in batches:
        assert sorted(batch) == ["end_positions", "example_index", "feature_index",
                                 "padding_mask", "segment_ids", "start_positions", "token_ids"]
        assert all(value.dtype == "int32" for value in batch.values())
        assert batch["token_ids"].shape[1:] == batch["segment_ids"].shape[1:] == (24,)
    rows = {name: np.concatenate([b[name].numpy() for b in batches]) for name in batches[0]}
    assert rows["feature_index"].tolist() == list(range(len(many_features)))
    for feature, ids, mask in zip(many_features, rows["token_ids"], rows["padding_mask"]):
        window = slice(feature.context_offset, feature.context_offset + feature.window_length)
        assert ids[window].tolist() == feature.context_ids.tolist()
        assert ids[1:1 + len(feature.question_ids)].tolist() == feature.question_ids.tolist()
        assert mask.sum() == feature.context_offset + feature.window_length + 1
    assert rows["example_index"].tolist() == [f.example_index for f in many_features]
    assert rows["start_positions"].tolist() == [f.start_position for f in many_features]


def test_dataset_without_training_labels_has_no_label_keys(wordpiece):
    features = squad_windows([SquadExample("q", "What?", "list", is_impossible=True)], wordpiece,
                              max_seq_length=8, max_query_length=2)
    assert sorted(next(iter(squad_dataset(features)))) == [
        "example_index", "feature_index", "padding_mask", "segment_ids", "token_ids"]


@pytest.mark.slow
def test_shuffled_dataset_is_deterministic_under_a_seed(many_features):
    def passes(seed, count=2):
        dataset = squad_dataset(many_features, batch_size=5, shuffle=True, seed=seed,
                                drop_remainder=True)
        return [np.concatenate([b["feature_index"].numpy() for b in dataset]).tolist()
                for _ in range(count)]

    first, second = passes(3)
    assert passes(3) == [first, second]
    assert first != second  # reshuffled every pass
    assert passes(4)[0] != first
    assert len(first) == len(many_features) // 5 * 5
    assert len(set(first)) == len(first)
    assert first != sorted(first)


def test_empty_feature_list_raises():
    with pytest.raises(ValueError, match="no features"):
        squad_dataset([])
