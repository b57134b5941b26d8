"""How an artifact's outputs are judged against the Keras model's.

Float32 artifacts: the largest absolute difference divided by the output's magnitude
(`max(1, max |reference|)`) must stay within `FLOAT32_TOLERANCE`.

Quantized artifacts, one strict rule per kind of output, the kind declared by the model
(`kerasbert.export.output_kinds`), never read from an array's shape:

- Class logits (`example_logits` per example or masked position, `token_logits` per real
  token, `span_logits` over the real tokens): argmax agreement with the float model, every
  flip counted, at least `AGREEMENT_THRESHOLD` (`LABELLED_AGREEMENT_THRESHOLD` on a labelled
  set's own inputs, where the task score must also stay within 1 point). Flips where the float
  model itself all but ties (the float gap between its choice and the quantized one is within
  `NEAR_TIE` of that same example's largest absolute logit) are counted as `near_tie_flips`,
  for information only: they are flips like any other.
- One logit per token whose sign decides (`token_signs`, ELECTRA's `rtd_logits`): the
  agreement of the signs over the real tokens, held to the same thresholds. Near ties: float
  logits within `NEAR_TIE` of the largest absolute logit of that example.
- Vectors (`token_vectors`, `example_vectors`): the cosine similarity of every real token's
  (or example's) vector with the float one; the smallest of them, not the mean, at least
  `COSINE_THRESHOLD`, so that one broken token fails the artifact.
- One value per example (`regression`): the largest absolute difference divided by the spread
  of the float values over the judged examples (largest minus smallest), at most
  `REGRESSION_THRESHOLD`: a file that doubles every score fails, as a cosine would not see.
"""

import numpy as np

FLOAT32_TOLERANCE = 1e-4
AGREEMENT_THRESHOLD = 0.99
# Chosen by measurement on pretrained tiny models (docs/export.md, "Quantized variants: the
# measurements"): every variant of theirs that keeps 99% of their argmax predictions keeps
# every token's cosine above it; the int8 variant that flipped more did not, nor does any
# deliberately broken one.
COSINE_THRESHOLD = 0.99
LABELLED_AGREEMENT_THRESHOLD = 0.98
REGRESSION_THRESHOLD = 0.02
NEAR_TIE = 0.05
_THRESHOLDS = {"argmax_agreement": AGREEMENT_THRESHOLD, "min_cosine": COSINE_THRESHOLD,
               "max_error_over_spread": REGRESSION_THRESHOLD}
_LOWER_IS_BETTER = ("max_error_over_spread",)


def float_difference(reference, candidate):
    """`{"max_abs", "max_rel"}`: the largest absolute difference, and that over the magnitude.

    >>> float_difference(np.array([10.0, 1.0]), np.array([10.0, 1.01]))
    {'max_abs': 0.01, 'max_rel': 0.001}
    """
    reference = np.asarray(reference, np.float64)
    candidate = np.asarray(candidate, np.float64)
    if reference.shape != candidate.shape:
        return {"max_abs": float("inf"), "max_rel": float("inf"),
                "shape": [list(reference.shape), list(candidate.shape)]}
    if reference.size == 0:
        return {"max_abs": 0.0, "max_rel": 0.0}
    max_abs = float(np.max(np.abs(reference - candidate)))
    scale = max(1.0, float(np.max(np.abs(reference))))
    return {"max_abs": round(max_abs, 10), "max_rel": round(max_abs / scale, 10)}


def real_token_rows(value, padding_mask):
    """The vectors of `value` (`[batch, seq, ...]` or `[batch, choices, seq, ...]`) at real
    tokens, as `[tokens, ...]`.

    >>> real_token_rows(np.arange(6).reshape(1, 3, 2), np.array([[1, 1, 0]])).tolist()
    [[0, 1], [2, 3]]
    """
    keep = np.asarray(padding_mask).reshape(-1) == 1
    return value.reshape((keep.size,) + value.shape[padding_mask.ndim:])[keep]


def agreement(kind, reference, candidate, padding_mask):
    """How quantized output `candidate` of `kind` (`kerasbert.export.output_kinds`) agrees with
    the float `reference` (module docstring): `{"metric", "value", "compared", ...}`, `metric`
    being `argmax_agreement`, `min_cosine` or `max_error_over_spread`.

    >>> mask = np.ones((2, 3), "int32")
    >>> agreement("example_logits", np.array([[1.0, 0.0], [0.0, 1.0]]),
    ...           np.array([[0.9, 0.1], [0.6, 0.4]]), mask)
    {'metric': 'argmax_agreement', 'value': 0.5, 'compared': 2, 'flips': 1, 'near_tie_flips': 0}
    >>> agreement("example_logits", np.array([[1.0, 0.98], [0.0, 1.0]]),
    ...           np.array([[0.9, 1.0], [0.0, 1.0]]), mask)
    {'metric': 'argmax_agreement', 'value': 0.5, 'compared': 2, 'flips': 1, 'near_tie_flips': 1}
    >>> agreement("token_signs", np.array([[2.0, -1.0, 0.05], [1.0, 1.0, 1.0]]),
    ...           np.array([[1.5, -0.8, -0.02], [1.1, 0.9, 5.0]]), mask)["flips"]
    1
    >>> tokens = np.ones((2, 3, 4))
    >>> broken = tokens.copy(); broken[1, 2] = -1.0
    >>> agreement("token_vectors", tokens, broken, mask)["value"]
    -1.0
    >>> agreement("regression", np.array([[1.0], [3.0]]), np.array([[2.0], [6.0]]), mask)["value"]
    1.5
    """
    reference = np.asarray(reference, np.float64)
    candidate = np.asarray(candidate, np.float64)
    padding_mask = np.asarray(padding_mask)
    if reference.shape != candidate.shape:
        return {"metric": _METRICS[kind], "value": _WORST[_METRICS[kind]], "compared": 0,
                "shape": [list(reference.shape), list(candidate.shape)]}
    if kind == "span_logits":
        pads = padding_mask == 0
        return _argmax_agreement(np.where(pads, -np.inf, reference),
                                 np.where(pads, -np.inf, candidate))
    if kind == "example_logits":
        return _argmax_agreement(reference, candidate)
    if kind == "token_logits":
        return _argmax_agreement(real_token_rows(reference, padding_mask),
                                 real_token_rows(candidate, padding_mask))
    if kind == "token_signs":
        return _sign_agreement(reference, candidate, padding_mask == 1)
    if kind == "token_vectors":
        return _min_cosine(real_token_rows(reference, padding_mask),
                           real_token_rows(candidate, padding_mask))
    if kind == "example_vectors":
        return _min_cosine(reference, candidate)
    if kind == "regression":
        return _error_over_spread(reference, candidate)
    raise ValueError(f"unknown output kind {kind!r}")


def passes(result, labelled=False):
    """Whether an `agreement` result meets its threshold (`threshold`).

    >>> passes({"metric": "argmax_agreement", "value": 0.99})
    True
    >>> passes({"metric": "min_cosine", "value": 0.5})
    False
    >>> passes({"metric": "max_error_over_spread", "value": 0.03})
    False
    """
    limit = threshold(result, labelled)
    if result["metric"] in _LOWER_IS_BETTER:
        return result["value"] <= limit
    return result["value"] >= limit


def threshold(result, labelled=False):
    """The threshold an `agreement` result is held to; `labelled`: judged on a labelled set's
    inputs, whose task score is held to its own bound too.

    >>> threshold({"metric": "argmax_agreement", "value": 1.0})
    0.99
    >>> threshold({"metric": "argmax_agreement", "value": 1.0}, labelled=True)
    0.98
    """
    if labelled and result["metric"] == "argmax_agreement":
        return LABELLED_AGREEMENT_THRESHOLD
    return _THRESHOLDS[result["metric"]]


_METRICS = {"example_logits": "argmax_agreement", "token_logits": "argmax_agreement",
            "span_logits": "argmax_agreement", "token_signs": "argmax_agreement",
            "token_vectors": "min_cosine", "example_vectors": "min_cosine",
            "regression": "max_error_over_spread"}
_WORST = {"argmax_agreement": 0.0, "min_cosine": -1.0, "max_error_over_spread": float("inf")}


def _argmax_agreement(reference, candidate):
    reference = reference.reshape(-1, reference.shape[-1])
    candidate = candidate.reshape(-1, candidate.shape[-1])
    chosen = np.argmax(reference, axis=-1)
    broken = np.any(np.isfinite(reference) & ~np.isfinite(candidate), axis=-1)
    picked = np.argmax(np.where(np.isnan(candidate), -np.inf, candidate), axis=-1)
    flipped = (chosen != picked) | broken
    rows = np.arange(len(chosen))
    gap = reference[rows, chosen] - reference[rows, picked]
    scale = np.max(np.where(np.isfinite(reference), np.abs(reference), 0.0), axis=-1)
    near_ties = flipped & ~broken & (gap <= NEAR_TIE * np.maximum(scale, 1e-12))
    result = {"metric": "argmax_agreement", "value": round(float(np.mean(~flipped)), 6),
              "compared": int(len(chosen)), "flips": int(np.sum(flipped)),
              "near_tie_flips": int(np.sum(near_ties))}
    if np.any(broken):
        result["non_finite"] = int(np.sum(broken))
    return result


def _sign_agreement(reference, candidate, keep):
    scale = np.max(np.where(keep, np.abs(reference), 0.0), axis=-1, keepdims=True)
    near = (np.abs(reference) <= NEAR_TIE * np.maximum(scale, 1e-12))[keep]
    reference, candidate = reference[keep], candidate[keep]
    broken = ~np.isfinite(candidate)
    flipped = ((reference > 0) != (candidate > 0)) | broken
    result = {"metric": "argmax_agreement", "value": round(float(np.mean(~flipped)), 6),
              "compared": int(len(reference)), "flips": int(np.sum(flipped)),
              "near_tie_flips": int(np.sum(flipped & ~broken & near))}
    if np.any(broken):
        result["non_finite"] = int(np.sum(broken))
    return result


def _min_cosine(reference, candidate):
    reference = reference.reshape(-1, reference.shape[-1])
    candidate = candidate.reshape(-1, candidate.shape[-1])
    broken = ~np.all(np.isfinite(candidate), axis=-1)
    candidate = np.where(np.isfinite(candidate), candidate, 0.0)
    reference_norm = np.linalg.norm(reference, axis=-1)
    candidate_norm = np.linalg.norm(candidate, axis=-1)
    cosine = np.sum(reference * candidate, axis=-1) / np.maximum(
        reference_norm * candidate_norm, 1e-30)
    cosine = np.where((reference_norm == 0) & (candidate_norm == 0), 1.0, cosine)
    cosine = np.where(broken, -1.0, cosine)  # NaN or infinity: as wrong as a vector can be
    result = {"metric": "min_cosine", "value": round(float(np.min(cosine)), 6),
              "compared": int(len(cosine)),
              "percentile_1_cosine": round(float(np.quantile(cosine, 0.01)), 6),
              "mean_cosine": round(float(np.mean(cosine)), 6)}
    if np.any(broken):
        result["non_finite"] = int(np.sum(broken))
    return result


def _error_over_spread(reference, candidate):
    reference, candidate = reference.reshape(-1), candidate.reshape(-1)
    broken = ~np.isfinite(candidate)
    error = np.where(broken, np.inf, np.abs(np.where(broken, 0.0, candidate) - reference))
    spread = float(np.max(reference) - np.min(reference)) if reference.size else 0.0
    # A constant float output has no spread: its own magnitude (or 1) is the scale.
    scale = spread if spread > 0 else max(float(np.max(np.abs(reference), initial=0.0)), 1.0)
    value = float(np.max(error, initial=0.0)) / scale
    result = {"metric": "max_error_over_spread",
              "value": round(value, 6) if np.isfinite(value) else float("inf"),
              "compared": int(reference.size), "max_abs_error": round(float(np.max(
                  error, initial=0.0)), 6), "float_spread": round(spread, 6)}
    if np.any(broken):
        result["non_finite"] = int(np.sum(broken))
    return result
