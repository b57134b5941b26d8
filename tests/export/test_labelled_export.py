"""`--eval_file` with `--task`: a quantized task model is judged by the task's metric on the
labelled file, computed from the artifact's own outputs (run in its fresh process) by the code
`kerasbert-finetune` evaluates with, and must stay within 1 point of the Keras model's.

A tiny WordNet-gloss classifier, briefly trained, is accepted, and the report's scores equal
scikit-learn's on the predictions of the Keras model and of the TFLite file (run here by
ai-edge-litert). The same classifier with one large vector added to every column of its head
predicts exactly as before in float, but its dynamic-int8 files (TFLite, and ONNX Runtime's)
round the head per column and lose accuracy: refused in one line with both scores. Other task formats (SQuAD, CoNLL, SWAG)
go through the same path."""

import json
import os
import re

import keras
import numpy as np
import pytest
import sklearn.metrics
from ai_edge_litert.interpreter import Interpreter

import kerasbert
from kerasbert.data import demo, glue
from kerasbert.training.finetune import FinetuneSettings
from kerasbert.training.finetuning_tasks import get_finetuning_task
from tests.binaries import run_binary

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 32
EVAL_EXAMPLES = 600
TRAIN_EXAMPLES = 4000
SHARED_HEAD_SCALE = 30.0


@pytest.fixture(scope="module")
def classifiers(demo_tokenizer, tmp_path_factory):
    """`{"trained": path, "shared_head": path}`: the tiny classifier, and the same with a large
    vector added to every column of its head (the same float predictions)."""
    task = get_finetuning_task("wordnet_gloss")
    keras.utils.set_random_seed(0)
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        vocab_size=demo_tokenizer.vocabulary_size(), max_positions=MAX_SEQ_LENGTH, num_layers=1,
        hidden_size=32, num_heads=2, intermediate_size=64)
    labels = task.labels([])
    model = kerasbert.models.build_task_model(config, "sequence_classification",
                                              num_labels=len(labels), id2label=labels)
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    train = task.read(demo.classification_files()["train"], "train")[:TRAIN_EXAMPLES]
    # Fixed padding: the recipe (and SHARED_HEAD_SCALE) was chosen on it. Trained on length
    # buckets, dropout draws other masks, and the shared head's int8 file lost at most 1 point.
    settings = FinetuneSettings(max_seq_length=MAX_SEQ_LENGTH, labels=labels,
                                length_buckets=False)
    model.fit(task.dataset(train, demo_tokenizer, settings, 32, training=True), epochs=3,
              verbose=0)
    folder = tmp_path_factory.mktemp("classifiers")
    model.save(folder / "trained.keras")
    head = model.get_layer("classifier")
    kernel, bias = head.get_weights()
    shared = SHARED_HEAD_SCALE * np.random.default_rng(0).normal(size=(kernel.shape[0], 1))
    head.set_weights([kernel + shared.astype("float32"), bias])
    model.save(folder / "shared_head.keras")
    return {"trained": folder / "trained.keras", "shared_head": folder / "shared_head.keras"}


def run_export(model_file, output_dir):
    return run_binary(
        "export", f"--model={model_file}",
        f"--output_dir={output_dir}", "--formats=tflite", "--quantize=none,dynamic_int8",
        f"--tokenizer={demo.vocabulary_dir('wordpiece')}", f"--max_seq_length={MAX_SEQ_LENGTH}",
        f"--eval_file={demo.classification_files()['dev']}", "--task=wordnet_gloss",
        f"--max_eval_examples={EVAL_EXAMPLES}")


def sklearn_score(labels, predictions):
    """The wordnet_gloss score in points: the mean of accuracy and MCC, as GLUE tasks score."""
    return 100 * np.mean([sklearn.metrics.accuracy_score(labels, predictions),
                          sklearn.metrics.matthews_corrcoef(labels, predictions)])


def dev_inputs(tokenizer):
    examples = get_finetuning_task("wordnet_gloss").read(demo.classification_files()["dev"],
                                                         "dev")[:EVAL_EXAMPLES]
    packed = tokenizer([example.text_a for example in examples], max_length=MAX_SEQ_LENGTH)
    return ({name: np.asarray(value, np.int32) for name, value in packed.items()},
            glue.example_labels("wordnet_gloss", examples))


def test_the_trained_classifier_is_accepted_with_scikit_learn_s_scores(classifiers,
                                                                      demo_tokenizer, tmp_path):
    completed = run_export(classifiers["trained"], tmp_path / "out")
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "export_report.json").read_text())
    inputs, labels = dev_inputs(demo_tokenizer)
    model = keras.saving.load_model(classifiers["trained"])
    float_predictions = np.argmax(np.asarray(model(inputs)["logits"]), -1)
    runner = Interpreter(model_path=str(tmp_path / "out" / "model_dynamic_int8.tflite")
                         ).get_signature_runner("serving_default")
    quantized_predictions = np.argmax(runner(**inputs)["logits"], -1)

    labelled = report["labelled_set"]
    assert labelled["examples"] == EVAL_EXAMPLES and labelled["task"] == "wordnet_gloss"
    assert labelled["float_score_points"] == pytest.approx(
        sklearn_score(labels, float_predictions), abs=1e-5)
    assert sklearn.metrics.accuracy_score(labels, float_predictions) > 0.1  # it learned
    metric = report["artifacts"]["model_dynamic_int8.tflite"]["task_metric"]
    assert metric["score_points"] == pytest.approx(
        sklearn_score(labels, quantized_predictions), abs=1e-5)
    assert metric["passed"] and metric["gap_points"] <= 1.0
    assert report["artifacts"]["model_dynamic_int8.tflite"]["decided_by"] == "task_metric"
    assert re.search(r"model_dynamic_int8\.tflite: verified \(.*wordnet_gloss score [0-9.]+ "
                     r"against the Keras model's [0-9.]+ on 600 examples", completed.stdout)


def test_a_head_that_rounds_badly_is_refused_by_its_score(classifiers, demo_tokenizer, tmp_path):
    trained = keras.saving.load_model(classifiers["trained"])
    shared = keras.saving.load_model(classifiers["shared_head"])
    inputs, labels = dev_inputs(demo_tokenizer)
    assert np.array_equal(np.argmax(np.asarray(trained(inputs)["logits"]), -1),
                          np.argmax(np.asarray(shared(inputs)["logits"]), -1))

    completed = run_export(classifiers["shared_head"], tmp_path / "out")
    assert completed.returncode == 1 and "Traceback" not in completed.stderr
    line = completed.stderr.strip().splitlines()[-1]
    found = re.search(r"kerasbert-export: error: model_dynamic_int8\.tflite: wordnet_gloss score "
                      r"([0-9.]+) against the float model's ([0-9.]+) on 600 examples of .*"
                      r"wordnet_gloss-dev\.tsv\.gz, ([0-9.]+) points apart", line)
    assert found, line
    assert float(found.group(3)) > 1.0
    assert not (tmp_path / "out").exists()
    assert [name for name in os.listdir(tmp_path) if ".partial-" in name] == []


def test_the_onnx_int8_file_of_that_head_is_refused_the_same_way(classifiers, demo_tokenizer,
                                                                 tmp_path):
    """`model_dynamic_int8.onnx` (ONNX Runtime's per-channel dynamic quantization) is judged by
    the same rule: the shared head costs it its score too, and nothing is written."""
    with pytest.raises(kerasbert.export.ExportError) as refused:
        kerasbert.export.export(classifiers["shared_head"], tmp_path / "out", formats=("onnx",),
                                quantize=("dynamic_int8",), max_seq_length=MAX_SEQ_LENGTH,
                                tokenizer=demo_tokenizer,
                                eval_file=demo.classification_files()["dev"],
                                task="wordnet_gloss", max_eval_examples=EVAL_EXAMPLES)
    found = re.search(r"model_dynamic_int8\.onnx: wordnet_gloss score ([0-9.]+) against the "
                      r"float model's ([0-9.]+) on 600 examples of .*, ([0-9.]+) points apart",
                      str(refused.value))
    assert found, str(refused.value)
    assert float(found.group(3)) > 1.0
    assert "model.onnx:" not in str(refused.value)  # the float file itself verified
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("task_name", ["squad_v1", "conll2003", "swag"])
def test_other_task_formats_are_scored_on_the_artifact(task_name, demo_tokenizer, tmp_path):
    """A random task model of each kind and a tiny file of its format: the report's float score
    is what `kerasbert-finetune --mode=eval` computes (`FinetuningTask.evaluate`)."""
    task = get_finetuning_task(task_name)
    path, labels = _write_task_file(task_name, tmp_path)
    # SQuAD's windows take kerasbert-finetune's defaults: questions of up to 64 tokens.
    length = 96 if task_name == "squad_v1" else MAX_SEQ_LENGTH
    keras.utils.set_random_seed(0)
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        vocab_size=demo_tokenizer.vocabulary_size(), max_positions=length, num_layers=1,
        hidden_size=32, num_heads=2, intermediate_size=64)
    model = kerasbert.models.build_task_model(config, task.model_task, num_labels=len(labels)
                                              if labels else None, id2label=labels)
    report = kerasbert.export.export(model, tmp_path / "out", formats=("tflite",),
                                     quantize=("dynamic_int8",), max_seq_length=length,
                                     tokenizer=demo_tokenizer, eval_file=path, task=task_name)
    settings = FinetuneSettings(max_seq_length=length, labels=labels)
    evaluation = task.evaluate(model, task.read(str(path), "dev"), demo_tokenizer, settings, 32,
                               str(tmp_path / "predictions"), str(path))
    assert report["labelled_set"]["float_score_points"] == pytest.approx(
        evaluation.score * task.score_to_percent, abs=1e-5)
    metric = report["artifacts"]["model_dynamic_int8.tflite"]["task_metric"]
    assert metric["task"] == task_name and metric["passed"]


def _write_task_file(task_name, folder):
    """A small labelled file of `task_name`'s format, and the model's labels (or None)."""
    words = ["river", "stone", "garden", "music", "winter", "paper", "light", "market"]
    rng = np.random.default_rng(0)
    if task_name == "squad_v1":
        articles = []
        for number in range(12):
            answer = str(rng.choice(words))
            context = f"The {rng.choice(words)} was near the {answer} in the old town."
            articles.append({"title": f"t{number}", "paragraphs": [{"context": context, "qas": [{
                "id": f"q{number}", "question": "What was it near?",
                "answers": [{"text": answer, "answer_start": context.index(answer)}]}]}]})
        path = folder / "dev-v1.1.json"
        path.write_text(json.dumps({"version": "1.1", "data": articles}), encoding="utf-8")
        return path, None
    if task_name == "conll2003":
        labels = ["O", "B-LOC", "I-LOC"]
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(12):
            for word in rng.choice(words, size=5):
                lines.append(f"{word} NN I-NP {rng.choice(labels)}")
            lines.append("")
        path = folder / "eng.testa"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path, labels
    header = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2," \
             "ending3,label"
    rows = [header] + [
        f"v{number},{number},The {words[number % 8]} opens. It,The {words[number % 8]} opens.,It,"
        f"gold,{','.join(str(word) for word in rng.choice(words, size=4))},{number % 4}"
        for number in range(12)]
    path = folder / "val.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path, None
