"""`feature_extractor` and `extract_features` against `transformers`' `output_hidden_states` on
the same raw text, tokenized by each side's own tokenizer from one Hugging Face folder."""

import itertools
import json
import os
import re
import shutil

import keras
import numpy as np
import pytest
import torch
import transformers

import kerasbert
from kerasbert.data import demo
from kerasbert.layers import TransformerLayer
from kerasbert.models import extract_features, feature_extractor
from kerasbert.models.features import write_json_lines
from tests.helpers import (TINY_CONFIGS, demo_wordpiece_tokenizer, hf_config, save_hf_model,
                           save_modernbert_tokenizer)

TOLERANCE = 1e-5
MAX_SEQ_LENGTH = 16
LAYERS = (-1, 0, -2)
# ALBERT's SentencePiece model lists ( ) " - . as user-defined symbols, which transformers 5
# cuts out of raw text where SentencePiece does not (see SentencePieceTokenizer): none here.
TEXTS = [
    "The  quick brown fox jumps over the lazy dog!",
    ("Who wrote this module?", "Guido   wrote it, in Python"),
    "Unbelievable, isn't it",
    ("A first text that is long enough to be truncated", "and its pair, long as well"),
    "x",
]
FAMILIES = {  # family: (transformers class, demo vocabulary, its files)
    "bert": ("BertModel", "wordpiece", ("vocab.txt",)),
    "roberta": ("RobertaModel", "byte_pair", ("vocab.json", "merges.txt")),
    "albert": ("AlbertModel", "sentence_piece", ("spiece.model",)),
    "modernbert": ("ModernBertModel", None, None),  # its tokenizer.json: save_modernbert_tokenizer
}
# Every combination and word pooling on BERT, some of each on the others: (combine, word_pooling).
CASES = {
    "bert": [("concat", None), ("sum", None), ("mean", None), (None, None), ("concat", "first"),
             (None, "mean")],
    "roberta": [("concat", None), ("sum", "first")],
    "albert": [("mean", None), ("concat", "first")],
    "modernbert": [("concat", None), ("mean", "first")],
}


def save_family_folder(name, directory):
    """A Hugging Face folder of a random `name` model with the demo tokenizer of its family;
    returns transformers' model and tokenizer of it."""
    class_name, vocabulary, files = FAMILIES[name]
    if files is None:
        tokenizer = save_modernbert_tokenizer(directory)
    else:
        for file in files:
            shutil.copy(f"{demo.vocabulary_dir(vocabulary)}/{file}", directory)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(directory),
                                                               config=hf_config(name))
    model = save_hf_model(class_name, hf_config(name, vocab_size=len(tokenizer),
                                                pad_token_id=tokenizer.pad_token_id), directory)
    return model, tokenizer


def reference_record(item, reference, tokenizer):
    """transformers' tokens, hidden states `[layers + 1, seq, hidden]` and whitespace-word groups
    (see `word_groups`) for one text or pair, truncated to MAX_SEQ_LENGTH."""
    texts = (item,) if isinstance(item, str) else item
    # transformers 5's AlbertTokenizer leaves token_type_ids out unless asked.
    encoded = tokenizer(*texts, truncation=True, max_length=MAX_SEQ_LENGTH,
                        return_offsets_mapping=True, return_token_type_ids=True)
    names = ("input_ids", "attention_mask") + (
        () if reference.config.model_type == "modernbert" else ("token_type_ids",))
    inputs = {name: torch.tensor([encoded[name]]) for name in names}
    with torch.no_grad():
        outputs = reference(**inputs, output_hidden_states=True)
    hidden_states = np.stack([state[0].numpy() for state in outputs.hidden_states])
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    return tokens, hidden_states, word_groups(texts, encoded)


def word_groups(texts, encoded):
    """`((text number, word number, word), token positions)` of each whitespace word in order,
    from transformers' character offsets: a token joins the word of the first non-space
    character it spans."""
    groups = {}
    for position, (sequence, (start, end)) in enumerate(zip(encoded.sequence_ids(),
                                                            encoded["offset_mapping"])):
        if sequence is None:
            continue
        text = texts[sequence]
        solid = [i for i in range(start, end) if not text[i].isspace()]
        if solid:
            words = [match.span() for match in re.finditer(r"\S+", text)]
            word = next(w for w, (a, b) in enumerate(words) if a <= solid[0] < b)
            groups.setdefault((sequence, word, text[slice(*words[word])]), []).append(position)
    return list(groups.items())


def expected_features(hidden_states, combine):
    chosen = hidden_states[list(LAYERS)]  # [layers, seq, hidden]
    if combine == "concat":
        return np.concatenate(list(chosen), axis=-1)
    if combine == "sum":
        return chosen.sum(axis=0)
    if combine == "mean":
        return chosen.mean(axis=0)
    return chosen.transpose(1, 0, 2)


@pytest.mark.parametrize("family", CASES)
def test_matches_transformers_hidden_states(family, tmp_path):
    reference, reference_tokenizer = save_family_folder(family, tmp_path)
    references = [reference_record(item, reference, reference_tokenizer) for item in TEXTS]
    encoder = kerasbert.convert.from_hf(tmp_path)
    tokenizer = kerasbert.tokenizers.from_hf(tmp_path)
    for combine, word_pooling in CASES[family]:
        extractor = feature_extractor(encoder, layers=LAYERS, combine=combine,
                                      word_pooling=word_pooling)
        records = list(extract_features(TEXTS, tokenizer, extractor, batch_size=len(TEXTS),
                                        max_seq_length=MAX_SEQ_LENGTH))
        assert [record["index"] for record in records] == list(range(len(TEXTS)))
        for item, record, (tokens, hidden_states, groups) in zip(TEXTS, records, references,
                                                                 strict=True):
            case = f"combine={combine}, word_pooling={word_pooling}, {item!r}"
            expected = expected_features(hidden_states, combine)
            if word_pooling is None:
                assert record["tokens"] == tokens, case
            else:
                assert record["tokens"] == [word for (_, _, word), _ in groups], case
                expected = np.stack([expected[positions[0]] if word_pooling == "first"
                                     else expected[positions].mean(axis=0)
                                     for _, positions in groups])
            assert record["features"].shape == expected.shape, case
            np.testing.assert_allclose(record["features"], expected, atol=TOLERANCE, rtol=0,
                                       err_msg=case)
    # The long pair was truncated to fit.
    assert len(references[3][0]) == MAX_SEQ_LENGTH


def test_words_are_those_transformers_numbers_for_split_words():
    """Given the text split at whitespace, transformers' `word_ids` group the same tokens."""
    reference_tokenizer = transformers.BertTokenizerFast(
        f"{demo.vocabulary_dir('wordpiece')}/vocab.txt")
    text = TEXTS[0]
    encoded = reference_tokenizer(text, return_offsets_mapping=True)
    split = reference_tokenizer(text.split(), is_split_into_words=True)
    assert split["input_ids"] == encoded["input_ids"]
    by_word = {}
    for position, word in enumerate(split.word_ids()):
        if word is not None:
            by_word.setdefault(word, []).append(position)
    assert [positions for _, positions in word_groups((text,), encoded)] == list(by_word.values())


@pytest.fixture(scope="module")
def tiny():
    """A random 2-layer BERT (hidden 32) over the demo WordPiece vocabulary, and the tokenizer."""
    tokenizer = demo_wordpiece_tokenizer()
    keras.utils.set_random_seed(7)
    encoder = kerasbert.models.build_encoder(
        TINY_CONFIGS["bert"].replace(vocab_size=tokenizer.vocabulary_size()))
    return encoder, tokenizer


def test_batched_records_equal_one_at_a_time(tiny):
    """Padding to the longest text of a batch, and grouping its single texts and pairs apart,
    change nothing (words: the most involved path)."""
    encoder, tokenizer = tiny
    extractor = feature_extractor(encoder, layers=(-1, 1), combine=None, word_pooling="mean")
    one_at_a_time, batched = (
        list(extract_features(TEXTS, tokenizer, extractor, batch_size=size,
                              max_seq_length=MAX_SEQ_LENGTH)) for size in (1, 3))
    for single, record in zip(one_at_a_time, batched, strict=True):
        assert single["index"] == record["index"] and single["tokens"] == record["tokens"]
        np.testing.assert_allclose(record["features"], single["features"], atol=TOLERANCE,
                                   rtol=0)


def test_reads_its_input_one_batch_ahead(tiny):
    encoder, tokenizer = tiny
    extractor = feature_extractor(encoder, layers=(-1,))
    drawn = []

    def endless():  # an input that cannot be held whole
        for number in itertools.count():
            drawn.append(number)
            yield f"line {number}"

    records = extract_features(endless(), tokenizer, extractor, batch_size=4, max_seq_length=8)
    first = [next(records) for _ in range(4)]
    assert [record["index"] for record in first] == [0, 1, 2, 3] and len(drawn) == 4
    assert next(records)["tokens"] == ["[CLS]", "line", "4", "[SEP]"] and len(drawn) == 8


def _inputs(tokenizer):
    return {name: tensor.numpy() for name, tensor in tokenizer(
        ["a first text", "the second text of two"], ["with a pair", "and its pair"]).items()}


def test_shares_the_encoders_weights_and_stops_at_the_deepest_layer(tiny):
    encoder, tokenizer = tiny
    inputs = _inputs(tokenizer)
    last = feature_extractor(encoder, layers=(-1,))
    first = feature_extractor(encoder, layers=(1,), combine=None)
    assert {id(variable) for variable in last.weights} == {id(v) for v in encoder.weights
                                                           if "pooler" not in v.path}
    assert sum(isinstance(layer, TransformerLayer) for layer in first.layers) == 1
    copy = kerasbert.models.Encoder(encoder.config, output_hidden_states=True)
    for change in range(2):
        copy.set_weights(encoder.get_weights())
        outputs = copy(inputs)
        np.testing.assert_allclose(last(inputs)["features"], outputs["sequence_output"],
                                   atol=TOLERANCE, rtol=0)
        np.testing.assert_allclose(first(inputs)["features"][:, :, 0], outputs["hidden_states"][1],
                                   atol=TOLERANCE, rtol=0)
        if change == 0:  # new weights in the encoder show in both extractors
            before = last(inputs)["features"].numpy()
            rng = np.random.default_rng(0)
            for variable in encoder.transformer_layers[0].weights:
                variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    assert np.abs(last(inputs)["features"].numpy() - before).max() > 0.1


def test_saves_and_reloads(tiny, tmp_path):
    encoder, tokenizer = tiny
    inputs = _inputs(tokenizer)
    # Two tokens a word.
    positions = np.arange(inputs["token_ids"].shape[1])
    inputs["word_ids"] = np.where(inputs["padding_mask"] == 1, positions // 2, -1).astype("int32")
    extractor = feature_extractor(encoder, layers=(-1, 0), combine=None, word_pooling="mean")
    extractor.save(tmp_path / "extractor.keras")
    reloaded = keras.saving.load_model(tmp_path / "extractor.keras")
    np.testing.assert_allclose(reloaded(inputs)["features"], extractor(inputs)["features"],
                               atol=TOLERANCE, rtol=0)


def test_json_lines_appear_only_when_complete(tiny, tmp_path):
    encoder, tokenizer = tiny
    extractor = feature_extractor(encoder, layers=(-1, 0), combine=None)
    path = tmp_path / "features.jsonl"
    path.write_text("an earlier run's output\n")
    # Four positions hold a text's token and two special tokens, but no pair (three special
    # tokens and a token of each text): the second text fails after the first one's record was
    # written.
    records = extract_features(["one", ("two", "three")], tokenizer, extractor, batch_size=1,
                               max_seq_length=4)
    with pytest.raises(ValueError, match="max_length=4 leaves no room for text"):
        write_json_lines(records, path, layers=(-1, 0))
    assert path.read_text() == "an earlier run's output\n" and os.listdir(tmp_path) == [path.name]
    records = extract_features(["one", "two"], tokenizer, extractor, max_seq_length=4)
    assert write_json_lines(records, path, layers=(-1, 0), round_digits=3) == 2
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["linex_index"] for line in lines] == [0, 1]
    first = lines[0]["features"][1]
    assert first["token"] == "one" and [layer["index"] for layer in first["layers"]] == [-1, 0]
    assert all(len(layer["values"]) == 32 for layer in first["layers"])


def test_errors_name_what_is_wrong(tiny):
    encoder, tokenizer = tiny
    with pytest.raises(ValueError, match=r"layer index 3 is out of range: the encoder has 2 "
                                         r"transformer layers, so its hidden states are 0 "
                                         r"\(the embedding output\) to 2, or -3 to -1"):
        feature_extractor(encoder, layers=(-1, 3))
    with pytest.raises(ValueError, match="layer index -4 is out of range"):
        feature_extractor(encoder, layers=(-4,))
    with pytest.raises(ValueError, match="layers is empty"):
        feature_extractor(encoder, layers=())
    with pytest.raises(ValueError, match="layer index '1' is not an integer"):
        feature_extractor(encoder, layers=("1",))
    with pytest.raises(ValueError, match="combine must be one of"):
        feature_extractor(encoder, combine="max")
    with pytest.raises(ValueError, match="word pooling must be one of"):
        feature_extractor(encoder, word_pooling="last")
    with pytest.raises(TypeError, match="got str"):
        feature_extractor("encoder.keras")
    extractor = feature_extractor(encoder, layers=(-1,))
    with pytest.raises(ValueError, match=r"texts\[1\] is tuple"):
        list(extract_features(["fine", ("a", "b", "c")], tokenizer, extractor, max_seq_length=8))
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        next(extract_features(["fine"], tokenizer, extractor, batch_size=0))
    with pytest.raises(ValueError, match="no more than the 64 positions of the encoder, got 65"):
        next(extract_features(["fine"], tokenizer, extractor, max_seq_length=65))
