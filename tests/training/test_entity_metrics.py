"""Entity-level scores: hand-worked conlleval counts (IOB1, IOB2) and seqeval called directly."""

import warnings

import numpy as np
import pytest
from seqeval import metrics

from kerasbert.training.entity_metrics import entity_scores


def _scores(precision, recall, f1, accuracy):
    return {"precision": pytest.approx(precision), "recall": pytest.approx(recall),
            "f1": pytest.approx(f1), "accuracy": pytest.approx(accuracy)}


def test_iob2_type_and_boundary_errors():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG"]]
    predicted = [["B-PER", "I-PER", "O", "B-LOC", "O", "O", "B-MISC"]]
    # Gold entities: PER 0-1, LOC 3-4, ORG 6 (3). Predicted: PER 0-1, LOC 3 (boundary too
    # short), MISC 6 (wrong type) (3). Correct: PER 0-1 only (1).
    # precision 1/3, recall 1/3, F1 1/3; tags right at 0, 1, 2, 3, 5: accuracy 5/7.
    assert entity_scores(gold, predicted) == _scores(1 / 3, 1 / 3, 1 / 3, 5 / 7)


def test_iob1_entities_open_at_i_and_split_at_b_or_a_new_type():
    gold = [["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]]
    predicted = [["I-PER", "I-PER", "I-PER", "O", "I-LOC", "I-LOC"]]
    # Gold, by conlleval's rules: I-PER after the sentence start opens PER 0-1; B-PER closes it
    # and opens PER 2; O closes that; I-LOC after O opens LOC 4; I-ORG, a new type, closes it
    # and opens ORG 5 (4 entities). Predicted: PER 0-2, LOC 4-5 (2). No span matches: 0 correct.
    # precision 0/2, recall 0/4, F1 0; tags right at 0, 1, 3, 4: accuracy 4/6.
    assert entity_scores(gold, predicted) == _scores(0.0, 0.0, 0.0, 4 / 6)


def test_iob1_gold_and_iob2_predictions_of_the_same_spans_agree_fully():
    gold = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]]
    predicted = [["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]]
    # Both: PER 0-1, LOC 3, LOC 4 (3 entities, 3 correct): precision = recall = F1 = 1.
    # The tag strings differ at 0 and 3: accuracy 3/5.
    assert entity_scores(gold, predicted) == _scores(1.0, 1.0, 1.0, 3 / 5)


def test_micro_average_over_sentences_and_no_entity_across_a_sentence_end():
    gold = [["B-PER", "O", "B-LOC"], ["I-LOC", "O"], ["B-ORG", "I-ORG"]]
    predicted = [["B-PER", "O", "B-LOC"], ["B-LOC", "O"], ["B-ORG", "O"]]
    # The sentence end closes LOC 0.2, and I-LOC opens LOC 1.0 (as a blank line does in
    # conlleval). Gold: PER 0.0, LOC 0.2, LOC 1.0, ORG 2.0-2.1 (4). Predicted: PER 0.0, LOC 0.2,
    # LOC 1.0, ORG 2.0 (4). Correct 3: precision 3/4, recall 3/4, F1 3/4.
    # Tags wrong at 1.0 (B-LOC for I-LOC) and 2.1: accuracy 5/7.
    assert entity_scores(gold, predicted) == _scores(0.75, 0.75, 0.75, 5 / 7)


def test_precision_and_recall_differ_and_division_by_zero_gives_zero():
    gold = [["B-PER", "I-PER", "O", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-MISC"]]
    # Gold 1, predicted 2, correct 1: precision 1/2, recall 1/1, F1 2 * 0.5 * 1 / 1.5 = 2/3.
    assert entity_scores(gold, predicted) == _scores(0.5, 1.0, 2 / 3, 3 / 4)
    # Nothing predicted: conlleval prints 0.00 for precision (0/0) and F1.
    assert entity_scores(gold, [["O"] * 4]) == _scores(0.0, 0.0, 0.0, 2 / 4)
    # Nothing to find and nothing found: every entity score 0/0, accuracy 1.
    assert entity_scores([["O", "O"]], [["O", "O"]]) == _scores(0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize("scheme", ["iob1", "iob2"])
def test_equal_to_seqeval_on_random_tags(scheme):
    rng = np.random.default_rng(0 if scheme == "iob1" else 1)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    if scheme == "iob1":
        tags = ["O", "O", "O", "I-PER", "I-LOC", "I-ORG", "I-ORG", "B-ORG"]
    gold = [list(rng.choice(tags, size=rng.integers(1, 12))) for _ in range(60)]
    predicted = [[tag if rng.random() < 0.7 else rng.choice(tags) for tag in sentence]
                 for sentence in gold]
    scores = entity_scores(gold, predicted)
    assert 0.3 < scores["f1"] < 0.95
    assert scores == _scores(metrics.precision_score(gold, predicted),
                             metrics.recall_score(gold, predicted),
                             metrics.f1_score(gold, predicted),
                             metrics.accuracy_score(gold, predicted))
    assert all(type(value) is float for value in scores.values())


def test_no_warning_when_nothing_is_predicted():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        entity_scores([["B-PER"]], [["O"]])


@pytest.mark.parametrize("gold, predicted, message", [
    ([["O", "O"]], [["O"]], "sentence 0 has 2 gold tags but 1 predicted"),
    ([["O"], ["O"]], [["O"]], "2 gold sentences but 1 predicted"),
    ([["O"]], ["O"], r"predicted_tags\[0\] is a string"),
    ("O", [["O"]], "gold_tags must be a list of tag lists"),
    ([[1]], [["O"]], r"gold_tags\[0\] holds a tag that is not a string"),
    ([[]], [[]], "no tags"),
])
def test_mismatched_inputs_are_refused(gold, predicted, message):
    with pytest.raises(ValueError, match=message):
        entity_scores(gold, predicted)
