"""Contrastive fine-tuning teaches the session's tiny BERT to retrieve: on the dev split of the
gloss inverse-cloze task (`tests/proofs/embeddings.py`), MRR@10 after fine-tuning beats the
same encoder's untrained mean pooling by `MARGIN` (measured over seeds on dev; BUILD.md)."""

import pytest

from tests.proofs import embeddings

pytestmark = pytest.mark.slow

SEED = 0


def test_contrastive_fine_tuning_raises_dev_mrr(demo_tokenizer, pretrained_tiny_bert_file):
    scores = embeddings.run(demo_tokenizer, pretrained_tiny_bert_file, SEED,
                            embeddings.LEARNING_RATE, "dev")
    assert scores["fine_tuned"] > scores["untrained"] + embeddings.MARGIN, scores
