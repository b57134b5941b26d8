"""GLUE metrics equal scikit-learn and SciPy called directly; degenerate runs give 0.0 quietly."""

import warnings

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from kerasbert.data.glue_tasks import GLUE_TASKS
from kerasbert.training.glue_metrics import (METRICS, compute_metrics, glue_metrics,
                                             is_degenerate)


def random_classes(seed, size, classes):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size)
    # Predictions agree with the labels about 70% of the time, so every metric is non-trivial.
    predictions = np.where(rng.random(size) < 0.7, labels, rng.integers(0, classes, size))
    return labels, predictions


def random_scores(seed, size):
    rng = np.random.default_rng(seed)
    labels = rng.uniform(0, 5, size)
    return labels, labels + rng.normal(0, 1.0, size)


@pytest.fixture(autouse=True)
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.mark.parametrize("seed", range(5))
def test_classification_metrics_equal_sklearn(seed):
    labels, predictions = random_classes(seed, 200, 2)
    assert compute_metrics(("matthews_correlation", "accuracy", "f1"), labels, predictions) == {
        "matthews_correlation": pytest.approx(
            sklearn.metrics.matthews_corrcoef(labels, predictions), abs=1e-12),
        "accuracy": pytest.approx(sklearn.metrics.accuracy_score(labels, predictions), abs=1e-12),
        "f1": pytest.approx(sklearn.metrics.f1_score(labels, predictions), abs=1e-12)}
    three_labels, three_predictions = random_classes(seed, 300, 3)
    mnli = glue_metrics("mnli", three_labels, three_predictions)
    assert mnli == {"accuracy": pytest.approx(np.mean(three_labels == three_predictions),
                                              abs=1e-12)}


@pytest.mark.parametrize("seed", range(5))
def test_multiclass_matthews_correlation_equals_sklearn(seed):
    labels, predictions = random_classes(seed, 500, 45)
    scores = glue_metrics("wordnet_gloss", labels, predictions)
    assert scores == {
        "accuracy": pytest.approx(sklearn.metrics.accuracy_score(labels, predictions), abs=1e-12),
        "matthews_correlation": pytest.approx(
            sklearn.metrics.matthews_corrcoef(labels, predictions), abs=1e-12)}


def test_f1_is_of_the_positive_class_one():
    labels = np.array([1, 1, 1, 0, 0, 0, 0, 0])
    predictions = np.array([1, 0, 0, 0, 0, 0, 0, 1])
    # Class 1: precision 1/2, recall 1/3 -> F1 0.4 (class 0 would give 0.8).
    assert glue_metrics("mrpc", labels, predictions) == {"accuracy": 0.625,
                                                          "f1": pytest.approx(0.4, abs=1e-12)}
    assert glue_metrics("qqp", labels, predictions)["f1"] == pytest.approx(
        sklearn.metrics.f1_score(labels, predictions, pos_label=1), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_correlations_equal_scipy(seed):
    labels, predictions = random_scores(seed, 150)
    assert glue_metrics("stsb", labels, predictions) == {
        "pearson": pytest.approx(scipy.stats.pearsonr(labels, predictions)[0], abs=1e-12),
        "spearman": pytest.approx(scipy.stats.spearmanr(labels, predictions)[0], abs=1e-12)}
    # Ties: scores on STS-B's 0.2 grid.
    labels, predictions = np.round(labels * 5) / 5, np.round(predictions * 5) / 5
    assert glue_metrics("stsb", labels, predictions)["spearman"] == pytest.approx(
        scipy.stats.spearmanr(labels, predictions)[0], abs=1e-12)


def test_every_task_reports_exactly_its_metrics():
    for name, task in GLUE_TASKS.items():
        if task.is_regression:
            labels, predictions = random_scores(0, 20)
        else:
            labels, predictions = random_classes(0, 20, task.num_labels)
        assert list(glue_metrics(name, labels, predictions)) == list(task.metrics)
        assert set(task.metrics) <= set(METRICS)


def test_degenerate_runs_report_zero_without_warnings_or_nan():
    labels, _ = random_classes(1, 100, 2)
    one_class = np.ones(100, np.int64)
    scores = compute_metrics(("matthews_correlation", "accuracy", "f1"), labels, one_class)
    assert scores["matthews_correlation"] == 0.0
    assert scores["accuracy"] == pytest.approx(np.mean(labels == 1))
    assert scores["f1"] == pytest.approx(sklearn.metrics.f1_score(labels, one_class))
    never_positive = compute_metrics(("matthews_correlation", "f1"), labels, np.zeros(100))
    assert never_positive == {"matthews_correlation": 0.0, "f1": 0.0}
    # Labels and predictions all of one class (a tiny dev set).
    assert compute_metrics(("matthews_correlation", "f1"), one_class, one_class) == {
        "matthews_correlation": 0.0, "f1": 1.0}
    assert compute_metrics(("matthews_correlation", "f1"), 1 - one_class, 1 - one_class) == {
        "matthews_correlation": 0.0, "f1": 0.0}
    scores, _ = random_scores(2, 50)
    constant = np.full(50, 2.5)
    assert glue_metrics("stsb", scores, constant) == {"pearson": 0.0, "spearman": 0.0}
    assert glue_metrics("stsb", constant, scores) == {"pearson": 0.0, "spearman": 0.0}
    assert glue_metrics("stsb", [3.0], [1.0]) == {"pearson": 0.0, "spearman": 0.0}
    # Nearly constant (SciPy warns, we do not): the value SciPy computes.
    nearly = np.array([2.5, 2.5, 2.5, 2.5 + 1e-13])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = scipy.stats.pearsonr([1.0, 2.0, 3.0, 4.0], nearly)[0]
    assert glue_metrics("stsb", [1.0, 2.0, 3.0, 4.0], nearly)["pearson"] == pytest.approx(
        expected, abs=1e-6)


def test_is_degenerate():
    assert is_degenerate(np.zeros(10, np.int64))
    assert is_degenerate([2, 2, 2])
    assert not is_degenerate([0, 0, 1])
    assert is_degenerate(np.full((4, 1), 3.25, np.float32))
    assert not is_degenerate([3.25, 3.2500001])
    assert is_degenerate([1])
    with pytest.raises(ValueError, match="no predictions"):
        is_degenerate([])


def test_bad_inputs():
    with pytest.raises(ValueError, match="1-D and of one length"):
        compute_metrics(("accuracy",), [0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="no examples"):
        compute_metrics(("accuracy",), [], [])
    with pytest.raises(ValueError, match=r"unknown metric\(s\) \['exact'\]"):
        compute_metrics(("accuracy", "exact"), [0], [0])
    with pytest.raises(ValueError, match="unknown task"):
        glue_metrics("squad", [0], [0])
