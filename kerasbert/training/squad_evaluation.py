"""The official SQuAD evaluation: v1.1 (`evaluate-v1.1.py`) and v2.0 (`evaluate-v2.0.py`).

Both compare a prediction with every gold answer after the same normalization (lower case, no
punctuation, no articles "a" / "an" / "the", single spaces) and keep the best: exact match (0/1)
and F1 of the normalized words (bag of words). Scores are percentages (0-100), as the scripts
print them.

They differ where the scripts differ:
- v1.1: a question without a prediction scores 0; an empty prediction has F1 0.
- v2.0: a question without answers (impossible) has the one gold answer "" and only "" scores;
  an empty prediction or gold answer has F1 1 if both are empty, else 0. Scores are also split by
  `HasAns_` / `NoAns_`. With null odds (`null_odds.json`, the script's `--na-prob-file`), a
  question whose null odds exceed `null_odds_threshold` (the script's `--na-prob-thresh`, 1.0)
  counts as predicted unanswerable, and `best_exact` / `best_f1` are the scores at the best
  threshold on the null odds (`best_exact_thresh` / `best_f1_thresh`). Every question needs a
  prediction (and null odds), as the script's scores do.
"""

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text):
    """`text` as the official evaluation compares it.

    >>> normalize_answer("The  Denver Broncos!")
    'denver broncos'
    """
    text = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_v1_evaluation(examples, predictions):
    """SQuAD v1.1 `exact` and `f1` (0-100) of `predictions` ({qas_id: text}), and `total`.

    `examples` are `kerasbert.data.squad.SquadExample`s (`read_squad`); each
    prediction is scored against the best of its gold answers.

    >>> from kerasbert.data.squad import SquadAnswer, SquadExample
    >>> examples = [SquadExample("a", "Who?", "the Broncos", (SquadAnswer("the Broncos", 0),)),
    ...             SquadExample("b", "Who?", "Denver Broncos",
    ...                          (SquadAnswer("Denver Broncos", 0),))]
    >>> squad_v1_evaluation(examples, {"a": "Broncos", "b": "Broncos"})
    {'exact': 50.0, 'f1': 83.33333333333333, 'total': 2}
    """
    _check_not_empty(examples)
    exact = f1 = 0
    for example in examples:
        if example.qas_id not in predictions:
            continue
        prediction = predictions[example.qas_id]
        golds = [answer.text for answer in example.answers]
        exact += max(_exact(prediction, gold) for gold in golds)
        f1 += max(_f1(prediction, gold, empty_scores=False) for gold in golds)
    total = len(examples)
    return {"exact": 100.0 * exact / total, "f1": 100.0 * f1 / total, "total": total}


def squad_v2_evaluation(examples, predictions, null_odds=None, null_odds_threshold=1.0):
    """SQuAD v2.0 scores of `predictions` ({qas_id: text}), optionally with `null_odds`.

    Returns `exact`, `f1`, `total`, the same three prefixed `HasAns_` and
    `NoAns_` (for the questions with / without answers, when there are any) and,
    with `null_odds` ({qas_id: float}), `best_exact`, `best_exact_thresh`,
    `best_f1`, `best_f1_thresh`. Raises `ValueError` for a question without a
    prediction or null odds.

    >>> from kerasbert.data.squad import SquadAnswer, SquadExample
    >>> examples = [SquadExample("a", "Who?", "Broncos", (SquadAnswer("Broncos", 0),)),
    ...             SquadExample("b", "Why?", "Broncos", is_impossible=True)]
    >>> scores = squad_v2_evaluation(examples, {"a": "Broncos", "b": "Broncos"},
    ...                              null_odds={"a": -2.0, "b": 0.5})
    >>> scores["exact"], scores["HasAns_exact"], scores["NoAns_exact"]
    (50.0, 100.0, 0.0)
    >>> scores["best_exact"], scores["best_exact_thresh"]
    (100.0, -2.0)
    """
    _check_not_empty(examples)
    for name, values in (("predictions", predictions), ("null odds", null_odds)):
        missing = [e.qas_id for e in examples if values is not None and e.qas_id not in values]
        if missing:
            raise ValueError(f"{len(missing)} of {len(examples)} questions have no {name}, "
                             f"first {missing[:3]}")
    exact_raw, f1_raw, has_answer = {}, {}, {}
    for example in examples:
        prediction = predictions[example.qas_id]
        golds = [answer.text for answer in example.answers if normalize_answer(answer.text)]
        exact_raw[example.qas_id] = max(_exact(prediction, gold) for gold in golds or [""])
        f1_raw[example.qas_id] = max(_f1(prediction, gold, empty_scores=True)
                                     for gold in golds or [""])
        has_answer[example.qas_id] = bool(example.answers)
    exact, f1 = exact_raw, f1_raw
    if null_odds is not None:
        exact = _with_null_threshold(exact_raw, null_odds, has_answer, null_odds_threshold)
        f1 = _with_null_threshold(f1_raw, null_odds, has_answer, null_odds_threshold)
    scores = _percentages(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [qas_id for qas_id, answerable in has_answer.items() if answerable == wanted]
        if ids:
            scores.update({f"{prefix}_{key}": value
                           for key, value in _percentages(exact, f1, ids).items()})
    if null_odds is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, threshold = _best_threshold(predictions, raw, null_odds, has_answer)
            scores[f"best_{name}"] = best
            scores[f"best_{name}_thresh"] = threshold
    return scores


def evaluate_squad(examples, predictions, null_odds=None, *, version_2_with_negative=False):
    """`squad_v2_evaluation` with `version_2_with_negative`, else `squad_v1_evaluation`.

    >>> from kerasbert.data.squad import SquadAnswer, SquadExample
    >>> examples = [SquadExample("a", "Who?", "Broncos", (SquadAnswer("Broncos", 0),))]
    >>> evaluate_squad(examples, {"a": "broncos."})
    {'exact': 100.0, 'f1': 100.0, 'total': 1}
    """
    if version_2_with_negative:
        return squad_v2_evaluation(examples, predictions, null_odds)
    return squad_v1_evaluation(examples, predictions)


def _check_not_empty(examples):
    if not examples:
        raise ValueError("SQuAD evaluation: there are no questions to score")


def _exact(prediction, gold):
    return int(normalize_answer(prediction) == normalize_answer(gold))


def _f1(prediction, gold, empty_scores):
    """Bag-of-words F1; with `empty_scores` (v2.0), 1 when both are empty and 0 when one is."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if empty_scores and (not predicted or not expected):
        return int(predicted == expected)
    shared = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if shared == 0:
        return 0
    precision, recall = shared / len(predicted), shared / len(expected)
    return (2 * precision * recall) / (precision + recall)


def _with_null_threshold(scores, null_odds, has_answer, threshold):
    """Scores where a question with null odds above `threshold` counts as answered ""."""
    return {qas_id: float(not has_answer[qas_id]) if null_odds[qas_id] > threshold else score
            for qas_id, score in scores.items()}


def _percentages(exact, f1, ids):
    return {"exact": 100.0 * sum(exact[i] for i in ids) / len(ids),
            "f1": 100.0 * sum(f1[i] for i in ids) / len(ids), "total": len(ids)}


def _best_threshold(predictions, scores, null_odds, has_answer):
    """The best score over null-odds thresholds, and that threshold (the script's search).

    Questions are taken in increasing null odds (file order on ties); below
    the threshold a question keeps its predicted answer's score, above it it
    counts as answered "".
    """
    score = best = sum(1 for answerable in has_answer.values() if not answerable)
    best_threshold = 0.0
    for qas_id in sorted(null_odds, key=lambda qas_id: null_odds[qas_id]):
        if qas_id not in scores:
            continue
        if has_answer[qas_id]:
            score += scores[qas_id]
        elif predictions[qas_id]:
            score -= 1
        if score > best:
            best, best_threshold = score, null_odds[qas_id]
    return 100.0 * best / len(scores), best_threshold
