"""The SQuAD evaluation equals the official scripts as tf-models-official ships them.

References: `official.nlp.tools.squad_evaluate_v1_1.evaluate` (returns fractions, keys
`exact_match` / `final_f1`) and `official.nlp.tools.squad_evaluate_v2_0.evaluate` (percentages;
the best-threshold scores under `final_exact` / `final_f1`, the official script's `best_exact` /
`best_f1`).
"""

import json

import numpy as np
import pytest
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

from kerasbert.data.squad import read_squad
from kerasbert.training.squad_evaluation import (evaluate_squad, normalize_answer,
                                                 squad_v1_evaluation, squad_v2_evaluation)

CONTEXTS = [
    "Super Bowl 50 was an American football game. The Denver Broncos defeated the Carolina "
    "Panthers 24–10 to earn their third Super Bowl title, at Levi's Stadium in Santa Clara.",
    "The Normans (Norman: Nourmands; French: Normands) gave their name to Normandy, a region in "
    "France, in the 10th and 11th centuries. An apple a day; the end.",
]
# (context, gold answers or None for impossible, predictions to try)
QUESTIONS = [
    (0, ["Denver Broncos", "The Denver Broncos", "Broncos"],
     ["Denver Broncos", "the denver broncos!", "Broncos", "Denver", "Carolina Panthers", ""]),
    (0, ["24–10"], ["24–10", "24-10", "24 10", "Panthers 24–10", ""]),
    (0, ["Levi's Stadium", "Levi's Stadium in Santa Clara"],
     ["Levis Stadium", "Levi's Stadium in Santa Clara, California", "Santa Clara", "Stadium"]),
    (0, None, ["", "Super Bowl 50", "an", "The"]),
    (1, ["10th and 11th centuries", "in the 10th and 11th centuries"],
     ["10th and 11th", "11th centuries", "The 10th and 11th centuries.", "centuries centuries"]),
    (1, ["Normandy"], ["normandy", "NORMANDY,", "Normandy, a region in France", "a Normandy"]),
    (1, None, ["", "France", "a", " "]),
    (1, ["An apple a day", "apple"], ["an apple", "Apple a day", "the end", "a"]),
    # A gold answer that normalizes to nothing: v2.0 ignores it, v1.1 does not.
    (1, ["the", "their name"], ["the", "", "a", "The end", "their"]),
    (1, None, ["", "Normans"]),
]


def _dataset():
    """A SQuAD v2.0-style JSON dataset of QUESTIONS."""
    paragraphs = [{"context": context, "qas": []} for context in CONTEXTS]
    for number, (paragraph, golds, _) in enumerate(QUESTIONS):
        context = CONTEXTS[paragraph]
        answers = [{"text": g, "answer_start": context.index(g)} for g in golds or []]
        paragraphs[paragraph]["qas"].append({"id": f"q{number}", "question": "?",
                                             "answers": answers, "is_impossible": golds is None})
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    data = _dataset()
    path = tmp_path_factory.mktemp("squad") / "dev-v2.0.json"
    path.write_text(json.dumps(data))
    return data["data"], read_squad(str(path))


def _prediction_sets(seed, count):
    """`count` random {qas_id: prediction} choices from each question's candidate predictions."""
    rng = np.random.default_rng(seed)
    return [{f"q{n}": str(rng.choice(candidates)) for n, (_, _, candidates) in enumerate(QUESTIONS)}
            for _ in range(count)]


def test_normalize_answer_equals_the_official_one():
    texts = ["The Denver Broncos!", "  an   apple ", "Levi's", "A-B the_c", "THE END.", "théâtre",
             "the", "anthem an", "24–10", "¿Qué?", "", "a\tb\nc"]
    for text in texts:
        assert normalize_answer(text) == squad_evaluate_v2_0._normalize_answer(text)
        assert normalize_answer(text) == squad_evaluate_v1_1._normalize_answer(text)


def test_v1_1_equals_the_official_script(dataset):
    data, examples = dataset
    answerable = [e for e in examples if not e.is_impossible]
    v1_data = [{"paragraphs": [{"qas": [qa for qa in paragraph["qas"] if qa["answers"]]}
                               for paragraph in data[0]["paragraphs"]]}]
    for predictions in _prediction_sets(seed=1, count=40):
        ours = squad_v1_evaluation(answerable, predictions)
        theirs = squad_evaluate_v1_1.evaluate(v1_data, predictions)
        assert ours["exact"] == pytest.approx(100 * theirs["exact_match"], rel=1e-12)
        assert ours["f1"] == pytest.approx(100 * theirs["final_f1"], rel=1e-12)
        assert ours["total"] == len(answerable)


def test_v1_1_scores_a_missing_prediction_zero_like_the_official_script(dataset):
    data, examples = dataset
    answerable = [e for e in examples if not e.is_impossible]
    v1_data = [{"paragraphs": [{"qas": [qa for qa in paragraph["qas"] if qa["answers"]]}
                               for paragraph in data[0]["paragraphs"]]}]
    predictions = {e.qas_id: e.answers[0].text for e in answerable[1:]}
    ours = squad_v1_evaluation(answerable, predictions)
    theirs = squad_evaluate_v1_1.evaluate(v1_data, predictions)
    assert ours["exact"] == pytest.approx(100 * theirs["exact_match"], rel=1e-12)
    assert ours["exact"] == pytest.approx(100 * (len(answerable) - 1) / len(answerable))


def _v2_keys(theirs):
    """The official v2.0 script's key names for Model Garden's port."""
    renamed = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
               "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}
    return {renamed.get(key, key): value for key, value in theirs.items()
            if not key.startswith("pr_")}


@pytest.mark.parametrize("odds", ["normal", "ties", "above_one"])
def test_v2_0_with_null_odds_equals_the_official_script(dataset, odds):
    data, examples = dataset
    rng = np.random.default_rng({"normal": 2, "ties": 3, "above_one": 4}[odds])
    for predictions in _prediction_sets(seed=5, count=40):
        null_odds = {
            "normal": lambda: rng.normal(size=len(examples)),
            "ties": lambda: rng.integers(-2, 3, size=len(examples)).astype(float),
            "above_one": lambda: rng.uniform(-3, 6, size=len(examples)),
        }[odds]()
        null_odds = {e.qas_id: float(value) for e, value in zip(examples, null_odds)}
        ours = squad_v2_evaluation(examples, predictions, null_odds)
        theirs = _v2_keys(squad_evaluate_v2_0.evaluate(data, predictions, null_odds))
        assert ours == theirs


def test_v2_0_without_null_odds_equals_the_official_script(dataset):
    data, examples = dataset
    for predictions in _prediction_sets(seed=6, count=40):
        ours = squad_v2_evaluation(examples, predictions)
        theirs = _v2_keys(squad_evaluate_v2_0.evaluate(data, predictions))
        # Without an --na-prob-file the official script reports no best threshold (Model Garden's
        # port computes one with all null odds 0).
        assert ours == {key: value for key, value in theirs.items() if "best" not in key}
        assert "HasAns_exact" in ours and "NoAns_f1" in ours


def test_v2_0_perfect_and_all_empty_predictions(dataset):
    data, examples = dataset
    perfect = {e.qas_id: e.answers[-1].text if e.answers else "" for e in examples}
    scores = squad_v2_evaluation(examples, perfect, {e.qas_id: 0.0 for e in examples})
    assert (scores["exact"], scores["f1"], scores["best_f1"]) == (100.0, 100.0, 100.0)
    empty = {e.qas_id: "" for e in examples}
    scores = squad_v2_evaluation(examples, empty)
    impossible = sum(e.is_impossible for e in examples)
    # "" is right for the impossible questions only: v2.0 drops the gold "the", which
    # normalizes to nothing, and keeps "their name".
    assert scores["exact"] == pytest.approx(100 * impossible / len(examples))
    assert scores == _v2_keys({k: v for k, v in squad_evaluate_v2_0.evaluate(data, empty).items()
                               if "final" not in k})


def test_evaluate_squad_dispatches_on_the_version(dataset):
    _, examples = dataset
    predictions, = _prediction_sets(seed=8, count=1)
    answerable = [e for e in examples if not e.is_impossible]
    assert evaluate_squad(answerable, predictions) == squad_v1_evaluation(answerable, predictions)
    odds = {e.qas_id: 0.5 for e in examples}
    assert evaluate_squad(examples, predictions, odds, version_2_with_negative=True) == \
        squad_v2_evaluation(examples, predictions, odds)


def test_v2_0_needs_every_prediction_and_null_odds(dataset):
    _, examples = dataset
    predictions, = _prediction_sets(seed=9, count=1)
    with pytest.raises(ValueError, match="1 of 10 questions have no predictions, first \\['q3'\\]"):
        squad_v2_evaluation(examples, {k: v for k, v in predictions.items() if k != "q3"})
    with pytest.raises(ValueError, match="have no null odds"):
        squad_v2_evaluation(examples, predictions, {"q0": 1.0})
    with pytest.raises(ValueError, match="no questions"):
        squad_v1_evaluation([], {})
