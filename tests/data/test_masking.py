"""MaskedLmMasker on real text: budget, 80/10/10 split, whole words, n-gram spans, graph and tf.data."""

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data import demo
from kerasbert.data.masking import MaskedLmMasker, ngram_span_starts, word_start_flags
from kerasbert.tokenizers import BytePairTokenizer, SentencePieceTokenizer, WordPieceTokenizer, from_hf
from kerasbert.tokenizers.text_files import iterate_lines

# 128 * 0.15 rounds to 19: full rows are capped at MAX_PREDICTIONS.
SEQ_LENGTH, ROWS, MAX_PREDICTIONS = 128, 256, 18
SIGMAS = 5


@pytest.fixture(scope="module")
def tokenizer():
    return from_hf(demo.vocabulary_dir("wordpiece"))


@pytest.fixture(scope="module")
def batch(tokenizer):
    """ROWS packed `[CLS] A [SEP] B [SEP]` rows of corpus sentences, from short (padded) to full,
    then a row of padding only and a row of special tokens only."""
    lines = list(itertools.islice(iterate_lines(demo.pretraining_corpus_files()), 5 * ROWS))
    first = [lines[5 * i] for i in range(ROWS - 2)]
    second = [" ".join(lines[5 * i + 1:5 * i + 2 + i % 4]) for i in range(ROWS - 2)]
    packed = {name: value.numpy() for name, value in
              tokenizer(first, second, max_length=SEQ_LENGTH).items()}
    padding_row = np.zeros(SEQ_LENGTH, np.int32)
    specials_row = padding_row.copy()
    specials_row[:2] = [tokenizer.cls_token_id, tokenizer.sep_token_id]
    packed["token_ids"] = np.concatenate([packed["token_ids"], [padding_row, specials_row]])
    packed["segment_ids"] = np.concatenate([packed["segment_ids"], [padding_row, padding_row]])
    packed["padding_mask"] = np.concatenate([packed["padding_mask"], [padding_row, specials_row > 0]])
    packed = {name: value.astype(np.int32) for name, value in packed.items()}
    packed["next_sentence_labels"] = np.arange(ROWS, dtype=np.int32) % 2
    return packed


def expected_budget(row_ids, row_mask, special_ids, masked_lm_prob=0.15,
                    max_predictions=MAX_PREDICTIONS):
    """Google's create_pretraining_data rule, capped by the number of candidates."""
    real = int(row_mask.sum())
    candidates = int(((row_mask == 1) & ~np.isin(row_ids, special_ids)).sum())
    return min(max_predictions, max(1, int(round(real * masked_lm_prob))), candidates)


def word_units(row_ids, row_mask, special_ids, starts_table):
    """(start, end) token ranges of the whole words of one row."""
    candidate = (row_mask == 1) & ~np.isin(row_ids, special_ids)
    units = []
    for position in np.flatnonzero(candidate):
        if position == 0 or not candidate[position - 1] or starts_table[row_ids[position]]:
            units.append([position, position + 1])
        else:
            units[-1][1] = position + 1
    return units


def units_from_starts(starts, candidate):
    """(start, end) ranges of units that begin at `starts` and run over candidate tokens."""
    units = []
    for position in np.flatnonzero(candidate):
        if starts[position]:
            units.append([position, position + 1])
        else:
            assert units and units[-1][1] == position, f"unit without a start at {position}"
            units[-1][1] = position + 1
    return units


def check_outputs(features, outputs, special_ids):
    """The invariants every masking mode keeps; returns the chosen-position mask [rows, seq]."""
    ids, mask = features["token_ids"], features["padding_mask"]
    masked = outputs["token_ids"].numpy()
    positions = outputs["masked_lm_positions"].numpy()
    labels = outputs["masked_lm_ids"].numpy()
    weights = outputs["masked_lm_weights"].numpy()
    assert masked.dtype == positions.dtype == labels.dtype == np.int32
    assert weights.dtype == np.float32
    assert positions.shape == labels.shape == weights.shape == (ids.shape[0], MAX_PREDICTIONS)
    for name in ("segment_ids", "padding_mask", "next_sentence_labels"):
        np.testing.assert_array_equal(outputs[name], features[name])
    chosen = np.zeros(ids.shape, bool)
    for row in range(ids.shape[0]):
        count = int(weights[row].sum())
        assert set(np.unique(weights[row])) <= {0.0, 1.0}
        assert (weights[row, :count] == 1).all() and (weights[row, count:] == 0).all()
        assert (positions[row, count:] == 0).all() and (labels[row, count:] == 0).all()
        real_positions = positions[row, :count]
        assert (np.diff(real_positions) > 0).all(), "positions must ascend"
        assert (mask[row, real_positions] == 1).all(), "padding masked"
        assert not np.isin(ids[row, real_positions], special_ids).any(), "special token masked"
        np.testing.assert_array_equal(labels[row, :count], ids[row, real_positions])
        chosen[row, real_positions] = True
    np.testing.assert_array_equal(masked[~chosen], ids[~chosen])
    return chosen


def check_greedy_budget(units, chosen_row, budget):
    """Google's rule: units taken whole; no unit left over would have fit in the unused budget."""
    taken = [chosen_row[start:end].all() for start, end in units]
    for start, end in units:
        assert chosen_row[start:end].all() or not chosen_row[start:end].any(), "partial unit"
    count = int(chosen_row.sum())
    assert count <= budget
    left_over = [end - start for (start, end), is_taken in zip(units, taken) if not is_taken]
    assert all(size > budget - count for size in left_over), (budget, count, left_over)
    return taken


def test_token_masking_budget_positions_and_labels(tokenizer, batch):
    masker = MaskedLmMasker.for_tokenizer(tokenizer, max_predictions_per_seq=MAX_PREDICTIONS)
    specials = tokenizer.special_token_ids
    budgets = [expected_budget(ids, mask, specials)
               for ids, mask in zip(batch["token_ids"], batch["padding_mask"])]
    assert budgets[-2:] == [0, 0] and min(budgets[:-2]) < 10
    assert sum(round(mask.sum() * 0.15) > MAX_PREDICTIONS for mask in batch["padding_mask"]) > 10
    for seed in range(3):
        outputs = masker(batch, tf.constant([seed, 11]))
        chosen = check_outputs(batch, outputs, specials)
        np.testing.assert_array_equal(chosen.sum(axis=1), budgets)


def test_budget_rounds_as_python_round():
    """Rows of 1..200 real tokens: exactly min(P, max(1, round(n * prob))) predictions
    (products such as 190 * 0.15 and 45 * 0.7 round the other way in float32)."""
    lengths = np.arange(1, 201)
    ids = np.where(np.arange(200) < lengths[:, None], 7, 0).astype(np.int32)
    features = {"token_ids": ids, "padding_mask": (ids > 0).astype(np.int32)}
    for prob in (0.15, 0.7, 0.1):
        masker = MaskedLmMasker(10, 1, [0, 1], masked_lm_prob=prob, max_predictions_per_seq=150)
        weights = masker(features, tf.constant([0, 0]))["masked_lm_weights"].numpy()
        expected = [min(150, max(1, round(n * prob))) for n in lengths]
        np.testing.assert_array_equal(weights.sum(axis=1), expected)


def test_replacements_split_80_10_10(tokenizer, batch):
    masker = MaskedLmMasker.for_tokenizer(tokenizer, max_predictions_per_seq=MAX_PREDICTIONS)
    specials = tokenizer.special_token_ids
    non_special = np.setdiff1d(np.arange(len(tokenizer.vocabulary)), specials)
    originals, replacements = [], []
    for seed in range(20):
        outputs = masker(batch, tf.constant([seed, 3]))
        real = outputs["masked_lm_weights"].numpy() > 0
        positions = outputs["masked_lm_positions"].numpy()
        originals.append(outputs["masked_lm_ids"].numpy()[real])
        replacements.append(np.take_along_axis(outputs["token_ids"].numpy(), positions, 1)[real])
    originals, replacements = np.concatenate(originals), np.concatenate(replacements)
    total = len(originals)
    assert total > 60_000
    is_mask = replacements == tokenizer.mask_token_id
    is_kept = replacements == originals
    is_random = ~is_mask & ~is_kept
    # A random token equals the original with probability 1 / len(non_special).
    chance = 1 / len(non_special)
    for observed, expected in ((is_mask, 0.8), (is_random, 0.1 * (1 - chance)),
                               (is_kept, 0.1 + 0.1 * chance)):
        tolerance = SIGMAS * math.sqrt(expected * (1 - expected) / total)
        assert abs(observed.mean() - expected) < tolerance, (observed.mean(), expected)
    random_ids = replacements[is_random]
    assert not np.isin(random_ids, specials).any()
    # Uniform over the non-special ids: their mean, and as many distinct ids as uniform draws give.
    spread = non_special.std() / math.sqrt(len(random_ids))
    assert abs(random_ids.mean() - non_special.mean()) < SIGMAS * spread
    expected_distinct = len(non_special) * (1 - math.exp(-len(random_ids) / len(non_special)))
    assert len(np.unique(random_ids)) > 0.95 * expected_distinct


def test_random_tokens_uniform_over_non_special_ids():
    vocabulary_size, specials = 12, [0, 1, 2, 3]
    masker = MaskedLmMasker(vocabulary_size, 3, specials, masked_lm_prob=1.0,
                            max_predictions_per_seq=64, mask_token_rate=0.0, random_token_rate=1.0)
    ids = np.full((200, 64), 5, np.int32)
    ids[:, 0] = 2
    outputs = masker({"token_ids": ids, "padding_mask": np.ones_like(ids)}, tf.constant([5, 5]))
    drawn = outputs["token_ids"].numpy()[:, 1:].ravel()
    counts = np.bincount(drawn, minlength=vocabulary_size)
    assert counts[specials].sum() == 0 and (outputs["token_ids"].numpy()[:, 0] == 2).all()
    expected = len(drawn) / (vocabulary_size - len(specials))
    tolerance = SIGMAS * math.sqrt(expected)
    assert np.abs(counts[4:] - expected).max() < tolerance, counts


def test_whole_word_masking_takes_whole_words(tokenizer, batch):
    masker = MaskedLmMasker.for_tokenizer(tokenizer, max_predictions_per_seq=MAX_PREDICTIONS,
                                          whole_word=True)
    specials, starts = tokenizer.special_token_ids, word_start_flags(tokenizer)
    multi_token_words_taken = 0
    for seed in range(3):
        outputs = masker(batch, tf.constant([seed, 5]))
        chosen = check_outputs(batch, outputs, specials)
        for row, (ids, mask) in enumerate(zip(batch["token_ids"], batch["padding_mask"])):
            units = word_units(ids, mask, specials, starts)
            taken = check_greedy_budget(units, chosen[row], expected_budget(ids, mask, specials))
            multi_token_words_taken += sum(is_taken and end - start > 1
                                           for (start, end), is_taken in zip(units, taken))
    assert multi_token_words_taken > 100


def test_ngram_masking_takes_complete_spans(tokenizer, batch):
    masker = MaskedLmMasker.for_tokenizer(tokenizer, max_predictions_per_seq=MAX_PREDICTIONS,
                                          max_ngram=3)
    specials, starts = tokenizer.special_token_ids, word_start_flags(tokenizer)
    span_words = []
    for seed in range(3):
        seed = tf.constant([seed, 9])
        outputs = masker(batch, seed)
        unit_starts = masker.unit_starts(batch, seed).numpy()
        chosen = check_outputs(batch, outputs, specials)
        for row, (ids, mask) in enumerate(zip(batch["token_ids"], batch["padding_mask"])):
            words = word_units(ids, mask, specials, starts)
            word_starts = np.zeros(SEQ_LENGTH, bool)
            word_starts[[start for start, _ in words]] = True
            candidate = (mask == 1) & ~np.isin(ids, specials)
            assert not (unit_starts[row] & ~word_starts).any(), "span starting inside a word"
            spans = units_from_starts(unit_starts[row], candidate)
            span_words.extend(int(word_starts[start:end].sum()) for start, end in spans)
            check_greedy_budget(spans, chosen[row], expected_budget(ids, mask, specials))
    counts = np.bincount(span_words, minlength=4)
    assert counts[0] == 0 and len(counts) == 4, counts
    # Spans cut short at segment ends shift weight to 1 word; each length is still common.
    assert 0.45 < counts[1] / counts.sum() < 0.7 and counts[2] > 0.15 * counts.sum() \
        and counts[3] > 0.08 * counts.sum(), counts


@pytest.mark.parametrize("max_ngram, expected", [(1, [1.0]), (2, [2 / 3, 1 / 3]),
                                                 (3, [6 / 11, 3 / 11, 2 / 11])])
def test_ngram_span_lengths_are_proportional_to_one_over_n(max_ngram, expected):
    starts = ngram_span_starts(300, 400, max_ngram, tf.constant([3, 1])).numpy()
    assert starts[:, 0].all()
    lengths = []
    for row in starts:
        lengths.extend(np.diff(np.flatnonzero(row)))     # the last, truncated span left out
    counts = np.bincount(lengths, minlength=max_ngram + 1)
    assert counts[0] == 0 and len(counts) == max_ngram + 1, counts
    total = counts.sum()
    assert total > 60_000
    for length, probability in enumerate(expected, start=1):
        tolerance = SIGMAS * math.sqrt(probability * (1 - probability) / total)
        assert abs(counts[length] / total - probability) < max(tolerance, 1e-9), (length, counts)


def test_same_seed_same_masks_other_seed_other_masks(tokenizer, batch):
    masker = MaskedLmMasker.for_tokenizer(tokenizer, max_ngram=3)
    first = masker(batch, tf.constant([1, 2]))
    again = masker(batch, tf.constant([1, 2]))
    other = masker(batch, tf.constant([1, 3]))
    for name in ("token_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        np.testing.assert_array_equal(first[name], again[name])
    differs = first["masked_lm_positions"].numpy() != other["masked_lm_positions"].numpy()
    assert differs.any(axis=1).mean() > 0.9


@pytest.mark.slow
@pytest.mark.parametrize("options", [{}, {"whole_word": True}, {"max_ngram": 3}])
def test_same_in_tf_function_and_tf_data(tokenizer, batch, options):
    masker = MaskedLmMasker.for_tokenizer(tokenizer, **options)
    small = {name: value[:8] for name, value in batch.items()}
    seeds = [tf.constant([7, index], tf.int64) for index in range(2)]
    eager = [masker(small, seed) for seed in seeds]
    graph = tf.function(lambda features, seed: masker(features, seed))
    dataset = (tf.data.Dataset.from_tensors(small).repeat(2).enumerate()
               .map(lambda index, features: masker(features, tf.stack([tf.constant(7, tf.int64),
                                                                        index]))))
    for expected, in_graph, in_data in zip(eager, [graph(small, seed) for seed in seeds], dataset):
        for name, value in expected.items():
            np.testing.assert_array_equal(in_graph[name], value)
            np.testing.assert_array_equal(in_data[name], value)
    # Re-masked each time an element is read (dynamic masking).
    assert (eager[0]["masked_lm_positions"].numpy() != eager[1]["masked_lm_positions"].numpy()).any()


def test_unbatched_instances_and_per_element_seeds_in_tf_data(tokenizer, batch):
    masker = MaskedLmMasker.for_tokenizer(tokenizer, max_predictions_per_seq=MAX_PREDICTIONS,
                                          whole_word=True)
    rows = {name: value[:4] for name, value in batch.items()}
    seeds = tf.data.Dataset.random(seed=3).batch(2)
    dataset = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(rows), seeds))
    for row, (masked, seed) in enumerate(zip(dataset.map(masker), seeds)):
        assert masked["masked_lm_positions"].shape == (MAX_PREDICTIONS,)
        assert masked["token_ids"].shape == (SEQ_LENGTH,)
        one_row = masker({name: value[row:row + 1] for name, value in rows.items()}, seed)
        for name, value in one_row.items():
            np.testing.assert_array_equal(masked[name], value[0])


def test_word_start_flags_of_each_tokenizer_kind(tokenizer):
    flags = word_start_flags(tokenizer)
    assert len(flags) == len(tokenizer.vocabulary)
    assert all(flags[i] for i in tokenizer.special_token_ids)
    assert flags[tokenizer.token_to_id("the")] and not flags[tokenizer.vocabulary.index(
        next(token for token in tokenizer.vocabulary if token.startswith("##")))]
    for kind, tokenizer_class, word_start in (("sentence_piece", SentencePieceTokenizer, "▁the"),
                                              ("byte_pair", BytePairTokenizer, "Ġthe")):
        other = from_hf(demo.vocabulary_dir(kind))
        assert isinstance(other, tokenizer_class)
        flags = word_start_flags(other)
        assert all(flags[i] for i in other.special_token_ids)
        assert flags[other.token_to_id(word_start)] and not flags[other.token_to_id("the")]
        prefix = word_start[0]
        ordinary = [i for i in range(len(flags)) if i not in other.special_token_ids]
        assert all(flags[i] == other.vocabulary[i].startswith(prefix) for i in ordinary)
    with pytest.raises(TypeError, match="tokenizer"):
        word_start_flags(object())


def test_segment_start_is_a_word_start():
    """A continuation token first in a segment starts a word; with whole words it is masked alone."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "qu", "##ick"]
    masker = MaskedLmMasker.for_tokenizer(WordPieceTokenizer(vocab), masked_lm_prob=1.0,
                                          whole_word=True, max_predictions_per_seq=4)
    features = {"token_ids": [2, 6, 3, 5, 6, 3], "padding_mask": [1] * 6}
    starts = MaskedLmMasker.for_tokenizer(WordPieceTokenizer(vocab), max_ngram=2).unit_starts(
        features, [0, 0]).numpy().tolist()
    assert starts[:3] == [False, True, False] and starts[4] is False
    # Budget min(4, 6, candidates=3) = 3: both words fit, so all three tokens are taken.
    assert masker(features, [0, 0])["masked_lm_positions"].numpy().tolist() == [1, 3, 4, 0]


def test_bad_arguments_name_the_argument(tokenizer):
    vocabulary_size, specials = len(tokenizer.vocabulary), tokenizer.special_token_ids
    for options, name in (({"masked_lm_prob": 0.0}, "masked_lm_prob"),
                          ({"masked_lm_prob": 1.5}, "masked_lm_prob"),
                          ({"max_predictions_per_seq": 0}, "max_predictions_per_seq"),
                          ({"mask_token_rate": 0.8, "random_token_rate": 0.3}, "random_token_rate"),
                          ({"mask_token_rate": -0.1}, "mask_token_rate"),
                          ({"word_starts": [True] * 5}, "word_starts"),
                          ({"whole_word": True}, "word_starts"),
                          ({"max_ngram": 3}, "word_starts"),
                          ({"max_ngram": 0}, "max_ngram")):
        with pytest.raises(ValueError, match=name):
            MaskedLmMasker(vocabulary_size, tokenizer.mask_token_id, specials, **options)
    with pytest.raises(ValueError, match="mask_token_id"):
        MaskedLmMasker(vocabulary_size, vocabulary_size, specials)
    with pytest.raises(ValueError, match="special_token_ids"):
        MaskedLmMasker(vocabulary_size, 4, [0, -1])
    masker = MaskedLmMasker(vocabulary_size, tokenizer.mask_token_id, specials)
    with pytest.raises(KeyError, match="token_ids"):
        masker({"input_ids": [[5]], "padding_mask": [[1]]}, [0, 0])
    with pytest.raises(KeyError, match="padding_mask"):
        masker({"token_ids": [[5]]}, [0, 0])
    with pytest.raises(ValueError, match="padding_mask"):
        masker({"token_ids": [[5, 6]], "padding_mask": [[1, 1, 1]]}, [0, 0])
    with pytest.raises(ValueError, match="seed"):
        masker({"token_ids": [[5]], "padding_mask": [[1]]}, [0, 0, 0])
