"""Start / end logits of SQuAD windows -> answer texts, n-best lists and null odds; their files.

Decoding follows Google's BERT `run_squad.py`: in every window of a question, the `n_best_size`
highest start logits are paired with the `n_best_size` highest end logits; a pair is a candidate
when both tokens are in the window's context, the window has the maximum context for the start
token, the end is not before the start and the span has at most `max_answer_length` tokens.
Candidates of all windows are ranked by start + end logit (ties keep window, start, end order),
and their text is the context substring from the start token's first character to the end
token's last one (through the tokenizer's character offsets, so casing, accents and spacing are
the original ones); a span whose text is only whitespace (a byte-level BPE space token) is no
candidate. The n-best list keeps the best `n_best_size` distinct texts.

SQuAD v2.0 (`version_2_with_negative=True`): the null score is the smallest start[0] + end[0] over
the question's windows; the null answer "" joins the ranking with it, and the n-best list always
holds it. The prediction is "" when null score - best non-null score > `null_score_diff_threshold`;
that difference is the question's null odds (`null_odds.json`, the official evaluation's
`--na-prob-file`). A question without any non-null candidate is predicted "" (with null odds equal
to the null score, as `run_squad.py` writes them), in v1.1 too, where it gets the one n-best entry
"" with its null logits, instead of failing.
"""

import collections
import dataclasses
import json
import math

import numpy as np

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"


@dataclasses.dataclass(frozen=True)
class SquadPredictions:
    """Decoded answers, keyed by question id, in example order.

    Attributes:
        texts: {qas_id: predicted answer text} (`predictions.json`).
        nbest: {qas_id: [{"text", "probability", "start_logit", "end_logit"}, ...]},
            best first (`nbest_predictions.json`).
        null_odds: {qas_id: null score - best non-null score} for SQuAD v2.0
            (`null_odds.json`), None for v1.1.

    >>> predictions = SquadPredictions({"q": "Paris"}, {"q": []}, None)
    >>> predictions.texts["q"], predictions.null_odds is None
    ('Paris', True)
    """

    texts: dict
    nbest: dict
    null_odds: dict | None


def decode_squad(examples, features, start_logits, end_logits, *, n_best_size=20,
                 max_answer_length=30, version_2_with_negative=False,
                 null_score_diff_threshold=0.0):
    """Answer texts for `examples` from the logits of their `features` (see the module docstring).

    `start_logits` and `end_logits` are `[len(features), max_seq_length]`
    arrays, row `i` for `features[i]` (the order of an unshuffled
    `squad_dataset`, or scatter the rows by its `feature_index`). Returns
    `SquadPredictions`.

    >>> import numpy as np, kerasbert.data.demo, kerasbert.zoo
    >>> from kerasbert.data.squad import SquadExample
    >>> from kerasbert.data.squad_features import squad_windows
    >>> tokenizer = kerasbert.zoo.build_tokenizer(
    ...     "bert_tiny_uncased", kerasbert.data.demo.vocabulary_dir("wordpiece"))
    >>> example = SquadExample("q", "What?", "The Sorted List.", is_impossible=True)
    >>> features = squad_windows([example], tokenizer, max_seq_length=10, max_query_length=2)
    >>> start, end = np.zeros([1, 10]), np.zeros([1, 10])
    >>> start[0, 5], end[0, 6] = 2.0, 3.0  # "sorted" ... "list"
    >>> decode_squad([example], features, start, end).texts
    {'q': 'Sorted List'}
    >>> decoded = decode_squad([example], features, start, end, version_2_with_negative=True)
    >>> decoded.texts, decoded.null_odds, [entry["text"] for entry in decoded.nbest["q"]][:2]
    ({'q': 'Sorted List'}, {'q': -5.0}, ['Sorted List', 'The Sorted List'])
    >>> decode_squad([example], features, start, end, version_2_with_negative=True,
    ...              null_score_diff_threshold=-6.0).texts
    {'q': ''}
    """
    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError(f"n_best_size and max_answer_length must be at least 1, got "
                         f"{n_best_size} and {max_answer_length}")
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    if start_logits.shape != end_logits.shape or start_logits.shape[:1] != (len(features),):
        raise ValueError(f"start_logits {start_logits.shape} and end_logits {end_logits.shape} "
                         f"must both have one row per feature ({len(features)} features)")
    by_example = collections.defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    texts, nbest, null_odds = {}, {}, {} if version_2_with_negative else None
    for example_index, example in enumerate(examples):
        windows = by_example.get(example_index)
        if not windows:
            raise ValueError(f"question {example.qas_id!r} (example {example_index}) has no "
                             "features")
        answer = _decode_example(example, windows, start_logits, end_logits, n_best_size,
                                 max_answer_length, version_2_with_negative)
        nbest[example.qas_id] = answer.nbest
        best = answer.best_non_null
        if not version_2_with_negative:
            texts[example.qas_id] = answer.nbest[0]["text"]
            continue
        difference = answer.null_score - (_score(best) if best is not None else 0.0)
        null_odds[example.qas_id] = difference
        use_null = best is None or difference > null_score_diff_threshold
        texts[example.qas_id] = "" if use_null else best.text
    return SquadPredictions(texts, nbest, null_odds)


def write_squad_predictions(output_dir, predictions):
    """Write `predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json`.

    JSON as the official evaluation scripts read it and Google's `run_squad.py`
    writes it (4-space indent); each file is written under a temporary name and
    renamed. Returns the paths written.

    >>> import os, tempfile
    >>> paths = write_squad_predictions(tempfile.mkdtemp(), SquadPredictions(
    ...     {"q": "Paris"}, {"q": [{"text": "Paris", "probability": 1.0, "start_logit": 2.0,
    ...                             "end_logit": 3.0}]}, {"q": -5.0}))
    >>> [os.path.basename(path) for path in paths]
    ['predictions.json', 'nbest_predictions.json', 'null_odds.json']
    >>> open(paths[0]).read()
    '{\\n    "q": "Paris"\\n}\\n'
    """
    contents = [(PREDICTIONS_FILE, predictions.texts), (NBEST_FILE, predictions.nbest)]
    if predictions.null_odds is not None:
        contents.append((NULL_ODDS_FILE, predictions.null_odds))
    return [write_atomically(file_system.join(output_dir, name),
                             json.dumps(values, indent=4, allow_nan=False) + "\n")
            for name, values in contents]


_Candidate = collections.namedtuple("_Candidate", ["text", "start_logit", "end_logit"])


# The decoded n-best list (JSON-ready), the best non-null `_Candidate` (or None) and the null score.
_Answer = collections.namedtuple("_Answer", ["nbest", "best_non_null", "null_score"])


def _decode_example(example, windows, start_logits, end_logits, n_best_size, max_answer_length,
                    with_null):
    scores, starts, ends, owners = [], [], [], []
    null = None  # (score, start logit, end logit) of the window with the smallest null score
    for feature in windows:
        start_row, end_row = start_logits[feature.feature_index], end_logits[feature.feature_index]
        null_score = float(start_row[0] + end_row[0])
        if null is None or null_score < null[0]:
            null = (null_score, float(start_row[0]), float(end_row[0]))
        start, end = _window_spans(feature, start_row, end_row, n_best_size, max_answer_length)
        scores.append(start_row[start] + end_row[end])
        starts.append(start)
        ends.append(end)
        owners.append(np.full(len(start), len(owners)))
    order = np.argsort(-np.concatenate(scores), kind="stable")
    starts, ends, owners = (np.concatenate(values)[order] for values in (starts, ends, owners))

    null_candidate = _Candidate("", null[1], null[2])
    nbest, seen, best_non_null, null_placed = [], set(), None, False
    for start, end, owner in zip(starts, ends, owners):
        feature = windows[owner]
        candidate = _Candidate(_span_text(example.context, feature, start, end),
                               float(start_logits[feature.feature_index, start]),
                               float(end_logits[feature.feature_index, end]))
        if with_null and not null_placed and _score(null_candidate) > _score(candidate):
            null_placed = True
            if len(nbest) < n_best_size:
                nbest.append(null_candidate)
                seen.add("")
        if not candidate.text.strip():
            continue
        if best_non_null is None:
            best_non_null = candidate
        if len(nbest) < n_best_size and candidate.text not in seen:
            nbest.append(candidate)
            seen.add(candidate.text)
        if len(nbest) >= n_best_size:
            break
    if (with_null and "" not in seen) or not nbest:
        nbest.append(null_candidate)
    return _Answer(_nbest_json(nbest), best_non_null, null[0])


def _window_spans(feature, start_row, end_row, n_best_size, max_answer_length):
    """Packed (start, end) positions of the window's valid candidate spans, in pairing order."""
    top_starts = np.argsort(-start_row, kind="stable")[:n_best_size]
    top_ends = np.argsort(-end_row, kind="stable")[:n_best_size]
    start, end = np.meshgrid(top_starts, top_ends, indexing="ij")
    first, last = feature.context_offset, feature.context_offset + feature.window_length
    valid = ((start >= first) & (start < last) & (end >= start) & (end < last)
             & (end - start < max_answer_length))
    valid[valid] = feature.max_context[start[valid] - first]
    return start[valid], end[valid]


def _span_text(context, feature, start, end):
    first = feature.context_offset
    return context[feature.char_starts[start - first]:feature.char_ends[end - first]]


def _score(candidate):
    return candidate.start_logit + candidate.end_logit


def _nbest_json(nbest):
    scores = [_score(candidate) for candidate in nbest]
    top = max(scores)
    weights = [math.exp(score - top) for score in scores]
    total = sum(weights)
    return [{"text": candidate.text, "probability": weight / total,
             "start_logit": candidate.start_logit, "end_logit": candidate.end_logit}
            for candidate, weight in zip(nbest, weights)]
