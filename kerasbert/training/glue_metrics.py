"""The official metrics of GLUE-style tasks, computed with scikit-learn and SciPy.

Metric names, as `eval_results.json` and the GLUE leaderboard use them:
`matthews_correlation` (CoLA), `accuracy`, `f1` (binary, positive class 1: MRPC, QQP),
`pearson` and `spearman` (STS-B, reported separately). Each task's list is
`kerasbert.data.glue_tasks.get_task(name).metrics`; MNLI's matched and mismatched dev files are
two calls whose results the caller names.

Degenerate predictions are reported without warnings or NaN: Matthews correlation is 0.0 when
one class is predicted (scikit-learn's convention), F1 is 0.0 when class 1 is never predicted
(or never true), and Pearson and Spearman are 0.0 when the predictions or the labels are
constant (the correlation is undefined: no evidence of any relation), or with fewer than two
examples; SciPy's warning for nearly constant inputs is silenced (the value is still computed).
`is_degenerate` flags runs whose predictions are all one class or exactly constant.
"""

import warnings

import numpy as np
import scipy.stats
import sklearn.metrics

from kerasbert.data.glue_tasks import get_task


def matthews_correlation(labels, predictions):
    """Matthews correlation coefficient of class ids (any number of classes); 0.0 if degenerate.

    >>> round(matthews_correlation([0, 1, 1, 0], [0, 1, 0, 0]), 4)
    0.5774
    >>> matthews_correlation([0, 1], [1, 1])
    0.0
    """
    if np.unique(np.concatenate([np.ravel(labels), np.ravel(predictions)])).size < 2:
        return 0.0  # one class only: scikit-learn returns 0.0 too, after a warning
    return float(sklearn.metrics.matthews_corrcoef(labels, predictions))


def accuracy(labels, predictions):
    """The fraction of predictions equal to their label.

    >>> accuracy([0, 1, 2, 2], [0, 1, 1, 2])
    0.75
    """
    return float(sklearn.metrics.accuracy_score(labels, predictions))


def f1(labels, predictions):
    """Binary F1 of class 1 (MRPC, QQP); 0.0 when class 1 is never predicted nor true.

    >>> f1([1, 1, 0, 0], [1, 0, 1, 0]), f1([0, 0], [0, 0])
    (0.5, 0.0)
    """
    return float(sklearn.metrics.f1_score(labels, predictions, pos_label=1, average="binary",
                                          zero_division=0.0))


def pearson(labels, predictions):
    """Pearson correlation of scores; 0.0 when either side is constant or has < 2 values.

    >>> round(pearson([0.0, 2.5, 5.0], [1.0, 2.0, 4.0]), 6), pearson([1.0, 2.0], [3.0, 3.0])
    (0.981981, 0.0)
    """
    return _correlation(scipy.stats.pearsonr, labels, predictions)


def spearman(labels, predictions):
    """Spearman rank correlation of scores; 0.0 when either side is constant or has < 2 values.

    >>> spearman([0.0, 2.5, 5.0], [1.0, 2.0, 4.0]), spearman([1.0, 2.0], [3.0, 3.0])
    (1.0, 0.0)
    """
    return _correlation(scipy.stats.spearmanr, labels, predictions)


METRICS = {"matthews_correlation": matthews_correlation, "accuracy": accuracy, "f1": f1,
           "pearson": pearson, "spearman": spearman}


def compute_metrics(metric_names, labels, predictions):
    """{name: value} of the named metrics (keys of `METRICS`) of `predictions` against `labels`.

    Labels and predictions are class ids (or scores for `pearson`/`spearman`), one per example.

    >>> compute_metrics(("accuracy", "f1"), [1, 0, 1, 1], [1, 0, 0, 1])
    {'accuracy': 0.75, 'f1': 0.8}
    """
    labels, predictions = _checked(labels, predictions)
    unknown = [name for name in metric_names if name not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; expected names from {list(METRICS)}")
    return {name: METRICS[name](labels, predictions) for name in metric_names}


def glue_metrics(task, labels, predictions):
    """The metrics of `task` (a name in `kerasbert.data.glue_tasks.GLUE_TASKS`, or a `GlueTask`).

    >>> scores = glue_metrics("stsb", [0.0, 2.5, 5.0], [0.5, 3.0, 3.5])
    >>> {name: round(value, 4) for name, value in scores.items()}
    {'pearson': 0.9333, 'spearman': 1.0}
    """
    return compute_metrics(get_task(task).metrics, labels, predictions)


def is_degenerate(predictions):
    """True when every prediction is the same class id, or regression outputs are constant.

    A degenerate run scores Matthews correlation 0.0 and a majority-class accuracy; flag it
    rather than report it as a result. Predictions: one class id or score per example.

    >>> is_degenerate([1, 1, 1]), is_degenerate([0, 1, 1]), is_degenerate([2.5, 2.5])
    (True, False, True)
    """
    predictions = np.asarray(predictions).reshape(-1)
    if predictions.size == 0:
        raise ValueError("no predictions")
    return bool(np.all(predictions == predictions[0]))


def _correlation(statistic, labels, predictions):
    labels = np.asarray(labels, np.float64)
    predictions = np.asarray(predictions, np.float64)
    if labels.size < 2 or np.ptp(labels) == 0 or np.ptp(predictions) == 0:
        return 0.0
    with warnings.catch_warnings():
        # Differences near float64 resolution: SciPy still computes the value, with a warning.
        warnings.simplefilter("ignore", scipy.stats.NearConstantInputWarning)
        return float(statistic(labels, predictions).statistic)


def _checked(labels, predictions):
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.ndim != 1 or labels.shape != predictions.shape:
        raise ValueError(f"labels and predictions must be 1-D and of one length, got shapes "
                         f"{labels.shape} and {predictions.shape}")
    if labels.size == 0:
        raise ValueError("no examples to evaluate")
    return labels, predictions
