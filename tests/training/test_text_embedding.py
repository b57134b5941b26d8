"""Text embedding models train and are scored as sentence-transformers trains and scores them:
MultipleNegativesRankingLoss on the same vectors, the loss `fit` minimizes on padded, stacked
columns, retrieval and similarity scores equal to its evaluators; the model saves and rebuilds."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch
from sentence_transformers.sentence_transformer import evaluation, losses

import kerasbert
from kerasbert.models import TextEmbeddingModel, build_task_model
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from kerasbert.training import MultipleNegativesRankingLoss
from kerasbert.training.retrieval_metrics import retrieval_scores, similarity_correlation
from tests.helpers import TINY_CONFIGS, random_inputs, save_sentence_transformers_model

TOLERANCE = 1e-5


def _their_loss(columns, **settings):
    loss = losses.MultipleNegativesRankingLoss(None, **settings)
    return float(loss.compute_loss_from_embeddings([torch.tensor(c) for c in columns], None))


@pytest.mark.parametrize("columns,ours,theirs", [
    (2, {}, {}),
    (3, {}, {}),
    (4, {"scale": 7.5}, {"scale": 7.5}),
    (2, {"symmetric": True}, {"directions": ("query_to_doc", "doc_to_query"),
                              "partition_mode": "per_direction"}),
    (3, {"symmetric": True}, {"directions": ("query_to_doc", "doc_to_query"),
                              "partition_mode": "per_direction"}),
    (3, {"similarity": "dot", "scale": 1.0}, {"similarity_fct": lambda a, b: a @ b.T,
                                              "scale": 1.0}),
])
def test_loss_equals_sentence_transformers(columns, ours, theirs):
    rng = np.random.default_rng(columns)
    vectors = [rng.normal(size=(6, 16)).astype("float32") for _ in range(columns)]
    loss = MultipleNegativesRankingLoss(**ours)
    value = float(loss(np.arange(6), np.concatenate(vectors)))
    assert value == pytest.approx(_their_loss(vectors, **theirs), abs=TOLERANCE)
    assert MultipleNegativesRankingLoss.from_config(loss.get_config()).get_config() == \
        loss.get_config()


def _column(config, batch, seq, seed):
    return random_inputs(config, batch=batch, seq=seq, seed=seed)


def test_fit_minimizes_the_loss_of_the_stacked_columns():
    """A contrastive batch's columns (of different widths) are padded and embedded in one call;
    the loss `evaluate` reports is sentence-transformers' loss on each column embedded alone."""
    config = TINY_CONFIGS["bert"].replace(dropout=0.0, attention_dropout=0.0)
    model = build_task_model(config, "text_embedding", pooling="mean", normalize=True)
    batch = {"anchor": _column(config, 8, 6, 0), "positive": _column(config, 8, 11, 1),
             "negative": _column(config, 8, 9, 2)}
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    reported = model.evaluate(tf.data.Dataset.from_tensors(batch), verbose=0, return_dict=True)
    alone = [np.asarray(model(batch[name])["embedding"]) for name in
             ("anchor", "positive", "negative")]
    assert reported["loss"] == pytest.approx(_their_loss(alone), abs=TOLERANCE)

    model.fit(tf.data.Dataset.from_tensors(batch).repeat(30), verbose=0)
    final = model.evaluate(tf.data.Dataset.from_tensors(batch), verbose=0, return_dict=True)
    assert reported["loss"] > 1.0 and final["loss"] < 0.2 * reported["loss"]


def test_scores_equal_sentence_transformers_evaluators(tmp_path):
    folder, reference = save_sentence_transformers_model(tmp_path, "bert", "mean")
    model = kerasbert.convert.from_hf(folder)
    tokenizer = tokenizer_from_hf(folder)

    def embed(texts):
        return np.asarray(model(tokenizer(texts, max_length=model.max_seq_length,
                                          padding="longest"))["embedding"])

    rng = np.random.default_rng(0)
    words = [f"w{index}" for index in range(40)] + ["the", "a", "of", "gloss", "word"]
    corpus = [" ".join(rng.choice(words, size=rng.integers(2, 12))) for _ in range(60)]
    queries = [" ".join(rng.choice(words, size=rng.integers(1, 6))) for _ in range(25)]
    relevant = [set(rng.choice(60, size=rng.integers(1, 4), replace=False).tolist())
                for _ in queries]
    relevant[3] = set()  # a query without relevant documents is left out by both
    theirs = evaluation.InformationRetrievalEvaluator(
        {f"q{i}": text for i, text in enumerate(queries)},
        {f"d{i:03d}": text for i, text in enumerate(corpus)},
        {f"q{i}": {f"d{j:03d}" for j in documents} for i, documents in enumerate(relevant)},
        mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[1], precision_recall_at_k=[1, 10],
        map_at_k=[10], write_csv=False)(reference)
    ours = retrieval_scores(embed(queries), embed(corpus), relevant)
    assert ours["queries"] == 24
    for name, key in (("mrr@10", "cosine_mrr@10"), ("recall@1", "cosine_recall@1"),
                      ("recall@10", "cosine_recall@10"), ("ndcg@10", "cosine_ndcg@10")):
        assert ours[name] == pytest.approx(theirs[key], abs=1e-9), name

    gold = rng.uniform(0, 5, size=30)
    first, second = corpus[:30], corpus[30:]
    their_spearman = evaluation.EmbeddingSimilarityEvaluator(
        first, second, gold.tolist(), write_csv=False)(reference)["spearman_cosine"]
    assert similarity_correlation(embed(first), embed(second), gold) == pytest.approx(
        their_spearman, abs=1e-8)


def test_build_task_model_and_config_round_trip(tmp_path):
    encoder = kerasbert.models.build_encoder(TINY_CONFIGS["roberta"])
    assert encoder.config.use_pooler
    model = build_task_model(encoder, "text_embedding", pooling=["cls", "max"],
                             dense_layers=[{"units": 8, "activation": "gelu"}], normalize=True,
                             similarity="dot", prompts={"query": "query: "}, max_seq_length=20)
    assert isinstance(model, TextEmbeddingModel) and not model.encoder.config.use_pooler
    assert model.embedding_size == 8
    config = model.get_config()
    rebuilt = TextEmbeddingModel.from_config(config)
    assert rebuilt.get_config() == config
    inputs = random_inputs(TINY_CONFIGS["roberta"], batch=2, seq=7)
    path = tmp_path / "embedding.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(inputs)["embedding"], model(inputs)["embedding"], atol=1e-6)
    with pytest.raises(ValueError, match=r"no labels or head dropout; got \['num_labels'\]"):
        build_task_model(encoder, "text_embedding", num_labels=3)
    with pytest.raises(ValueError, match="pooling must be one or more of"):
        build_task_model(encoder, "text_embedding", pooling="median")
