"""Bad input and wrong artifacts: a one-line error that names the thing, a non-zero exit without
a traceback from the binary, and nothing left at (or beside) the output directory."""

import os
import subprocess
import sys

import keras
import numpy as np
import onnx
import pytest

import kerasbert
import kerasbert.data.demo
from kerasbert.cli.one_line_errors import one_line
from kerasbert.export import ExportError, exporter
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
    return subprocess.run([sys.executable, "-m", "kerasbert.cli.export", *flags],
                          capture_output=True, text=True)


def assert_left_nothing(output_dir):
    assert not output_dir.exists()
    assert [name for name in os.listdir(output_dir.parent) if ".partial-" in name] == []


@pytest.mark.parametrize("flags, named", [
    (["--model=/no/such/model.keras"], "/no/such/model.keras"),
    (["--calibration_data=/no/such/text.txt", "--quantize=int8"], "/no/such/text.txt"),
])
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


def test_the_model_of_a_report_is_reloadable_as_onnx(classifier_file, tmp_path):
    report = kerasbert.export.export(classifier_file, tmp_path / "out", formats=("onnx",),
                                     max_seq_length=MAX_SEQ_LENGTH)
    proto = onnx.load(tmp_path / "out" / "model.onnx")
    onnx.checker.check_model(proto, full_check=True)
    assert [value.name for value in proto.graph.output] == ["logits"]
    assert report["artifacts"]["model.onnx"]["signatures"]["serving_default"]["outputs"][
        "logits"]["shape"][0] == "batch"
