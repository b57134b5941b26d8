"""Retrieval and similarity scores of text embeddings, as sentence-transformers' evaluators
compute them (`InformationRetrievalEvaluator`, `EmbeddingSimilarityEvaluator`)."""

import numpy as np
from scipy import stats

RETRIEVAL_CUTOFF = 10  # MRR@10, recall@10 and NDCG@10


def unit_vectors(vectors):
    """Row vectors scaled to length 1 (all-zero rows stay zero), in float64."""
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def cosine_similarities(first, second):
    """`[len(first), len(second)]` cosine similarities of two sets of row vectors."""
    return unit_vectors(first) @ unit_vectors(second).T


def retrieval_scores(query_vectors, corpus_vectors, relevant):
    """MRR@10, recall@1, recall@10 and NDCG@10 of ranking the corpus by cosine similarity.

    `relevant[i]` is the set of corpus indices relevant to query `i` (queries
    without any are left out, as sentence-transformers does). Ties rank the
    lower corpus index first. Returns `{"mrr@10", "recall@1", "recall@10",
    "ndcg@10", "queries"}`.

    >>> scores = retrieval_scores([[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.1]],
    ...                           [{1}, {1}])
    >>> scores["mrr@10"], scores["recall@1"]
    (0.75, 0.5)
    """
    kept = [index for index, documents in enumerate(relevant) if documents]
    if not kept:
        raise ValueError("No query has a relevant corpus entry to retrieve")
    similarities = cosine_similarities(np.asarray(query_vectors)[kept], corpus_vectors)
    relevance = np.zeros(similarities.shape, dtype=np.int64)
    for row, index in enumerate(kept):
        relevance[row, sorted(relevant[index])] = 1
    order = np.argsort(-similarities, axis=1, kind="stable")
    hits = np.take_along_axis(relevance, order, axis=1)[:, :RETRIEVAL_CUTOFF]
    first_hit = np.where(hits.any(axis=1), hits.argmax(axis=1), -1)
    reciprocal_ranks = np.where(first_hit >= 0, 1.0 / np.maximum(first_hit + 1, 1), 0.0)
    relevant_counts = relevance.sum(axis=1)
    discounts = 1 / np.log2(np.arange(2, RETRIEVAL_CUTOFF + 2))
    ideal = np.cumsum(discounts)[np.minimum(relevant_counts, RETRIEVAL_CUTOFF) - 1]
    return {
        "mrr@10": float(reciprocal_ranks.mean()),
        "recall@1": float((hits[:, :1].sum(axis=1) / relevant_counts).mean()),
        "recall@10": float((hits.sum(axis=1) / relevant_counts).mean()),
        "ndcg@10": float(((hits * discounts[:hits.shape[1]]).sum(axis=1) / ideal).mean()),
        "queries": len(kept),
    }


def similarity_correlation(first_vectors, second_vectors, gold_scores):
    """Spearman correlation of the pairs' cosine similarities with their gold scores.

    >>> similarity_correlation([[1, 0], [1, 1], [0, 1]], [[1, 0], [1, 0], [1, 0]], [5, 3, 0])
    1.0
    """
    cosines = np.sum(unit_vectors(first_vectors) * unit_vectors(second_vectors), axis=1)
    return float(stats.spearmanr(cosines, gold_scores).statistic)
