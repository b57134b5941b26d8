"""Bad input and wrong artifacts: a one-line error that names the thing, a non-zero exit without
a traceback from the binary, and nothing left at (or beside) the output directory."""

import os

import keras
import numpy as np
import onnx
import onnxruntime
import pytest

import kerasbert
import kerasbert.data.demo
from kerasbert.cli.one_line_errors import one_line
from kerasbert.export import ExportError, exporter
from kerasbert.export.onnx_model import op_inventory
from tests.binaries import run_binary as run_in_process
from tests.helpers import TINY_CONFIGS

MAX_SEQ_LENGTH = 24


@pytest.fixture(scope="module")
def classifier_file(tmp_path_factory):
    keras.utils.set_random_seed(3)
    encoder = kerasbert.models.build_encoder(TINY_CONFIGS["bert"])
    model = kerasbert.models.build_task_model(encoder, "sequence_classification", num_labels=3)
    path = tmp_path_factory.mktemp("model") / "classifier.keras"
    model.save(path)
    return path


def run_binary(*flags):
    return run_in_process("export", *flags)


def assert_left_nothing(output_dir):
    assert not output_dir.exists()
    assert [name for name in os.listdir(output_dir.parent) if ".partial-" in name] == []


@pytest.mark.parametrize("flags, named", [
    (["--model=/no/such/model.keras"], "/no/such/model.keras"),
    (["--calibration_data=/no/such/text.txt", "--quantize=int8"], "/no/such/text.txt"),
])
@pytest.mark.slow
def test_a_missing_path_is_one_line_naming_it(flags, named, classifier_file, tmp_path):
    """The binary's one line for a path that does not exist (the other bad arguments raise the
    same way from `export`, below)."""
    output_dir = tmp_path / "out"
    default_model = [] if any(flag.startswith("--model") for flag in flags) else [
        f"--model={classifier_file}"]
    completed = run_binary(*default_model, f"--output_dir={output_dir}",
                           f"--max_seq_length={MAX_SEQ_LENGTH}", *flags)
    assert completed.returncode != 0
    lines = completed.stderr.strip().splitlines()
    assert "Traceback" not in completed.stderr
    assert lines[-1].startswith("kerasbert-export: error:") and named in lines[-1], lines[-1]
    assert_left_nothing(output_dir)


@pytest.mark.parametrize("arguments, named", [
    ({"formats": ["saved_model", "pdf"]}, "pdf"),
    ({"quantize": ["none", "int8"]}, "calibration_data"),
    ({"quantize": ["int4"]}, "int4"),
    ({"text_signatures": True}, "tokenizer"),
    ({"eval_file": "/no/such/dev.tsv"}, "--task"),
    ({"task": "wordnet_gloss"}, "--eval_file"),
    ({"eval_file": "/no/such/dev.json", "task": "squad_v1"}, "question_answering"),
    ({"eval_file": "/no/such/dev.tsv", "task": "wordnet_gloss"}, "45 labels"),
    ({"eval_file": "/no/such/dev.tsv", "task": "no_such_task"}, "no_such_task"),
])
def test_bad_arguments_are_an_error_naming_them(arguments, named, classifier_file, tmp_path):
    """`export` (what `kerasbert-export` calls with its flags) raises an error the binary prints
    as one line (a `ValueError` or `OSError`) naming the bad argument, and leaves nothing."""
    output_dir = tmp_path / "out"
    with pytest.raises((ValueError, OSError)) as raised:
        kerasbert.export.export(classifier_file, output_dir, max_seq_length=MAX_SEQ_LENGTH,
                                **arguments)
    assert named in one_line(raised.value), one_line(raised.value)
    assert_left_nothing(output_dir)


@pytest.mark.slow
def test_text_signatures_that_cannot_be_built_are_an_error_naming_the_way_out(tmp_path):
    """A byte-level BPE tokenizer has no TFLite kernels: `model_text.tflite` cannot be built, so
    asking for text signatures with tflite in the formats is an error, not a skipped file."""
    encoder = kerasbert.models.build_encoder(TINY_CONFIGS["roberta"].replace(
        vocab_size=kerasbert.tokenizers.from_hf(
            kerasbert.data.demo.vocabulary_dir("byte_pair")).vocabulary_size()))
    encoder.save(tmp_path / "roberta.keras")
    output_dir = tmp_path / "out"
    completed = run_binary(f"--model={tmp_path / 'roberta.keras'}", f"--output_dir={output_dir}",
                           f"--tokenizer={kerasbert.data.demo.vocabulary_dir('byte_pair')}",
                           "--text_signatures", f"--max_seq_length={MAX_SEQ_LENGTH}")
    assert completed.returncode == 1 and "Traceback" not in completed.stderr
    (line,) = completed.stderr.strip().splitlines()[-1:]
    assert line.startswith("kerasbert-export: error: model_text.tflite cannot be built"), line
    assert "WordPiece tokenizers (BERT, ELECTRA) only, not BytePairTokenizer" in line
    assert "leave tflite out of --formats" in line and "without --text_signatures" in line
    assert_left_nothing(output_dir)


def test_a_non_empty_output_dir_is_refused_and_kept(classifier_file, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty"):
        kerasbert.export.export(classifier_file, tmp_path / "out", formats=("onnx",),
                                max_seq_length=MAX_SEQ_LENGTH)
    assert os.listdir(tmp_path / "out") == ["keep.txt"]


@pytest.mark.slow
def test_a_wrong_onnx_op_fails_verification_and_leaves_nothing(classifier_file, tmp_path,
                                                                monkeypatch):
    """Exact GELU's Erf swapped for Tanh in the ONNX graph: every output drifts."""
    convert = exporter.convert_to_onnx

    def broken(model, **kwargs):
        proto = convert(model, **kwargs)
        for node in proto.graph.node:
            if node.op_type == "Erf":
                node.op_type = "Tanh"
        return proto
    monkeypatch.setattr(exporter, "convert_to_onnx", broken)
    model = keras.saving.load_model(classifier_file)
    model.get_layer("classifier").kernel.assign(
        100.0 * np.asarray(model.get_layer("classifier").kernel))  # logits of magnitude ~1
    with pytest.raises(ExportError, match=r"model\.onnx: output 'logits'.* differs by"):
        kerasbert.export.export(model, tmp_path / "out", formats=("saved_model", "onnx"),
                                max_seq_length=MAX_SEQ_LENGTH)
    assert_left_nothing(tmp_path / "out")


@pytest.mark.slow
def test_a_wrong_op_in_the_saved_model_fails_verification(classifier_file, tmp_path, monkeypatch):
    """Softmax swapped for a sigmoid while the SavedModel traces: attention is wrong there only."""
    write = exporter.write_saved_model

    def broken(*args, **kwargs):
        with monkeypatch.context() as patch:
            patch.setattr(keras.ops, "softmax", lambda x, axis=-1: keras.ops.sigmoid(x))
            return write(*args, **kwargs)
    monkeypatch.setattr(exporter, "write_saved_model", broken)
    model = keras.saving.load_model(classifier_file)
    model.get_layer("classifier").kernel.assign(
        100.0 * np.asarray(model.get_layer("classifier").kernel))
    with pytest.raises(ExportError, match=r"saved_model: output 'logits'.* differs by"):
        kerasbert.export.export(model, tmp_path / "out", formats=("saved_model",),
                                max_seq_length=MAX_SEQ_LENGTH)
    assert_left_nothing(tmp_path / "out")


@pytest.mark.slow
def test_the_model_of_a_report_is_reloadable_as_onnx(classifier_file, tmp_path):
    report = kerasbert.export.export(classifier_file, tmp_path / "out", formats=("onnx",),
                                     max_seq_length=MAX_SEQ_LENGTH)
    proto = onnx.load(tmp_path / "out" / "model.onnx")
    onnx.checker.check_model(proto, full_check=True)
    assert [value.name for value in proto.graph.output] == ["logits"]
    assert report["artifacts"]["model.onnx"]["signatures"]["serving_default"]["outputs"][
        "logits"]["shape"][0] == "batch"


def _ort_basic_optimized(path, config, candidate_path):
    """A stand-in candidate: ONNX Runtime's own basic graph optimizations (constant folding,
    redundant node removal) of the unfused graph, saved as a new file."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(candidate_path)
    onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return {"fusions": {"stand-in": 1}}


def _onnx_logits(path, inputs):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["logits"], inputs)[0]


def _inputs(model):
    rng = np.random.default_rng(5)
    config = kerasbert.models.tasks.encoder_of(model).config
    ids = rng.integers(1, config.vocab_size, size=(2, 11)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    return {"token_ids": np.where(mask == 1, ids, config.pad_token_id).astype("int32"),
            "segment_ids": np.zeros_like(ids), "padding_mask": mask}


@pytest.mark.slow
def test_the_fused_onnx_graph_becomes_model_onnx(classifier_file, tmp_path):
    report = kerasbert.export.export(classifier_file, tmp_path / "out", formats=("onnx",),
                                     max_seq_length=MAX_SEQ_LENGTH)
    entry = report["artifacts"]["model.onnx"]
    fusion = entry["onnx_runtime_fusion"]
    layers = kerasbert.models.tasks.encoder_of(
        keras.saving.load_model(classifier_file)).config.num_layers
    # the classifier's last layer attends from [CLS] only; its untrained biases are zero,
    # which tf2onnx drops, so the GELUs have no bias to take in (BiasGelu)
    assert entry["verified"] and fusion["fused"] and fusion["fusions"] == {
        "Attention": layers - 1, "MultiHeadAttention": 1, "Gelu": layers,
        "LayerNormalization": 1, "SkipLayerNormalization": 2 * layers}, fusion
    assert sorted(os.listdir(tmp_path / "out")) == ["export_report.json", "model.onnx"]
    written = onnx.load(tmp_path / "out" / "model.onnx")
    assert op_inventory(written) == entry["ops"] != fusion["unfused_ops"]  # the candidate's
    assert "Softmax" not in entry["ops"] and "Erf" not in entry["ops"]
    assert "Softmax" in fusion["unfused_ops"] and "Erf" in fusion["unfused_ops"]
    model = keras.saving.load_model(classifier_file)
    inputs = _inputs(model)
    expected = np.asarray(model(inputs)["logits"])
    np.testing.assert_allclose(_onnx_logits(tmp_path / "out" / "model.onnx", inputs), expected,
                               atol=1e-5)


@pytest.mark.slow
def test_an_optimized_onnx_graph_that_fails_verification_is_not_used(classifier_file, tmp_path,
                                                                     monkeypatch):
    """The candidate's exact GELU turned into Tanh: the export keeps the unfused model.onnx and
    its report says why."""
    def broken(path, config, candidate_path):
        result = _ort_basic_optimized(path, config, candidate_path)
        proto = onnx.load(candidate_path)
        for node in proto.graph.node:
            if node.op_type == "Erf":
                node.op_type = "Tanh"
        onnx.save(proto, candidate_path)
        return result
    monkeypatch.setattr(exporter, "fused_candidate", broken)
    model = keras.saving.load_model(classifier_file)
    model.get_layer("classifier").kernel.assign(
        100.0 * np.asarray(model.get_layer("classifier").kernel))  # logits of magnitude ~1
    report = kerasbert.export.export(model, tmp_path / "out", formats=("onnx",),
                                     max_seq_length=MAX_SEQ_LENGTH)
    entry = report["artifacts"]["model.onnx"]
    fusion = entry["onnx_runtime_fusion"]
    assert entry["verified"] and not fusion["fused"]
    assert fusion["reason"].startswith("the fused graph failed verification, so model.onnx is "
                                       "the unfused graph: model_fused_candidate.onnx: output "
                                       "'logits'"), fusion["reason"]
    assert sorted(os.listdir(tmp_path / "out")) == ["export_report.json", "model.onnx"]
    assert "Erf" in entry["ops"]
    inputs = _inputs(model)
    np.testing.assert_allclose(_onnx_logits(tmp_path / "out" / "model.onnx", inputs),
                               np.asarray(model(inputs)["logits"]), atol=1e-4)
