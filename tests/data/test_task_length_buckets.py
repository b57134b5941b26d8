"""Length buckets in the SQuAD, SWAG and CoNLL datasets: each bucketed batch holds the examples
the fixed-padded batch holds (same seed, same order), cut on its last axis to the smallest
bucket that fits its longest sequence, and nothing but padding is cut."""

import numpy as np
import pytest

import kerasbert
from kerasbert.data import demo, glue, length_buckets
from kerasbert.data.conll import ConllSentence, conll_dataset
from kerasbert.data.squad import SquadAnswer, SquadExample
from kerasbert.data.squad_features import squad_dataset, squad_windows
from kerasbert.data.swag import SwagExample, swag_examples_dataset
from kerasbert.training.finetune import FinetuneSettings
from kerasbert.training.finetuning_tasks import get_finetuning_task

MAX_SEQ_LENGTH = 64
BATCH = 4  # small, so that some batches hold no long example
TOKEN_TENSORS = {"squad": ("token_ids", "segment_ids", "padding_mask"),
                 "swag": ("token_ids", "segment_ids", "padding_mask"),
                 "conll": ("token_ids", "segment_ids", "padding_mask", "labels", "word_index")}


@pytest.fixture(scope="module")
def tokenizer():
    return kerasbert.zoo.build_tokenizer("bert_tiny_uncased", demo.vocabulary_dir("wordpiece"))


@pytest.fixture(scope="module")
def texts():
    """120 glosses of the shipped set, every tenth repeated four times (several buckets)."""
    read = [example.text_a for example in
            glue.glue_examples("wordnet_gloss", demo.classification_files()["dev"])][:120]
    return [text if number % 10 else " ".join([text] * 4) for number, text in enumerate(read)]


def squad_features(texts, tokenizer):
    examples = [SquadExample(f"q{number}", "what is it?", text,
                             (SquadAnswer(text.split()[0], 0),))
                for number, text in enumerate(texts)]
    return squad_windows(examples, tokenizer, MAX_SEQ_LENGTH, doc_stride=32,
                         max_query_length=8, is_training=True)


def datasets(task, texts, tokenizer, length_buckets):
    """The shuffled training batches of `task`'s dataset built from `texts`, as numpy."""
    options = {"shuffle": True, "seed": 3, "length_buckets": length_buckets}
    if task == "squad":
        dataset = squad_dataset(squad_features(texts, tokenizer), BATCH, **options)
    elif task == "swag":
        examples = [SwagExample(str(number), text, "it", ("is.", "was.", "runs.", "sits."), None, 3)
                    for number, text in enumerate(texts)]
        dataset = swag_examples_dataset(examples, tokenizer, MAX_SEQ_LENGTH, BATCH, **options)
    else:
        sentences = [ConllSentence(tuple(text.split()), ("B-MISC",) + ("O",) * (
            len(text.split()) - 1), "-", 1) for text in texts]
        dataset = conll_dataset(sentences, tokenizer, ["O", "B-MISC", "I-MISC"], BATCH,
                                MAX_SEQ_LENGTH, **options)
    return [{name: value.numpy() for name, value in batch.items()} for batch in dataset]


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TOKEN_TENSORS))
def test_bucketed_batches_are_the_fixed_batches_cut_to_their_bucket(task, texts, tokenizer):
    fixed = datasets(task, texts, tokenizer, length_buckets=False)
    bucketed = datasets(task, texts, tokenizer, length_buckets=True)
    buckets = length_buckets.bucket_lengths(MAX_SEQ_LENGTH)
    assert len(fixed) == len(bucketed) > 1
    seen = set()
    for full, cut in zip(fixed, bucketed):
        assert sorted(full) == sorted(cut)
        longest = full["padding_mask"].sum(axis=-1).max()
        length = min(bucket for bucket in buckets if bucket >= longest)
        seen.add(length)
        assert not full["padding_mask"][..., length:].any()
        for name, value in full.items():
            expected = value[..., :length] if name in TOKEN_TENSORS[task] else value
            np.testing.assert_array_equal(cut[name], expected, err_msg=name)
    assert len(seen) >= 2, seen


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squad_v1", "conll2003"])
def test_per_token_tasks_bucket_training_batches_only(name, texts, tokenizer):
    """Their evaluation batches keep `max_seq_length`: `model.predict` concatenates per-token
    logits over batches, which needs one length."""
    task = get_finetuning_task(name)
    settings = FinetuneSettings(max_seq_length=MAX_SEQ_LENGTH, max_query_length=8, doc_stride=32,
                                labels=["O", "B-MISC", "I-MISC"])
    if name == "squad_v1":
        examples = [SquadExample(f"q{number}", "what is it?", text,
                                 (SquadAnswer(text.split()[0], 0),))
                    for number, text in enumerate(texts)]
    else:
        examples = [ConllSentence(tuple(text.split()), ("O",) * len(text.split()), "-", 1)
                    for text in texts]
    training = task.dataset(examples, tokenizer, settings, BATCH, training=True)
    evaluation = task.evaluation_inputs(examples, tokenizer, settings, BATCH).batches
    assert {batch["token_ids"].shape[-1] for batch in training} != {MAX_SEQ_LENGTH}
    assert {batch["token_ids"].shape[-1] for batch in evaluation} == {MAX_SEQ_LENGTH}
