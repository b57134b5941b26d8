"""Entity-level precision, recall and F1 as CoNLL's `conlleval` computes them (via seqeval).

An entity (a "chunk") is a maximal run of tags of one type that `conlleval`'s
rules keep together: it opens at a `B-` tag, at an `I-` tag that follows `O`
or another type (so IOB1, where `I-` opens entities, and IOB2 both work), and
at `S-`; it closes where the next one opens or at `O`. A predicted entity
counts as correct only when its type and both boundaries equal a gold
entity's. seqeval's default mode (no `scheme`) follows these rules.
"""

import numpy as np
from seqeval import metrics


def entity_scores(gold_tags, predicted_tags):
    """`{"precision", "recall", "f1", "accuracy"}` of predicted tags against the gold ones.

    Precision is correct entities / predicted entities, recall correct /
    gold entities, F1 their harmonic mean (each 0.0 where `conlleval` divides
    by zero), micro-averaged over all entity types; accuracy is the share of
    words whose tag is right. All are fractions (conlleval prints percent).

    Args:
        gold_tags, predicted_tags: one list of tag strings per sentence, the
            same number of tags in both for each sentence.

    >>> gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    >>> predicted = [["B-PER", "I-PER", "O", "B-ORG"]]
    >>> entity_scores(gold, predicted)
    {'precision': 0.5, 'recall': 0.5, 'f1': 0.5, 'accuracy': 0.75}
    """
    gold, predicted = _checked(gold_tags, "gold_tags"), _checked(predicted_tags, "predicted_tags")
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted ones")
    for number, (gold_sentence, predicted_sentence) in enumerate(zip(gold, predicted)):
        if len(gold_sentence) != len(predicted_sentence):
            raise ValueError(f"sentence {number} has {len(gold_sentence)} gold tags but "
                             f"{len(predicted_sentence)} predicted ones")
    if not any(gold):
        raise ValueError("there are no tags to score")
    return {
        "precision": float(metrics.precision_score(gold, predicted, zero_division=0)),
        "recall": float(metrics.recall_score(gold, predicted, zero_division=0)),
        "f1": float(metrics.f1_score(gold, predicted, zero_division=0)),
        "accuracy": float(metrics.accuracy_score(gold, predicted)),
    }


def _checked(sentences, argument):
    """`sentences` as lists of str, or `ValueError` naming what is not a tag."""
    if isinstance(sentences, (str, bytes)):
        raise ValueError(f"{argument} must be a list of tag lists, one per sentence, not a string")
    result = []
    for number, sentence in enumerate(sentences):
        if isinstance(sentence, (str, bytes)):
            raise ValueError(f"{argument}[{number}] is a string; expected a list of tags")
        tags = [tag.item() if isinstance(tag, np.generic) else tag for tag in sentence]
        if not all(isinstance(tag, str) for tag in tags):
            raise ValueError(f"{argument}[{number}] holds a tag that is not a string")
        result.append(tags)
    return result
