"""decode_squad / write_squad_predictions: n-best decoding, null answers and the prediction files.

The reference is Model Garden's `official.nlp.data.squad_lib.postprocess_output` (Google's BERT
`run_squad.py` decoding) on the same WordPiece windows and random logits.
"""

import collections
import json
import os

import numpy as np
import pytest

import kerasbert.zoo
from kerasbert.data import demo
from kerasbert.data.squad import SquadAnswer, SquadExample, read_squad
from kerasbert.data.squad_decoding import (SquadPredictions, decode_squad,
                                           write_squad_predictions)
from kerasbert.data.squad_features import squad_windows
from tests.helpers import model_garden_squad_lib

CONTEXT = ("The leader was John Smith (1895-1943). Japanese electronics lead the world. " * 3
           + "In 1999, Zurich's cafe hosted 2,000 people.")
SHORT = "Python's list.sort() method sorts the list in place; sorted() returns a new list."


@pytest.fixture(scope="module")
def wordpiece():
    return kerasbert.zoo.build_tokenizer("bert_tiny_uncased", demo.vocabulary_dir("wordpiece"))


@pytest.fixture(scope="module")
def squad_file(tmp_path_factory):
    questions = ["When was John Smith born?", "Which country leads?",
                 "How many people came to the cafe in Zurich in that year?"]
    qas = [{"id": f"long{i}", "question": q, "answers": [], "is_impossible": True}
           for i, q in enumerate(questions)]
    short_qas = [{"id": f"short{i}", "question": q, "is_impossible": False,
                  "answers": [{"text": "list", "answer_start": SHORT.index("list")}]}
                 for i, q in enumerate(["What does sort sort?", "Which returns a new list?"])]
    path = tmp_path_factory.mktemp("squad") / "dev-v2.0.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": CONTEXT, "qas": qas}, {"context": SHORT, "qas": short_qas}]}]}))
    return str(path)


@pytest.mark.parametrize("version_2", [False, True], ids=["v1.1", "v2.0"])
def test_decoding_equals_model_garden_postprocess_output_on_random_logits(
        squad_file, wordpiece, version_2):
    squad_lib, tokenization = model_garden_squad_lib()
    their_examples = squad_lib.read_squad_examples(squad_file, is_training=False,
                                                   version_2_with_negative=version_2)
    their_features = []
    squad_lib.convert_examples_to_features(
        their_examples, tokenization.FullTokenizer(
            os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt"), do_lower_case=True),
        max_seq_length=48, doc_stride=12, max_query_length=10, is_training=False,
        output_fn=lambda feature, is_padding: is_padding or their_features.append(feature),
        batch_size=1)
    examples = read_squad(squad_file)
    features = squad_windows(examples, wordpiece, max_seq_length=48, doc_stride=12,
                              max_query_length=10)
    assert len(features) == len(their_features) > 10
    result = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
    rng = np.random.default_rng(7)
    for trial in range(12):
        start, end = (3 * rng.normal(size=[2, len(features), 48])).astype(np.float32)
        threshold = [0.0, 1.5, -2.0][trial % 3]
        results = [result(f.unique_id, start[i].tolist(), end[i].tolist())
                   for i, f in enumerate(their_features)]
        texts, nbest, null_odds = squad_lib.postprocess_output(
            their_examples, their_features, results, n_best_size=20, max_answer_length=30,
            do_lower_case=True, version_2_with_negative=version_2,
            null_score_diff_threshold=threshold)
        ours = decode_squad(examples, features, start, end, version_2_with_negative=version_2,
                            null_score_diff_threshold=threshold)
        assert ours.texts == dict(texts)
        assert ours.null_odds == (dict(null_odds) if version_2 else None)
        for qas_id, entries in nbest.items():
            assert [(e["text"], e["start_logit"], e["end_logit"]) for e in ours.nbest[qas_id]] == \
                [(e["text"], e["start_logit"], e["end_logit"]) for e in entries]
            assert [e["probability"] for e in ours.nbest[qas_id]] == \
                pytest.approx([e["probability"] for e in entries], rel=1e-12)


def _one_window(wordpiece, context="The sorted list.", question="What?", **kwargs):
    example = SquadExample("q", question, context, **kwargs)
    features = squad_windows([example], wordpiece, max_seq_length=16, max_query_length=4)
    return example, features, np.zeros([2, 1, 16])


def test_no_non_null_candidate_predicts_empty_and_still_writes_an_nbest_entry(wordpiece, tmp_path):
    example, features, (start, end) = _one_window(wordpiece, is_impossible=True)
    # The best starts are in the question / on [CLS], the best ends before every start: only
    # invalid spans among the top n_best_size.
    start[0, :4], end[0, :4] = 5.0, 5.0
    start[0, 0], end[0, 0] = 1.0, 2.0
    for version_2 in (False, True):
        decoded = decode_squad([example], features, start, end, n_best_size=4,
                               version_2_with_negative=version_2)
        assert decoded.texts == {"q": ""}
        assert decoded.nbest == {"q": [{"text": "", "probability": 1.0, "start_logit": 1.0,
                                        "end_logit": 2.0}]}
    assert decoded.null_odds == {"q": 3.0}  # the null score, as run_squad.py writes it
    write_squad_predictions(str(tmp_path), decoded)
    assert json.loads((tmp_path / "predictions.json").read_text()) == {"q": ""}


def test_empty_context_predicts_empty(wordpiece):
    example, features, (start, end) = _one_window(wordpiece, context="", is_impossible=True)
    assert features[0].window_length == 0
    start[0] = end[0] = np.linspace(1, 0, 16)
    assert decode_squad([example], features, start, end).texts == {"q": ""}


def test_candidates_respect_order_length_and_the_context(wordpiece):
    context = "value list name file path type data code"
    example, features, (start, end) = _one_window(wordpiece, context)
    start[:], end[:] = -10.0, -10.0
    offset = features[0].context_offset  # "what ?" -> the context starts at position 4
    start[0, offset + 5], end[0, offset + 2] = 9.0, 9.0  # "type" ... "name": end before start
    start[0, offset + 1], end[0, offset + 3] = 4.0, 4.0
    start[0, 2] = 20.0  # a start in the question
    end[0, 15] = 20.0   # an end on padding
    decoded = decode_squad([example], features, start, end)
    assert decoded.texts == {"q": "list name"}  # 4 + 9, the best valid pair
    assert decoded.nbest["q"][1]["text"] == "list name file"  # 4 + 4
    shorter = decode_squad([example], features, start, end, max_answer_length=1)
    assert all(len(e["text"].split()) == 1 for e in shorter.nbest["q"])
    assert len(shorter.nbest["q"]) == 8  # every single token of the context


def test_only_the_max_context_window_predicts_a_token(wordpiece):
    words = "value list name file path type data code line time call".split()
    example = SquadExample("q", "What?", " ".join(words), is_impossible=True)
    features = squad_windows([example], wordpiece, max_seq_length=12, doc_stride=3,
                              max_query_length=4)
    # Windows of 7 tokens at 0, 3 (overlap 3..6), the last at 6; "file" (token 3) has more context
    # in window 0 (min(3, 3)) than in window 1 (min(0, 6)).
    assert [(f.window_start, f.window_length) for f in features] == [(0, 7), (3, 7), (6, 5)]
    assert features[0].max_context[3] and not features[1].max_context[0]
    start, end = np.zeros([2, len(features), 12])
    offset = features[0].context_offset
    start[1, offset], end[1, offset] = 9.0, 9.0          # "file" in window 1: not its window
    start[0, offset + 3], end[0, offset + 3] = 5.0, 5.0  # "file" in window 0
    start[2, offset + 2], end[2, offset + 2] = 3.0, 3.0  # "line" in the last window
    decoded = decode_squad([example], features, start, end)
    assert [e["text"] for e in decoded.nbest["q"]][:2] == ["file", "line"]
    assert decoded.nbest["q"][0]["start_logit"] == 5.0


def test_null_odds_and_threshold_over_windows(wordpiece):
    words = "value list name file path type data code line time call".split()
    example = SquadExample("q", "What?", " ".join(words), is_impossible=True)
    features = squad_windows([example], wordpiece, max_seq_length=12, doc_stride=3,
                              max_query_length=4)
    start, end = np.zeros([2, len(features), 12])
    start[:, 0], end[:, 0] = [[4.0, 1.0, 3.0], [4.0, 0.5, 3.0]]  # null score: min is 1.5
    offset = features[0].context_offset
    start[0, offset + 1], end[0, offset + 2] = 2.0, 1.0  # "list name": 3.0
    decoded = decode_squad([example], features, start, end, version_2_with_negative=True)
    assert decoded.null_odds == {"q": 1.5 - 3.0}
    assert decoded.texts == {"q": "list name"}
    nbest = decoded.nbest["q"]
    assert nbest[0]["text"] == "list name" and nbest[0]["probability"] > nbest[1]["probability"]
    null_entry, = [e for e in nbest if e["text"] == ""]
    assert (null_entry["start_logit"], null_entry["end_logit"]) == (1.0, 0.5)
    assert sum(e["probability"] for e in nbest) == pytest.approx(1.0)
    assert decode_squad([example], features, start, end, version_2_with_negative=True,
                        null_score_diff_threshold=-2.0).texts == {"q": ""}


def test_nbest_keeps_distinct_texts_up_to_n_best_size(wordpiece):
    example, features, (start, end) = _one_window(wordpiece, "list list name list list")
    start[0, [4, 5, 7]] = 5.0, 4.0, 3.0  # the context starts at position 4
    end[0, [4, 5, 8]] = 5.0, 4.0, 3.0
    nbest = decode_squad([example], features, start, end, n_best_size=3).nbest["q"]
    # (4, 4) "list" 10, (4, 5) 9, (5, 5) "list" again 8 (dropped), (4, 8) 8.
    assert [entry["text"] for entry in nbest] == ["list", "list list", "list list name list list"]
    assert [entry["start_logit"] + entry["end_logit"] for entry in nbest] == [10.0, 9.0, 8.0]


def test_logits_must_have_a_row_per_feature(wordpiece):
    example, features, (start, end) = _one_window(wordpiece)
    with pytest.raises(ValueError, match="one row per feature"):
        decode_squad([example], features, np.zeros([2, 16]), np.zeros([2, 16]))
    with pytest.raises(ValueError, match="has no features"):
        decode_squad([example, example], features, start, end)


def test_writes_the_three_files_in_run_squad_format(tmp_path):
    predictions = SquadPredictions(
        {"a": "Zürich", "b": ""},
        {"a": [{"text": "Zürich", "probability": 0.75, "start_logit": 1.5, "end_logit": -0.25}],
         "b": [{"text": "", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}]},
        {"a": -1.25, "b": 3.0})
    paths = write_squad_predictions(str(tmp_path), predictions)
    assert paths == [str(tmp_path / name) for name in
                     ("predictions.json", "nbest_predictions.json", "null_odds.json")]
    assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "null_odds.json",
                                            "predictions.json"]
    text = (tmp_path / "predictions.json").read_text()
    assert text == json.dumps({"a": "Zürich", "b": ""}, indent=4) + "\n"
    assert json.loads((tmp_path / "nbest_predictions.json").read_text()) == predictions.nbest
    assert json.loads((tmp_path / "null_odds.json").read_text()) == predictions.null_odds
    v1 = tmp_path / "v1"
    write_squad_predictions(str(v1), SquadPredictions({"a": "x"}, {"a": []}, None))
    assert sorted(os.listdir(v1)) == ["nbest_predictions.json", "predictions.json"]


def test_gold_answers_of_several_questions_decode_in_example_order(wordpiece):
    examples = [SquadExample("first", "Who?", CONTEXT, (SquadAnswer("John Smith", 15),)),
                SquadExample("second", "What?", SHORT, (SquadAnswer("list", 9),))]
    features = squad_windows(examples, wordpiece, max_seq_length=40, doc_stride=10,
                              max_query_length=4, is_training=True)
    start, end = np.zeros([2, len(features), 40])
    for feature in features:
        start[feature.feature_index, feature.start_position] += 8.0
        end[feature.feature_index, feature.end_position] += 8.0
    decoded = decode_squad(examples, features, start, end)
    assert list(decoded.texts.items()) == [("first", "John Smith"), ("second", "list")]


def test_a_span_of_only_whitespace_is_no_candidate():
    roberta = kerasbert.zoo.build_tokenizer("roberta_base", demo.vocabulary_dir("byte_pair"))
    example = SquadExample("q", "What?", "list  value", is_impossible=True)
    features = squad_windows([example], roberta, max_seq_length=12, max_query_length=4)
    offset = features[0].context_offset  # <s> What ? </s></s>: 5
    assert features[0].char_starts.tolist() == [0, 5, 6]  # "Ġ" between the spaces spans nothing
    start, end = np.zeros([2, 1, 12])
    start[0, offset + 1], end[0, offset + 1] = 9.0, 9.0
    start[0, offset + 2], end[0, offset + 2] = 1.0, 1.0
    decoded = decode_squad([example], features, start, end)
    assert decoded.texts == {"q": " value"}  # from the space token's (empty) span to "value"
    assert "" not in [entry["text"] for entry in decoded.nbest["q"]]
