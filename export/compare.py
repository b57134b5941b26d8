"""How an artifact's outputs are judged against the Keras model's.

Float32 artifacts: the largest absolute difference divided by the output's magnitude
(`max(1, max |reference|)`) must stay within `FLOAT32_TOLERANCE`.

Quantized artifacts, one strict rule per kind of output (`quantized_check`):

- Classifier logits (several per row: per example, per masked position, per real token for
  token-level logits, over the real tokens for span starts and ends): argmax agreement with
  the float model, every flip counted, at least `AGREEMENT_THRESHOLD`. Flips where the float
  model itself all but ties (the float gap between its choice and the quantized one is within
  `NEAR_TIE` of that same example's largest absolute logit) are counted as `near_tie_flips`,
  for information only: they are flips like any other.
- One logit per token (ELECTRA's `rtd_logits`): its sign is the token's decision, so it is
  judged like logits, by the agreement of the signs over the real tokens, every flip counted
  (for one number per token, the per-token cosine is that sign: this is its 1st percentile
  held to the same 0.99). Near ties: float logits within `NEAR_TIE` of the largest absolute
  logit of that example.
- Vectors (hidden states, pooled outputs): the cosine similarity of every real token's (or
  example's) vector with the float one; the smallest of them, not the mean, at least
  `COSINE_THRESHOLD`, so that one broken token fails the artifact. One value per example
  (regression) is one vector over the batch.

With a labelled set (`kerasbert.export.labelled`), a task model's quantized artifact is judged
by its task metric instead; the agreement is then reported beside it and decides nothing.
"""

import numpy as np

FLOAT32_TOLERANCE = 1e-4
AGREEMENT_THRESHOLD = 0.99
# Chosen by measurement on pretrained tiny models (docs/export.md, "Quantized variants: the
# measurements"): every variant of theirs that keeps 99% of their argmax predictions keeps
# every token's cosine above it; the int8 variant that flipped more did not, nor does any
# deliberately broken one.
COSINE_THRESHOLD = 0.99
NEAR_TIE = 0.05
_SPAN_OUTPUTS = ("start_logits", "end_logits")
_THRESHOLDS = {"argmax_agreement": AGREEMENT_THRESHOLD, "min_cosine": COSINE_THRESHOLD}


def is_sequence_aligned(name, value, sequence_length):
    """Whether axis 1 of output `value` runs along the input tokens.

    >>> is_sequence_aligned("sequence_output", np.zeros((2, 9, 4)), 9)
    True
    >>> is_sequence_aligned("mlm_logits", np.zeros((2, 9, 4)), 9)
    False
    """
    return name != "mlm_logits" and value.ndim >= 2 and value.shape[1] == sequence_length


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


def agreement(name, reference, candidate, padding_mask):
    """How quantized output `candidate` agrees with the float `reference` (module docstring):
    `{"metric", "value", "compared", ...}`, `metric` being `argmax_agreement` or `min_cosine`.

    >>> mask = np.ones((2, 3), "int32")
    >>> agreement("logits", np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.9, 0.1], [0.6, 0.4]]), mask)
    {'metric': 'argmax_agreement', 'value': 0.5, 'compared': 2, 'flips': 1, 'near_tie_flips': 0}
    >>> agreement("logits", np.array([[1.0, 0.98], [0.0, 1.0]]), np.array([[0.9, 1.0], [0.0, 1.0]]), mask)
    {'metric': 'argmax_agreement', 'value': 0.5, 'compared': 2, 'flips': 1, 'near_tie_flips': 1}
    >>> agreement("rtd_logits", np.array([[2.0, -1.0, 0.05], [1.0, 1.0, 1.0]]),
    ...           np.array([[1.5, -0.8, -0.02], [1.1, 0.9, 5.0]]), mask)["flips"]
    1
    >>> tokens = np.ones((2, 3, 4))
    >>> broken = tokens.copy(); broken[1, 2] = -1.0
    >>> agreement("sequence_output", tokens, broken, mask)["value"]
    -1.0
    """
    reference = np.asarray(reference, np.float64)
    candidate = np.asarray(candidate, np.float64)
    padding_mask = np.asarray(padding_mask)
    aligned = is_sequence_aligned(name, reference, padding_mask.shape[-1])
    if name in _SPAN_OUTPUTS:
        pads = padding_mask == 0
        reference = np.where(pads, -np.inf, reference)
        candidate = np.where(pads, -np.inf, candidate)
        return _argmax_agreement(reference, candidate)
    if name.endswith("logits") and reference.shape[-1] > 1 and not (
            aligned and reference.ndim == 2):
        if aligned:
            reference = real_token_rows(reference, padding_mask)
            candidate = real_token_rows(candidate, padding_mask)
        return _argmax_agreement(reference, candidate)
    if aligned and reference.ndim == 2:  # one logit per token: its sign decides
        return _sign_agreement(reference, candidate, padding_mask == 1)
    if aligned:
        reference = real_token_rows(reference, padding_mask)
        candidate = real_token_rows(candidate, padding_mask)
    if reference.shape[-1] == 1:  # one value per example: one vector over the batch
        reference, candidate = reference.reshape(1, -1), candidate.reshape(1, -1)
    return _min_cosine(reference, candidate)


def passes(result):
    """Whether an `agreement` result meets its threshold.

    >>> passes({"metric": "argmax_agreement", "value": 0.99})
    True
    >>> passes({"metric": "min_cosine", "value": 0.5})
    False
    """
    return result["value"] >= _THRESHOLDS[result["metric"]]


def threshold(result):
    """The threshold an `agreement` result is held to.

    >>> threshold({"metric": "argmax_agreement", "value": 1.0})
    0.99
    """
    return _THRESHOLDS[result["metric"]]


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
