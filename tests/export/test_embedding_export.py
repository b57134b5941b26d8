"""A text embedding model exports to a SavedModel with `serve_embedding(text)`, a raw-text TFLite
file and ONNX with pooling, dense layers and normalization inside, each giving the Keras model's
vectors; `kerasbert-predict` writes them per line (reading standard input) and searches a corpus
with `--query`, with the TFLite runtime's INFO lines kept off the terminal."""

import io
import json

import keras
import numpy as np
import onnxruntime
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops the text signatures use)

import kerasbert
from kerasbert.data import demo
from kerasbert.export import export
from kerasbert.export.text_tflite import run_text_tflite
from tests.binaries import run_binary

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 32
TEXTS = ["A small domesticated feline.", "a large tree native to eastern Europe",
         "Crème brûlée, señor! Über façade; déjà vu.", "cat", "",
         " ".join(["teleost fish with bony tongues"] * 8)]


@pytest.fixture(scope="module")
def exported(pretrained_tiny_bert_file, tmp_path_factory):
    """The session's pretrained tiny BERT with every pooling mode at once, two dense layers and
    normalization, exported in every format with dynamic int8 variants (a random encoder's
    activations are not what quantization is judged on: its ONNX int8 file measured a min
    cosine of 0.9785)."""
    tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    tf.keras.utils.set_random_seed(3)
    model = kerasbert.models.build_task_model(
        keras.saving.load_model(pretrained_tiny_bert_file), "text_embedding", normalize=True,
        pooling=["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"],
        dense_layers=[{"units": 48, "activation": "tanh"}, {"units": 24, "activation": "linear"}])
    output = tmp_path_factory.mktemp("embedding_export") / "export"
    report = export(model, output, formats=("saved_model", "tflite", "onnx"),
                    quantize=("none", "dynamic_int8"), max_seq_length=MAX_SEQ_LENGTH,
                    text_signatures=True, tokenizer=tokenizer)
    reference = np.asarray(model(tokenizer(TEXTS, max_length=MAX_SEQ_LENGTH,
                                           padding="longest"))["embedding"])
    return model, tokenizer, output, report, reference


def _min_cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.min(np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) /
                        np.linalg.norm(b, axis=1)))


def test_every_artifact_verifies_and_gives_the_keras_vectors(exported):
    model, tokenizer, output, report, reference = exported
    assert all(entry["verified"] for entry in report["artifacts"].values()), report["artifacts"]
    assert {"saved_model", "model.tflite", "model_text.tflite", "model.onnx",
            "model_dynamic_int8.tflite", "model_dynamic_int8.onnx"} <= set(report["artifacts"])
    np.testing.assert_allclose(np.linalg.norm(reference, axis=1), 1.0, atol=1e-6)

    loaded = tf.saved_model.load(str(output / "saved_model"))
    assert {"serve_embedding", "serving_default"} <= set(loaded.signatures)
    served = loaded.signatures["serve_embedding"](text=tf.constant(TEXTS))["embedding"].numpy()
    assert served.shape == (len(TEXTS), 24) and _min_cosine(served, reference) >= 0.9999
    np.testing.assert_allclose(served, reference, atol=1e-5)

    phone = run_text_tflite(str(output / "model_text.tflite"), TEXTS)
    assert _min_cosine(phone["embedding"], reference) >= 0.9999

    inputs = tokenizer(TEXTS, max_length=MAX_SEQ_LENGTH, padding="longest")
    session = onnxruntime.InferenceSession(str(output / "model.onnx"))
    onnx_vectors = session.run(["embedding"], {name: np.asarray(value) for name, value in
                                               inputs.items()})[0]
    assert _min_cosine(onnx_vectors, reference) >= 0.9999

    for name in ("model_dynamic_int8.onnx", "model_dynamic_int8.tflite"):
        agreement = report["artifacts"][name]["agreement"]["embedding"]
        assert agreement["kind"] == "example_vectors" and agreement["metric"] == "min_cosine"
        assert agreement["value"] >= 0.99 and agreement["judging_inputs"] >= 200


def test_predict_reads_standard_input_and_searches(exported, monkeypatch, capfd):
    model, tokenizer, output, _, reference = exported
    corpus = [text for text in TEXTS if text]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(text + "\n" for text in corpus)))
    result = run_binary("predict", f"--export_dir={output}")
    assert (result.returncode, result.stderr) == (0, "")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["text"] for row in rows] == corpus
    assert rows[0]["runtimes"] == ["tflite", "saved_model"]
    vectors = np.array([row["embedding"] for row in rows])
    assert _min_cosine(vectors, [vector for text, vector in zip(TEXTS, reference) if text]) \
        >= 0.9999

    monkeypatch.setattr("sys.stdin", io.StringIO("".join(text + "\n" for text in corpus)))
    query = "a cat, small and domesticated"
    result = run_binary("predict", f"--export_dir={output}", f"--query={query}", "--top_k=3")
    assert result.returncode == 0, result.stderr
    ranked = [json.loads(line) for line in result.stdout.splitlines()]
    query_vector = np.asarray(model(tokenizer([query], max_length=MAX_SEQ_LENGTH))["embedding"])[0]
    expected = np.argsort(-(vectors @ query_vector))[:3]
    assert [row["text"] for row in ranked] == [corpus[index] for index in expected]
    assert [row["rank"] for row in ranked] == [1, 2, 3]
    assert ranked[0]["cosine"] == pytest.approx(float(vectors[expected[0]] @ query_vector),
                                                abs=1e-4)
    assert "XNNPACK" not in capfd.readouterr().err


def test_quantized_files_are_judged_by_retrieval_on_a_labelled_dev_file(
        pretrained_tiny_bert_file, tmp_path):
    """`kerasbert-export --eval_file --task=text_embedding`: each quantized file's MRR@10 over a
    retrieval dev file (200 gloss first halves ranking their second halves) is within 1 point
    of the Keras model's, which is the score `kerasbert-finetune` gives the same file."""
    from kerasbert.training.finetune import FinetuneSettings
    from kerasbert.training.finetuning_tasks import TextEmbeddingFinetuning
    from tests.proofs.embeddings import halves

    examples = halves("dev", 200)
    dev_file = tmp_path / "dev.tsv"
    dev_file.write_text("".join(f"{example.anchor}\t{example.positive}\n"
                                for example in examples))
    model = kerasbert.models.build_task_model(keras.saving.load_model(pretrained_tiny_bert_file),
                                              "text_embedding", pooling="mean", normalize=True)
    model.save(tmp_path / "embedding.keras")
    output = tmp_path / "export"
    result = run_binary("export", f"--model={tmp_path / 'embedding.keras'}",
                        f"--output_dir={output}", "--formats=tflite,onnx",
                        "--quantize=none,dynamic_int8", f"--max_seq_length={MAX_SEQ_LENGTH}",
                        f"--tokenizer={demo.vocabulary_dir('wordpiece')}",
                        f"--eval_file={dev_file}", "--task=text_embedding")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((output / "export_report.json").read_text())
    labelled = report["labelled_set"]
    tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    finetune_score = TextEmbeddingFinetuning().evaluate(
        model, examples, tokenizer, FinetuneSettings(max_seq_length=MAX_SEQ_LENGTH), 32, None,
        None).metrics["mrr@10"]
    assert labelled["float_metrics"]["queries"] == 200
    assert labelled["float_metrics"]["mrr@10"] == pytest.approx(finetune_score, abs=1e-6)
    for name in ("model_dynamic_int8.tflite", "model_dynamic_int8.onnx"):
        entry = report["artifacts"][name]
        assert entry["verified"] and entry["decided_by"] == "agreement_and_task_metric", name
        [check] = [check for check in entry["checks"] if check["check"] == "task_metric"]
        assert check["passed"] and check["metrics"]["queries"] == 200
        assert abs(check["score_points"] - 100 * finetune_score) <= 1.0, (name, check)
