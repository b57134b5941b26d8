"""A classifier's raw-text signatures answer with labels: `label`, `label_id` and
`probabilities` (regression: `score`) from the SavedModel's `serve_text`, `serve_text_pair`,
`serve_examples` and `model_text.tflite`, loaded by their own runtimes (the exporter has run them
in a fresh process that never imports kerasbert), equal
transformers' `pipeline("text-classification", top_k=None)` on the same weights and tokenizer:
the same labels, probabilities within 1e-4. An export whose graph answers other than the Python
decoder says is refused."""

import numpy as np
import pytest
import torch
import transformers

import kerasbert
from kerasbert.data import demo
from kerasbert.export.errors import ExportError
from tests.export.artifacts import run_text_signatures
from tests.export.test_text_signatures import examples, save_tokenizer
from tests.helpers import hf_config, save_hf_model

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 48
TOLERANCE = 1e-4
LABELS = ["negative", "neutral", "positive"]
TEXTS = ["A fine film, and a long one.", "Dull.", "The quick brown fox jumps over the lazy dog. " * 6,
         "Crème brûlée, señor! Über façade; déjà vu.", "It was not bad at all"]
PAIRS = (["Is it raining?", "Who wrote it?", "Short."],
         ["The streets are wet and the sky is grey.", "Nobody knows.", "A much longer second text " * 5])


def hf_folder(directory, family, model_class, **config):
    directory.mkdir()
    tokenizer = save_tokenizer(family, directory)
    positions = MAX_SEQ_LENGTH + (2 if family == "roberta" else 0)
    model = save_hf_model(model_class, hf_config(
        family, vocab_size=len(tokenizer), max_position_embeddings=positions, **config), directory)
    if family == "bert":  # a head that tells the texts apart: centred on their pooled outputs
        with torch.no_grad():
            encoded = tokenizer(TEXTS, return_tensors="pt", padding=True, truncation=True,
                                max_length=MAX_SEQ_LENGTH)
            pooled = model.bert(**encoded).pooler_output
            model.classifier.weight.mul_(20.0)
            model.classifier.bias.copy_(-(pooled @ model.classifier.weight.T).mean(0))
        model.save_pretrained(directory)
    return model, tokenizer


@pytest.fixture(scope="module")
def bert_classifier(tmp_path_factory):
    """A BERT classifier with named labels, its pipeline, and its export's text outputs."""
    root = tmp_path_factory.mktemp("answers")
    model, tokenizer = hf_folder(root / "hf", "bert", "BertForSequenceClassification",
                                 num_labels=3, id2label=dict(enumerate(LABELS)),
                                 label2id={label: index for index, label in enumerate(LABELS)})
    report = kerasbert.export.export(root / "hf", root / "out", formats=("saved_model", "tflite"),
                                     max_seq_length=MAX_SEQ_LENGTH, text_signatures=True)
    single_and_pair = [None, PAIRS[1][1], None]
    outputs = run_text_signatures(str(root / "out"), TEXTS, [list(p) for p in PAIRS],
                                  examples(PAIRS[0], single_and_pair),
                                  text_tflite_texts=TEXTS)
    pipeline = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer,
                                     top_k=None, device=-1)
    return report, outputs, pipeline, single_and_pair


def pipeline_answers(pipeline, inputs, **options):
    rows = pipeline(inputs, truncation=True, max_length=MAX_SEQ_LENGTH, **options)
    return [row[0]["label"] for row in rows], np.array(
        [[{entry["label"]: entry["score"] for entry in row}[label] for label in LABELS]
         for row in rows])


def assert_answers_equal(produced, expected_labels, expected_probabilities, where):
    assert list(produced["label"]) == expected_labels, where
    assert [LABELS[int(index)] for index in produced["label_id"]] == expected_labels, where
    difference = np.abs(produced["probabilities"] - expected_probabilities).max()
    assert difference <= TOLERANCE, f"{where}: probabilities differ by {difference}"


def test_every_text_signature_answers_as_the_pipeline(bert_classifier):
    report, outputs, pipeline, single_and_pair = bert_classifier
    labels, probabilities = pipeline_answers(pipeline, TEXTS)
    assert len(set(labels)) > 1, labels  # the texts do not all get one label
    assert_answers_equal(outputs["serve_text"], labels, probabilities, "serve_text")
    assert_answers_equal(outputs["model_text.tflite"], labels, probabilities, "model_text.tflite")
    for index, alone in enumerate(outputs["serve_text alone"]):
        assert_answers_equal(alone, labels[index:index + 1], probabilities[index:index + 1],
                             f"serve_text alone {index}")
    pair_inputs = [{"text": a, "text_pair": b} for a, b in zip(*PAIRS)]
    labels, probabilities = pipeline_answers(pipeline, pair_inputs)
    assert_answers_equal(outputs["serve_text_pair"], labels, probabilities, "serve_text_pair")
    mixed = [text if pair is None else {"text": text, "text_pair": pair}
             for text, pair in zip(PAIRS[0], single_and_pair)]
    labels, probabilities = pipeline_answers(pipeline, mixed)
    assert_answers_equal(outputs["serve_examples"], labels, probabilities, "serve_examples")


def test_the_report_records_the_answer_checks(bert_classifier):
    report = bert_classifier[0]
    for artifact in ("saved_model", "model_text.tflite"):
        checks = [check for check in report["artifacts"][artifact]["checks"]
                  if check.get("check") == "answer"]
        assert {check["output"] for check in checks} == {"label", "label_id", "probabilities"}
        assert all(check["passed"] for check in checks), checks
        outputs = report["artifacts"][artifact]["signatures"]["serve_text"]["outputs"]
        assert outputs["label"]["dtype"] in ("string", "bytes"), outputs["label"]


def test_regression_returns_the_score_the_pipeline_gives(tmp_path):
    model, tokenizer = hf_folder(tmp_path / "hf", "roberta", "RobertaForSequenceClassification",
                                 num_labels=1)
    kerasbert.export.export(tmp_path / "hf", tmp_path / "out", formats=("saved_model",),
                            max_seq_length=MAX_SEQ_LENGTH, text_signatures=True)
    outputs = run_text_signatures(str(tmp_path / "out"), TEXTS, [list(p) for p in PAIRS],
                                  examples(PAIRS[0], [None] * 3))
    pipeline = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer,
                                     function_to_apply="none", device=-1)
    scores = [row["score"] for row in pipeline(TEXTS, truncation=True, max_length=MAX_SEQ_LENGTH)]
    assert "label" not in outputs["serve_text"]
    np.testing.assert_allclose(outputs["serve_text"]["score"], scores, atol=TOLERANCE)


def test_an_export_whose_graph_answers_wrongly_is_refused(tmp_path, monkeypatch):
    """A graph that names the second most probable label fails the decoder check."""
    import tensorflow as tf

    import kerasbert.export.saved_model as saved_model
    from kerasbert.export import answers

    def wrong_answers(model, outputs):
        outputs = answers.with_answers(model, outputs)
        second = tf.argsort(outputs["logits"], axis=-1, direction="DESCENDING")[:, 1]
        return {**outputs, "label": tf.gather(tf.constant(LABELS), second)}

    monkeypatch.setattr(saved_model, "with_answers", wrong_answers)
    tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        num_layers=1, vocab_size=tokenizer.vocabulary_size(), max_positions=MAX_SEQ_LENGTH)
    model = kerasbert.models.build_task_model(config, "sequence_classification",
                                              num_labels=3, id2label=LABELS)
    with pytest.raises(ExportError, match="answer 'label' on serve_text case text_single"):
        kerasbert.export.export(model, tmp_path / "out", formats=("saved_model",),
                                max_seq_length=MAX_SEQ_LENGTH, text_signatures=True,
                                tokenizer=demo.vocabulary_dir("wordpiece"))
    assert not (tmp_path / "out").exists()
