"""How an artifact's outputs are judged against the Keras model's.

Float32 artifacts: the largest absolute difference divided by the output's magnitude
(`max(1, max |reference|)`) must stay within `FLOAT32_TOLERANCE`. Quantized artifacts:
argmax agreement for classifier logits (per real token for token-level logits, over the
real tokens for span starts and ends) and mean cosine similarity of vectors for hidden
states and one-logit outputs, each at least `AGREEMENT_THRESHOLD`.

A quantized artifact whose argmax differs from the float model's where the float model itself
all but ties (its logit for the quantized choice is within `TIE_TOLERANCE` of the output's
magnitude, `max(1, max |logit|)`, of its top logit) is not counted as disagreeing: int8
rounding moves logits by about that much, so such flips say nothing about the export. They are
reported as `near_ties`, and `strict_value` is the agreement that counts them.
"""

import numpy as np

FLOAT32_TOLERANCE = 1e-4
AGREEMENT_THRESHOLD = 0.99
# Measured on the tests' pretrained tiny BERT, full int8: the next-sentence logits move by up to
# 0.21 (magnitude 1.37) and the 6 of 256 predictions that flipped had float gaps of 0.015-0.11.
TIE_TOLERANCE = 0.05
_SPAN_OUTPUTS = ("start_logits", "end_logits")


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
    """`{"metric", "value"}` of a quantized output against the float one (module docstring).

    >>> mask = np.ones((2, 3), "int32")
    >>> agreement("logits", np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.9, 0.1], [0.6, 0.4]]), mask)
    {'metric': 'argmax_agreement', 'value': 0.5, 'strict_value': 0.5, 'near_ties': 0}
    >>> agreement("logits", np.array([[1.0, 0.98], [0.0, 1.0]]), np.array([[0.9, 1.0], [0.2, 0.9]]), mask)
    {'metric': 'argmax_agreement', 'value': 1.0, 'strict_value': 0.5, 'near_ties': 1}
    """
    reference = np.asarray(reference, np.float64)
    candidate = np.asarray(candidate, np.float64)
    aligned = is_sequence_aligned(name, reference, padding_mask.shape[-1])
    if name in _SPAN_OUTPUTS:
        pads = np.asarray(padding_mask) == 0
        reference = np.where(pads, -np.inf, reference)
        candidate = np.where(pads, -np.inf, candidate)
        return _argmax_agreement(reference, candidate)
    if name.endswith("logits") and reference.shape[-1] > 1 and not (
            aligned and reference.ndim == 2):
        if aligned:
            reference = real_token_rows(reference, padding_mask)
            candidate = real_token_rows(candidate, padding_mask)
        return _argmax_agreement(reference, candidate)
    if aligned and reference.ndim == 2:  # one logit per token (replaced-token detection)
        reference = reference[..., None]
        candidate = candidate[..., None]
    if aligned:
        reference = real_token_rows(reference, padding_mask)
        candidate = real_token_rows(candidate, padding_mask)
    if reference.shape[-1] == 1:
        reference, candidate = reference.reshape(1, -1), candidate.reshape(1, -1)
    return _mean_cosine(reference, candidate)


def _argmax_agreement(reference, candidate):
    chosen = np.argmax(reference, axis=-1)
    picked = np.argmax(candidate, axis=-1)
    same = chosen == picked
    tolerance = TIE_TOLERANCE * max(1.0, float(np.max(np.abs(reference[np.isfinite(reference)]))))
    gap = (np.take_along_axis(reference, chosen[..., None], -1) -
           np.take_along_axis(reference, picked[..., None], -1))[..., 0]
    near_ties = ~same & (gap <= tolerance)
    return {"metric": "argmax_agreement", "value": round(float(np.mean(same | near_ties)), 6),
            "strict_value": round(float(np.mean(same)), 6), "near_ties": int(np.sum(near_ties))}


def _mean_cosine(reference, candidate):
    reference = reference.reshape(-1, reference.shape[-1])
    candidate = candidate.reshape(-1, candidate.shape[-1])
    norms = np.linalg.norm(reference, axis=-1) * np.linalg.norm(candidate, axis=-1)
    cosine = np.sum(reference * candidate, axis=-1) / np.maximum(norms, 1e-12)
    return {"metric": "mean_cosine", "value": round(float(np.mean(cosine)), 6),
            "min_cosine": round(float(np.min(cosine)), 6)}
