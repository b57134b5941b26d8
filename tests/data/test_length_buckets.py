"""Length-bucketed task batches (`kerasbert.data.length_buckets`, `glue.examples_dataset`).

A tiny random model's logits on bucketed batches are compared with its logits on the same
examples padded to `max_seq_length`: padding is masked, so they must agree to float tolerance.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert.data import demo, glue, length_buckets
from kerasbert.training.finetune import FinetuneSettings
from kerasbert.training.finetuning_tasks import get_finetuning_task

MAX_SEQ_LENGTH = 64
TASK = "wordnet_gloss"


@pytest.fixture(scope="module")
def tokenizer():
    return kerasbert.zoo.build_tokenizer("bert_tiny_uncased", demo.vocabulary_dir("wordpiece"))


@pytest.fixture(scope="module")
def examples():
    """300 glosses, with a few long ones made longer so that several buckets are used."""
    read = list(glue.glue_examples(TASK, demo.classification_files()["dev"]))[:300]
    return [example if number % 25 else
            glue.GlueExample(example.index, " ".join([example.text_a] * 6), None, example.label,
                             example.line)
            for number, example in enumerate(read)]


@pytest.fixture(scope="module")
def model(tokenizer):
    keras.utils.set_random_seed(0)
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        vocab_size=tokenizer.vocabulary_size(), max_positions=MAX_SEQ_LENGTH, num_layers=2,
        hidden_size=32, num_heads=2, intermediate_size=64)
    labels = list(get_finetuning_task(TASK).labels([]))
    return kerasbert.models.build_task_model(config, "sequence_classification",
                                             num_labels=len(labels), id2label=labels)


def dataset(examples, tokenizer, **options):
    return glue.examples_dataset(TASK, examples, tokenizer, MAX_SEQ_LENGTH, **options)


def index_batches(batches):
    return [batch["example_index"].numpy().tolist() for batch in batches]


def test_bucket_lengths_and_choice():
    assert length_buckets.bucket_lengths(128) == (16, 32, 64, 128)
    assert length_buckets.bucket_lengths(512) == (16, 32, 64, 128, 256, 384, 512)
    assert length_buckets.bucket_lengths(200) == (16, 32, 64, 128, 200)
    assert length_buckets.bucket_lengths(16) == (16,)
    buckets = length_buckets.bucket_lengths(200)
    chosen = [int(length_buckets.bucket_of(length, buckets)) for length in
              (1, 16, 17, 32, 33, 128, 129, 200)]
    assert chosen == [16, 16, 32, 32, 64, 128, 200, 200]
    with pytest.raises(ValueError, match="max_seq_length"):
        length_buckets.bucket_lengths(0)


def test_each_batch_is_padded_to_the_smallest_bucket_of_its_longest_example(examples, tokenizer):
    buckets = length_buckets.bucket_lengths(MAX_SEQ_LENGTH)
    fixed = {int(index): (ids, mask) for batch in dataset(examples, tokenizer,
                                                           length_buckets=False)
             for index, ids, mask in zip(batch["example_index"].numpy(),
                                         batch["token_ids"].numpy(), batch["padding_mask"].numpy())}
    lengths_seen = set()
    for batch in dataset(examples, tokenizer, batch_size=4, shuffle=True, seed=1):
        mask = batch["padding_mask"].numpy()
        width = mask.shape[1]
        lengths_seen.add(width)
        assert width == min(b for b in buckets if b >= mask.sum(axis=1).max())
        for index, ids, row_mask in zip(batch["example_index"].numpy(),
                                        batch["token_ids"].numpy(), mask):
            fixed_ids, fixed_mask = fixed[int(index)]
            np.testing.assert_array_equal(ids, fixed_ids[:width])  # the same tokens
            np.testing.assert_array_equal(row_mask, fixed_mask[:width])
            assert not fixed_mask[width:].any()  # nothing but padding cut
    assert len(lengths_seen) >= 3, lengths_seen


@pytest.mark.slow
def test_logits_on_bucketed_batches_equal_the_fixed_padded_ones(examples, tokenizer, model):
    outputs = {}
    for buckets in (True, False):
        batches = dataset(examples, tokenizer, batch_size=32, length_buckets=buckets)
        logits = np.concatenate([model.predict_on_batch(batch)["logits"] for batch in batches])
        order = np.concatenate([batch["example_index"].numpy() for batch in batches])
        outputs[buckets] = length_buckets.in_example_order(logits, order)
    np.testing.assert_allclose(outputs[True], outputs[False], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_training_batches_are_random_deterministic_and_cover_every_example(examples, tokenizer):
    def passes(seed, epochs=3):
        return index_batches(dataset(examples, tokenizer, batch_size=8, shuffle=True, seed=seed,
                                     epochs=epochs))
    first = passes(seed=5)
    assert first == passes(seed=5)  # the same seed: the same batches
    assert first != passes(seed=6)
    per_pass = len(first) // 3
    assert per_pass == -(-len(examples) // 8)  # as many batches as without buckets
    for number in range(3):
        seen = sorted(sum(first[number * per_pass:(number + 1) * per_pass], []))
        assert seen == list(range(len(examples)))
    # Passes differ, and batch lengths within a pass are not in length order.
    assert first[:per_pass] != first[per_pass:2 * per_pass]
    widths = [batch["token_ids"].shape[1] for batch in
              dataset(examples, tokenizer, batch_size=8, shuffle=True, seed=5)]
    assert widths != sorted(widths) and widths != sorted(widths, reverse=True)
    # One pass's batch order is random too: repeated iteration of an epochs=1 dataset differs.
    once = dataset(examples, tokenizer, batch_size=8, shuffle=True, seed=5)
    assert index_batches(once) != index_batches(once)


@pytest.mark.parametrize("window_batches", [1, 2])
def test_drop_remainder_drops_a_short_last_window(window_batches):
    """30 examples in batches of 4: 7 whole batches a pass, the short last window (2 examples,
    or 6 with two-batch windows) makes at most one batch, never a partial one."""
    from kerasbert.data.passes import example_passes
    make_pass = length_buckets.length_grouped(np.arange(30) % 7, 4, shuffle=True, seed=3,
                                              drop_remainder=True, window_batches=window_batches)
    batches = index_batches_of(example_passes(30, make_pass, shuffle=True, seed=3, epochs=2))
    assert len(batches) == 14 and all(len(batch) == 4 for batch in batches)
    for number in range(2):
        seen = sum(batches[7 * number:7 * number + 7], [])
        assert len(set(seen)) == 28


def test_small_windows_group_by_length_within_the_pass_order():
    """With windows of 2 batches, batches 2k and 2k+1 hold window k of the pass's random order,
    sorted by length; the lengths here fall as the index rises."""
    from kerasbert.data.passes import example_passes
    lengths = np.arange(40)[::-1]
    make_pass = length_buckets.length_grouped(lengths, 4, shuffle=True, seed=0,
                                              window_batches=2)
    batches = index_batches_of(example_passes(40, make_pass, shuffle=True, seed=0, epochs=2))
    orders = index_batches_of(example_passes(40, lambda indices: indices.batch(40), shuffle=True,
                                             seed=0, epochs=2))
    assert len(batches) == 20
    for number, batch in enumerate(batches):
        pass_order, window = orders[number // 10], number % 10 // 2
        assert set(batch) <= set(pass_order[8 * window:8 * window + 8])
        assert [lengths[i] for i in batch] == sorted(lengths[i] for i in batch)
    assert orders[0] != sorted(orders[0])


def test_stratified_windows_keep_label_shares_and_group_lengths_within_each_label():
    """Label 0 long, label 1 short (a length that gives the label away): in windows of 4 batches
    of 12, every batch holds its window's label shares (to one example), batches do not overlap
    in length within a label, and the batches' padded widths add up to far less than ungrouped."""
    from kerasbert.data.passes import example_passes
    rng = np.random.default_rng(0)
    labels = np.array([0, 0, 1] * 32)
    lengths = np.where(labels == 0, rng.integers(20, 60, 96), rng.integers(1, 20, 96))

    def batches(window_batches, strata):
        make_pass = length_buckets.length_grouped(lengths, 12, strata=strata, shuffle=True,
                                                  seed=4, window_batches=window_batches)
        return index_batches_of(example_passes(96, make_pass, shuffle=True, seed=4, epochs=2))

    grouped = batches(4, labels)
    assert len(grouped) == 16
    assert sorted(sum(grouped[:8], [])) == list(range(96))
    for window in range(4):
        members = grouped[4 * window:4 * window + 4]
        share = np.mean(labels[sum(members, [])])
        assert all(abs(np.sum(labels[batch]) - 12 * share) <= 1 for batch in members)
        for label in (0, 1):
            spans = sorted((lengths[[i for i in batch if labels[i] == label]].min(),
                            lengths[[i for i in batch if labels[i] == label]].max())
                           for batch in members)
            assert all(low_max <= high_min for (_, low_max), (high_min, _) in
                       zip(spans, spans[1:])), spans

    def widths(found):
        return sum(lengths[batch].max() for batch in found)
    assert widths(grouped) < 0.9 * widths(batches(1, labels))
    assert grouped != batches(4, None)  # without strata, batches follow lengths alone
    assert grouped == batches(4, labels)


@pytest.mark.parametrize("strata,match", [([0.5] * 4, "integer ids"), ([0, 1], "one per example"),
                                          ([0, -1, 0, 0], "non-negative")])
def test_bad_strata_are_refused(strata, match):
    with pytest.raises(ValueError, match=match):
        length_buckets.length_grouped([1, 2, 3, 4], 2, strata=strata, shuffle=True)


def test_score_strata_are_quantile_bins():
    scores = np.random.default_rng(1).uniform(0, 5, 1000)
    strata = length_buckets.score_strata(scores)
    assert np.bincount(strata).tolist() == [200] * 5
    for low, high in zip(range(4), range(1, 5)):
        assert scores[strata == low].max() < scores[strata == high].min()


def test_regression_batches_mix_score_quintiles(tokenizer):
    """STS-B-like pairs whose score rises with length: grouped by length within score quintiles,
    every training batch of 8 still holds all five quintiles, and each pass every pair."""
    examples = [glue.GlueExample(str(number), " ".join(["file"] * (1 + number // 4)), "a list",
                                 f"{number / 16:.3f}", number + 2) for number in range(80)]
    batches = list(glue.examples_dataset("stsb", examples, tokenizer, MAX_SEQ_LENGTH,
                                         batch_size=8, shuffle=True, seed=1, epochs=2))
    assert len(batches) == 20
    for number in range(2):
        indices = sum(index_batches(batches[10 * number:10 * number + 10]), [])
        assert sorted(indices) == list(range(80))
    for batch in batches:
        assert sorted(set(length_buckets.score_strata(
            np.arange(80) / 16)[batch["example_index"].numpy()])) == [0, 1, 2, 3, 4]


def test_training_batches_are_narrower_than_consecutive_ones(examples, tokenizer):
    """Grouped by length within their labels, some training batches fit in a shorter bucket;
    consecutive batches of 32 all hold a gloss longer than 32 word pieces (measured: 544
    against 640 padded tokens per row, whatever the seed)."""
    def widths(**options):
        return sum(batch["token_ids"].shape[1] for batch in
                   dataset(examples, tokenizer, batch_size=32, **options))
    assert widths(shuffle=True, seed=2) < 0.9 * widths()


def index_batches_of(batches):
    return [batch.numpy().tolist() for batch in batches]


@pytest.mark.slow
def test_a_restored_iterator_resumes_exactly(examples, tokenizer, tmp_path):
    def make():
        return dataset(examples, tokenizer, batch_size=16, shuffle=True, seed=3, epochs=None)
    uninterrupted = iter(make())
    expected = [next(uninterrupted) for _ in range(45)]  # 19 batches a pass: into the third
    interrupted = iter(make())
    for _ in range(25):
        next(interrupted)
    prefix = tf.train.Checkpoint(iterator=interrupted).save(os.path.join(tmp_path, "ckpt"))
    restored = iter(make())
    tf.train.Checkpoint(iterator=restored).restore(prefix).assert_consumed()
    for batch in expected[25:]:
        got = next(restored)
        assert got.keys() == batch.keys()
        for name in batch:
            np.testing.assert_array_equal(got[name].numpy(), batch[name].numpy(), err_msg=name)


@pytest.mark.slow
def test_evaluation_and_predictions_are_in_the_examples_order(examples, tokenizer, model,
                                                              tmp_path):
    """The dev predictions file and metrics are the same with and without buckets, and the
    evaluation batches keep the examples' order (so `model.predict` rows do too)."""
    task = get_finetuning_task(TASK)
    labels = list(task.labels([]))
    assert sum(index_batches(dataset(examples, tokenizer)), []) == list(range(len(examples)))
    files, scores = {}, {}
    for buckets in (True, False):
        settings = FinetuneSettings(max_seq_length=MAX_SEQ_LENGTH, labels=labels,
                                    length_buckets=buckets)
        output_dir = tmp_path / str(buckets)
        output_dir.mkdir()
        scores[buckets] = task.evaluate(model, examples, tokenizer, settings, 32, str(output_dir),
                                        "wordnet_gloss-dev.tsv").metrics
        files[buckets] = (output_dir / "dev_predictions.tsv").read_text()
        task.predict(model, examples, tokenizer, settings, 32, str(output_dir),
                     "wordnet_gloss-test.tsv")
        files[buckets, "test"] = (output_dir / "test_predictions.tsv").read_text()
    assert files[True] == files[False] and files[True, "test"] == files[False, "test"]
    assert scores[True] == scores[False]
    predicted = np.argmax(model.predict(dataset(examples, tokenizer, length_buckets=False),
                                        verbose=0)["logits"], axis=1)
    lines = files[True].splitlines()[1:]
    assert [line.split("\t")[1] for line in lines] == [labels[i] for i in predicted]
    assert [line.split("\t")[0] for line in lines] == [example.index for example in examples]


def test_without_length_buckets_batches_are_fixed_and_in_order(examples, tokenizer):
    batches = dataset(examples, tokenizer, batch_size=32, length_buckets=False)
    assert {batch["token_ids"].shape[1] for batch in batches} == {MAX_SEQ_LENGTH}
    assert sum(index_batches(batches), []) == list(range(len(examples)))
    spec = dataset(examples, tokenizer, batch_size=32, drop_remainder=True, shuffle=True)
    assert spec.element_spec["token_ids"].shape.as_list() == [32, None]


@pytest.mark.parametrize("given,expected", [([], True), (["--no_length_buckets"], False)])
def test_the_finetune_flag_sets_the_run_and_its_record(monkeypatch, tmp_path, given, expected):
    """`kerasbert-finetune --no_length_buckets` turns buckets off, and the run record holds it
    (a restart must batch as the first start did)."""
    from kerasbert.cli import finetune as binary
    from kerasbert.training.run_record import recorded_flags

    runs = []
    monkeypatch.setattr("kerasbert.training.finetune.run_finetuning",
                        lambda run, **_: runs.append(run))
    argv = ["kerasbert-finetune", "--task=cola", f"--model_dir={tmp_path}",
            f"--data_dir={tmp_path}", *given]
    binary.FLAGS.unparse_flags()
    try:
        binary.FLAGS(argv)
        binary.main(["kerasbert-finetune"])
        record = recorded_flags(binary.FLAGS)
    finally:
        binary.FLAGS.unparse_flags()
    assert runs[0].settings.length_buckets is expected
    assert record["no_length_buckets"] is (not expected)
