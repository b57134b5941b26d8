"""A token classifier's `serve_entities(text)` finds the entities transformers'
`pipeline("token-classification", aggregation_strategy="first")` finds on the same weights and
tokenizer (same types and character offsets, `word == text[start:end]`, scores within 1e-4), for
BERT (WordPiece) and, with the pipeline's fallback word rule, RoBERTa (byte-level BPE) and ALBERT
(SentencePiece); it equals the Python decoder `reference_entities` (also on a truncated and an
empty text); `kerasbert.export.export` verifies it (in a fresh process that never imports kerasbert) and the
reloaded SavedModel gives the same entities, also through `kerasbert-predict`'s library call; and
`entity_checks` catches a differing entity."""

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

import kerasbert
from kerasbert.export.answer_settings import AnswerSettings
from kerasbert.export.entity_answers import (ENTITY_ANSWERS, entity_checks, entity_function,
                                             reference_entities)
from tests.export.artifacts import run_signature
from tests.export.test_text_signatures import save_tokenizer
from tests.helpers import hf_config, save_hf_model

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 48
TOLERANCE = 1e-4
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
# Accents, punctuation, words of several WordPieces, and an unknown character (the snowman).
TEXTS = ["Crème brûlée à Paris", "Jean-Pierre Dupont visited the Louvre, didn't he?",
         "Unbelievably, Zürich's snowman ☃ met Ångström in Montréal.",
         "The quick brown fox jumps over the lazy dog."]
LONG_TEXT = "Marie Curie worked in Paris and Warsaw with Pierre. " * 6  # > 48 tokens


def token_classifier(folder, family):
    """A tiny token classifier of `family` (HF and kerasbert), its pipeline and
    `serve_entities`."""
    folder.mkdir()
    hf_tokenizer = save_tokenizer(family, folder)
    positions = MAX_SEQ_LENGTH + (2 if family == "roberta" else 0)
    model = save_hf_model(f"{family.capitalize()}ForTokenClassification", hf_config(
        family, vocab_size=len(hf_tokenizer), max_position_embeddings=positions,
        num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
        label2id={label: index for index, label in enumerate(LABELS)}), folder)
    with torch.no_grad():  # a head whose argmax varies over the tokens: centred on them
        encoded = hf_tokenizer(TEXTS, return_tensors="pt", padding=True)
        hidden = getattr(model, family)(**encoded).last_hidden_state[
            encoded["attention_mask"].bool()]
        model.classifier.weight.mul_(20.0)
        model.classifier.bias.copy_(-(hidden @ model.classifier.weight.T).mean(0))
    model.save_pretrained(folder)
    pipeline = transformers.pipeline("token-classification", model=model, tokenizer=hf_tokenizer,
                                     aggregation_strategy="first", device=-1)
    keras_model = kerasbert.convert.from_hf(str(folder))
    tokenizer = kerasbert.tokenizers.from_hf(str(folder))
    settings = AnswerSettings(max_seq_length=MAX_SEQ_LENGTH)
    return {"folder": folder, "pipeline": pipeline, "hf_tokenizer": hf_tokenizer,
            "model": keras_model,
            "tokenizer": tokenizer, "settings": settings,
            "function": entity_function(keras_model, tokenizer, settings)}


@pytest.fixture(scope="module")
def ner(tmp_path_factory):
    return token_classifier(tmp_path_factory.mktemp("entities") / "hf", "bert")


def run(function, texts):
    return {name: value.numpy() for name, value in function(tf.constant(texts)).items()}


def unpadded(outputs):
    """Per text, `(entity, start, end, word, score)` of each entity of padded outputs."""
    rows = []
    for row in range(outputs["entity"].shape[0]):
        rows.append([(outputs["entity"][row, column].decode(), int(outputs["start"][row, column]),
                      int(outputs["end"][row, column]), outputs["word"][row, column].decode(),
                      float(outputs["score"][row, column]))
                     for column in range(outputs["entity"].shape[1])
                     if outputs["entity"][row, column] != b""])
    return rows


def assert_entities_equal(produced, expected, tolerance, where):
    """`produced` and `expected`: lists of `(entity, start, end, word, score)`."""
    assert [entity[:4] for entity in produced] == [entity[:4] for entity in expected], where
    difference = max([abs(a[4] - b[4]) for a, b in zip(produced, expected)], default=0.0)
    assert difference <= tolerance, f"{where}: scores differ by {difference}"


def pipeline_entities(pipeline, texts):
    """Per text, `(entity, start, end, text[start:end], score)` of the pipeline's entities (its
    `word` is detokenized, so the offsets are compared)."""
    return [[(entity["entity_group"], entity["start"], entity["end"],
              text[entity["start"]:entity["end"]], float(entity["score"]))
             for entity in entities]
            for text, entities in zip(texts, pipeline(texts))]


def assert_equal_to_the_pipeline(classifier):
    expected = pipeline_entities(classifier["pipeline"], TEXTS)
    found = [entity for entities in expected for entity in entities]
    assert len({entity[0] for entity in found}) >= 3, found  # entities of several types
    assert any(" " in entity[3] for entity in found), found  # entities of several words
    produced = unpadded(run(classifier["function"], TEXTS))
    for index, text in enumerate(TEXTS):
        assert_entities_equal(produced[index], expected[index], TOLERANCE, text)
        assert all(word == text[start:end] for _, start, end, word, _ in produced[index])
    return expected, produced


def test_serve_entities_equals_the_pipeline(ner):
    tokens = ner["hf_tokenizer"](TEXTS)["input_ids"]
    assert ner["hf_tokenizer"].unk_token_id in tokens[2]  # the snowman
    expected, _ = assert_equal_to_the_pipeline(ner)
    assert any("##" in token for entities in expected for entity in entities
               for token in ner["hf_tokenizer"].tokenize(entity[3])), expected  # a word of
    # several WordPieces is one word of an entity
    for index, text in enumerate(TEXTS):
        alone = unpadded(run(ner["function"], [text]))[0]
        assert_entities_equal(alone, expected[index], TOLERANCE, f"{text} (alone)")


@pytest.mark.parametrize("family", ["roberta", "albert"])
@pytest.mark.filterwarnings("ignore:Tokenizer does not support real words")
def test_byte_pair_and_sentence_piece_follow_the_pipelines_fallback_rule(family, tmp_path):
    """Byte-level BPE and SentencePiece have no word-aware rule in transformers: a token
    continues the previous one unless a space is just before or at its start."""
    assert_equal_to_the_pipeline(token_classifier(tmp_path / "hf", family))


def test_serve_entities_equals_the_python_decoder(ner):
    texts = [*TEXTS, LONG_TEXT, ""]
    outputs = run(ner["function"], texts)
    expected = reference_entities(ner["model"], ner["tokenizer"], ner["settings"], texts)
    checks = entity_checks(outputs, expected, 1e-5)
    assert [check["output"] for check in checks] == list(ENTITY_ANSWERS)
    assert all(check["passed"] for check in checks), checks
    assert expected[-1] == [] and expected[-2], expected[-2:]
    # The long text is cut at 46 tokens: no entity past the last kept token.
    ids, _, ends = ner["tokenizer"].tokenize_with_offsets(tf.constant([LONG_TEXT]))
    assert ids.row_lengths()[0] > MAX_SEQ_LENGTH
    assert max(entity["end"] for entity in expected[-2]) <= int(ends[0, MAX_SEQ_LENGTH - 3])
    padding = outputs["entity"] == b""
    assert padding[-1].all() and padding.any()
    assert (outputs["word"][padding] == b"").all() and (outputs["start"][padding] == -1).all()
    assert (outputs["end"][padding] == -1).all() and (outputs["score"][padding] == 0).all()
    assert outputs["start"].dtype == np.int32 and outputs["score"].dtype == np.float32


def test_the_export_verifies_serve_entities_and_kerasbert_predict_serves_it(ner, tmp_path):
    """`kerasbert.export.export` with text signatures adds `serve_entities` to the SavedModel and
    to `model_text.tflite`, both checked against the Python decoder; the SavedModel run in a
    process that never imports kerasbert gives the pipeline's entities, and `kerasbert-predict`
    (the library call, which runs and compares both files) returns them per text."""
    from kerasbert.export.predictions import predict

    report = kerasbert.export.export(ner["folder"], tmp_path / "out",
                                     formats=("saved_model", "tflite"),
                                     max_seq_length=MAX_SEQ_LENGTH, text_signatures=True)
    for artifact in ("saved_model", "model_text.tflite"):  # the phone's file answers too
        entry = report["artifacts"][artifact]
        checks = [check for check in entry["checks"] if check.get("signature") == "serve_entities"]
        assert {check["output"] for check in checks} == set(ENTITY_ANSWERS)
        assert all(check["passed"] for check in checks) and entry["verified"], (artifact, checks)
    outputs = run_signature(str(tmp_path / "out"), "serve_entities", {"text": TEXTS})
    for name in ("entity", "word"):  # as the in-process signature returns them
        outputs[name] = np.vectorize(str.encode, otypes=[object])(outputs[name])
    expected = pipeline_entities(ner["pipeline"], TEXTS)
    answers = predict(str(tmp_path / "out"), [{"text": text} for text in TEXTS])
    for index, (fresh, answer) in enumerate(zip(unpadded(outputs), answers)):
        assert_entities_equal(fresh, expected[index], TOLERANCE, f"serve_entities text {index}")
        listed = [(entity["entity"], entity["start"], entity["end"], entity["word"],
                   entity["score"]) for entity in answer["entities"]]
        assert_entities_equal(listed, expected[index], TOLERANCE, f"predict text {index}")
        assert answer["runtimes"] == ["tflite", "saved_model"]


def test_entity_checks_fail_when_an_entity_differs(ner):
    outputs = run(ner["function"], TEXTS)
    expected = reference_entities(ner["model"], ner["tokenizer"], ner["settings"], TEXTS)
    assert all(check["passed"] for check in entity_checks(outputs, expected, 1e-5))

    def failing(changed):
        return {check["output"] for check in entity_checks(outputs, changed, 1e-5)
                if not check["passed"]}

    other_type = [[dict(entity) for entity in entities] for entities in expected]
    other_type[1][0]["entity"] = "MISC"
    assert failing(other_type) == {"entity"}
    shifted = [[dict(entity) for entity in entities] for entities in expected]
    shifted[0][-1]["end"] += 1
    assert failing(shifted) == {"end"}
    missing = [entities[:-1] if index == 3 else entities for index, entities in enumerate(expected)]
    assert failing(missing) == set(ENTITY_ANSWERS)
    rescored = [[dict(entity) for entity in entities] for entities in expected]
    rescored[2][0]["score"] *= 0.5
    assert failing(rescored) == {"score"}


# CJK text: each ideograph is its own word (and, in this vocabulary, an unknown token), kana runs
# are words of their own, and Latin and CJK mix in one text.
CJK_TEXTS = ["東京の山田太郎は北京で李明に会った。", "Marie Curie は Paris と 華沙 で働いた。",
             "中文字符 and 日本語のテキスト, Zürich 東京."]


def test_serve_entities_equals_the_pipeline_on_cjk_text(ner):
    expected = pipeline_entities(ner["pipeline"], CJK_TEXTS)
    produced = unpadded(run(ner["function"], CJK_TEXTS))
    found = [entity for entities in expected for entity in entities]
    assert any(any(ord(character) > 0x2E80 for character in entity[3]) for entity in found), found
    for index, text in enumerate(CJK_TEXTS):
        assert_entities_equal(produced[index], expected[index], TOLERANCE, text)
        assert all(word == text[start:end] for _, start, end, word, _ in produced[index])
