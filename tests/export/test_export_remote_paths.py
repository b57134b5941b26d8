"""`kerasbert-export` and `kerasbert-classify` with every path on `ram://` (TensorFlow's
in-memory file system, standing in for `gs://` and `s3://`): the export is built and verified in
a local folder and copied to the remote `--output_dir`, and classify runs a remote export's
artifacts from a local copy. Neither leaves a local folder named `ram:` behind."""

import gzip
import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert import file_system
from kerasbert.data import demo
from kerasbert.export.cases import read_texts
from kerasbert.export.text_tflite import run_text_tflite, text_tflite_model
from kerasbert.export.tflite import run_tflite
from tests.ram_runs import run_on_ram

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 32
TEXTS = ["a noun naming a place where people live", "move quickly on foot",
         "a colour like that of the sky"]


@pytest.fixture(scope="module")
def finetune_run(tmp_path_factory):
    """A `kerasbert-finetune`-like folder (`model.keras`: a tiny labelled classifier) and the
    WordPiece tokenizer folder it goes with."""
    folder = tmp_path_factory.mktemp("finetune-run")
    tokenizer_dir = demo.vocabulary_dir("wordpiece")
    tokenizer = kerasbert.tokenizers.from_hf(tokenizer_dir)
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        num_layers=2, hidden_size=32, num_heads=2, intermediate_size=64,
        vocab_size=tokenizer.vocabulary_size(), max_positions=MAX_SEQ_LENGTH)
    labels = demo.classification_labels()
    model = kerasbert.models.build_task_model(config, "sequence_classification",
                                              num_labels=len(labels), id2label=labels)
    model.save(str(folder / "model.keras"))
    return folder, tokenizer_dir


@pytest.fixture(scope="module")
def ram_export(finetune_run, tmp_path_factory):
    """`kerasbert-export` of the run, everything on `ram://`, with the default variants and
    the text signatures (for classify)."""
    run_dir, tokenizer_dir = finetune_run
    return run_on_ram("export", ["--model={ram}/run", "--tokenizer={ram}/tokenizer",
                                 "--output_dir={ram}/exports/gloss", "--text_signatures",
                                 f"--max_seq_length={MAX_SEQ_LENGTH}"],
                      tmp_path_factory.mktemp("export"),
                      inputs={"run": run_dir, "tokenizer": tokenizer_dir})


def test_export_writes_a_verified_export_on_ram(ram_export):
    assert ram_export.returncode == 0, ram_export.stderr[-3000:]
    assert not ram_export.local_ram_folder_made
    with open(ram_export.path("exports", "gloss", "export_report.json"), encoding="utf-8") as file:
        report = json.load(file)
    assert sorted(report["artifacts"]) == ["model.onnx", "model.tflite", "model_text.tflite",
                                           "saved_model"]
    for name, entry in report["artifacts"].items():
        assert entry["verified"], name
        assert entry["checks"] and all(check["passed"] for check in entry["checks"]), name
    assert sorted(os.listdir(ram_export.path("exports", "gloss"))) == [
        "export_report.json", "model.onnx", "model.tflite", "model_text.tflite", "saved_model"]
    assert os.path.isfile(ram_export.path("exports", "gloss", "saved_model", "saved_model.pb"))
    assert os.listdir(ram_export.path("exports")) == ["gloss"]  # no temporary left beside it
    assert "ram://kerasbert-test/exports/gloss/export_report.json" in ram_export.stdout


def test_classify_reads_an_export_on_ram(ram_export, tmp_path):
    assert ram_export.returncode == 0, ram_export.stderr[-3000:]
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(text + "\n" for text in TEXTS), encoding="utf-8")
    run = run_on_ram("classify", ["--export_dir={ram}/export", "--input_file={ram}/texts.txt",
                                  "--output_file={ram}/predictions.jsonl"],
                     tmp_path, inputs={"export": ram_export.path("exports", "gloss"),
                                       "texts.txt": str(texts)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert not run.local_ram_folder_made
    with open(run.path("predictions.jsonl"), encoding="utf-8") as file:
        predictions = [json.loads(line) for line in file]
    labels = demo.classification_labels()
    assert [row["text"] for row in predictions] == TEXTS
    assert all(row["runtimes"] == ["tflite", "saved_model"] and row["label"] in labels
               for row in predictions)


def test_classify_refuses_a_report_path_out_of_the_remote_export(ram_export, tmp_path):
    assert ram_export.returncode == 0, ram_export.stderr[-3000:]
    export = tmp_path / "export"
    shutil.copytree(ram_export.path("exports", "gloss"), export)
    report = json.loads((export / "export_report.json").read_text())
    report["artifacts"]["saved_model"]["path"] = "../elsewhere/saved_model"
    (export / "export_report.json").write_text(json.dumps(report))
    texts = tmp_path / "texts.txt"
    texts.write_text(TEXTS[0] + "\n", encoding="utf-8")
    run = run_on_ram("classify", ["--export_dir={ram}/export", "--input_file={ram}/texts.txt",
                                  "--runtimes=saved_model"],
                     tmp_path, inputs={"export": str(export), "texts.txt": str(texts)})
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "kerasbert-classify: error: ram://kerasbert-test/export/export_report.json: field "
        "artifacts.saved_model.path is '../elsewhere/saved_model', which is not inside the "
        "export folder ram://kerasbert-test/export; an artifact's path must stay inside it")



def test_tflite_files_and_calibration_texts_are_read_from_ram():
    """The library's readers of single files take URLs too: `run_tflite` and `run_text_tflite`
    on a `.tflite` file, and the calibration / judging texts (plain or `.gz`)."""
    folder = "ram://export-files"
    file_system.makedirs(folder)
    module = tf.Module()
    module.double = tf.function(
        lambda inputs: {"y": 2.0 * inputs["x"]},
        input_signature=[{"x": tf.TensorSpec([None, None], tf.float32, name="x")}])
    flatbuffer = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.double.get_concrete_function()], module).convert()
    with file_system.open_file(f"{folder}/double.tflite", "wb") as file:
        file.write(flatbuffer)
    assert run_tflite(f"{folder}/double.tflite", {"x": np.ones((1, 2), "float32")})[
        "y"].tolist() == [[2.0, 2.0]]

    tokenizer = kerasbert.tokenizers.WordPieceTokenizer(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "##s", "."])
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in ("token_ids", "segment_ids", "padding_mask")}
    echo = keras.Model(inputs, {"ids": keras.ops.cast(inputs["token_ids"], "float32")})
    with file_system.open_file(f"{folder}/text.tflite", "wb") as file:
        file.write(text_tflite_model(echo, tokenizer, max_seq_length=6))
    assert run_text_tflite(f"{folder}/text.tflite", ["Cafés."])["ids"].astype(int).tolist() == [
        [2, 5, 6, 7, 3, 0]]

    with file_system.open_file(f"{folder}/texts.txt", "w") as file:
        file.write("first\n\nsecond\n")
    with file_system.open_file(f"{folder}/more.txt.gz", "wb") as file:
        file.write(gzip.compress("third\nfourth\n".encode("utf-8")))
    assert read_texts([f"{folder}/texts.txt", f"{folder}/more.txt.gz"], count=3) == [
        "first", "second", "third"]
    file_system.rmtree(folder)


def test_export_to_ram_refuses_a_full_folder_and_leaves_nothing_when_it_fails(monkeypatch):
    from kerasbert.export import ExportError, export, exporter

    root = "ram://export-refusals"
    encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1, hidden_size=32, num_heads=2,
                                  intermediate_size=64, max_positions=32)
    file_system.makedirs(f"{root}/taken")
    with file_system.open_file(f"{root}/taken/keep.txt", "w") as file:
        file.write("keep me")
    with pytest.raises(ExportError, match=f"^{root}/taken: already exists and is not empty"):
        export(encoder, f"{root}/taken", formats=("onnx",), max_seq_length=16)
    assert file_system.read_text(f"{root}/taken/keep.txt") == "keep me"

    def fail(verifier):
        raise ExportError("model.onnx: refused for this test")

    monkeypatch.setattr(exporter._ArtifactVerifier, "verify", fail)
    with pytest.raises(ExportError, match="refused for this test"):
        export(encoder, f"{root}/new", formats=("onnx",), max_seq_length=16)
    assert file_system.listdir(root) == ["taken"]
    file_system.rmtree(root)
