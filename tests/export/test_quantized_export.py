"""The binary's quantized files on a pretrained model: TFLite float16, dynamic-range int8 and
full int8 (calibrated on text through the model's tokenizer) and ONNX dynamic-range int8 are
accepted by the export's strict rule (argmax agreement >= 0.99, every flip counted, on judging
texts disjoint from the calibration texts), and an independent check with ai-edge-litert or
onnxruntime on held-out text finds the same: each keeps at least 99% of the float model's
masked-token and next-sentence predictions on 1,024 held-out sentence pairs. The float
`model.onnx` (ONNX Runtime's fused graph when that verified) matches the Keras model there."""

import gzip
import json

import keras
import numpy as np
import onnxruntime
import pytest
from ai_edge_litert.interpreter import Interpreter

from kerasbert.data import demo
from kerasbert.export.compare import AGREEMENT_THRESHOLD
from tests.binaries import run_binary

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 64
VARIANTS = ("model.tflite", "model_float16.tflite", "model_dynamic_int8.tflite",
            "model_int8.tflite")
ONNX_VARIANTS = ("model.onnx", "model_dynamic_int8.onnx")
QUANTIZED = VARIANTS[1:] + ONNX_VARIANTS[1:]
CALIBRATION_TEXTS, JUDGING_TEXTS, HELD_OUT_PAIRS = 64, 256, 1024


def corpus_lines(shard, start, count):
    with gzip.open(demo.pretraining_corpus_files()[shard], "rt", encoding="utf-8") as file:
        lines = [line.strip() for line in file if len(line.split()) > 3]
    return lines[start:start + count]


@pytest.fixture(scope="module")
def exported(pretrained_tiny_bert_file, tmp_path_factory):
    work = tmp_path_factory.mktemp("quantized")
    calibration = work / "calibration.txt"
    calibration.write_text("\n".join(corpus_lines(1, 0, CALIBRATION_TEXTS + JUDGING_TEXTS)) + "\n",
                           encoding="utf-8")
    completed = run_binary(
        "export", f"--model={pretrained_tiny_bert_file}",
        f"--output_dir={work / 'out'}", "--formats=tflite,onnx",
        "--quantize=none,float16,dynamic_int8,int8", f"--calibration_data={calibration}",
        f"--tokenizer={demo.vocabulary_dir('wordpiece')}", f"--max_seq_length={MAX_SEQ_LENGTH}")
    assert completed.returncode == 0, completed.stderr[-2000:]
    print(completed.stdout)
    return work / "out", completed.stdout, calibration


def held_out_inputs(tokenizer, count=HELD_OUT_PAIRS):
    """Sentence pairs from the held-out shard (half of them consecutive), 3 masked positions."""
    lines = corpus_lines(3, 0, 2 * count)
    firsts, seconds = lines[0::2], lines[1::2]
    packed = tokenizer(firsts, seconds[:count // 2] + seconds[count // 2:][::-1],
                       max_length=MAX_SEQ_LENGTH)
    inputs = {name: np.asarray(value, np.int32) for name, value in packed.items()}
    lengths = inputs["padding_mask"].sum(axis=1)
    inputs["masked_lm_positions"] = np.stack(
        [np.linspace(1, length - 2, 3).astype(np.int32) for length in lengths])
    return inputs


def test_the_binary_verifies_every_variant_under_the_strict_rule(exported):
    output_dir, stdout, calibration = exported
    report = json.loads((output_dir / "export_report.json").read_text())
    assert report["texts"]["calibration"] == {
        "source": [str(calibration)], "texts": CALIBRATION_TEXTS,
        "non_empty_lines": f"1-{CALIBRATION_TEXTS}"}
    assert report["texts"]["judging"]["texts"] == JUDGING_TEXTS
    for name in VARIANTS + ONNX_VARIANTS:
        entry = report["artifacts"][name]
        assert entry["verified"] and f"{name}: verified" in stdout
    sizes = {name: report["artifacts"][name]["size_bytes"] for name in VARIANTS + ONNX_VARIANTS}
    # The 8k x 128 token embedding dominates this tiny model; BERT-base: see the benchmark.
    assert sizes["model_dynamic_int8.tflite"] < sizes["model.tflite"] / 2
    assert sizes["model_float16.tflite"] < sizes["model.tflite"] / 1.8
    assert sizes["model_dynamic_int8.onnx"] < sizes["model.onnx"] / 2
    fusion = report["artifacts"]["model.onnx"]["onnx_runtime_fusion"]
    # the pretraining heads read the last layer at [CLS] and the masked positions only
    assert fusion["fused"] and {"Attention", "MultiHeadAttention", "SkipLayerNormalization",
                                "BiasGelu"} <= set(fusion["fusions"]), fusion
    for name in QUANTIZED:
        entry = report["artifacts"][name]
        assert entry["decided_by"] == "agreement"
        assert entry["judged_on"]["inputs"] == 256
        assert entry["judged_on"]["shape"] == "single texts"
        assert sorted(entry["agreement"]) == ["mlm_logits", "nsp_logits"]
        for value in entry["agreement"].values():
            assert value["metric"] == "argmax_agreement" and value["judging_inputs"] == 256
            assert value["kind"] == "example_logits"
            strict = 1 - value["flips"] / value["compared"]
            assert value["value"] == pytest.approx(strict, abs=1e-6)
            assert value["value"] >= AGREEMENT_THRESHOLD


def run_variant(path, inputs):
    """`{output: array}` of an exported file, by ai-edge-litert or onnxruntime."""
    if path.suffix == ".tflite":
        return Interpreter(model_path=str(path)).get_signature_runner("serving_default")(**inputs)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [value.name for value in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


@pytest.fixture(scope="module")
def held_out(pretrained_tiny_bert_file, demo_tokenizer):
    """`(inputs, the Keras model's outputs)` on the held-out pairs."""
    model = keras.saving.load_model(pretrained_tiny_bert_file)
    inputs = held_out_inputs(demo_tokenizer)
    return inputs, {name: np.asarray(value)
                    for name, value in model(inputs, training=False).items()}


def test_the_float_onnx_file_matches_keras_on_held_out_text(exported, held_out):
    output_dir, _, _ = exported
    inputs, expected = held_out
    produced = run_variant(output_dir / "model.onnx", inputs)
    for name, value in expected.items():
        scale = max(1.0, float(np.abs(value).max()))
        assert float(np.abs(produced[name] - value).max()) / scale <= 1e-4, name


@pytest.mark.parametrize("variant", QUANTIZED)
def test_quantized_predictions_agree_on_held_out_text(variant, exported, held_out):
    output_dir, _, _ = exported
    inputs, expected = held_out
    produced = run_variant(output_dir / variant, inputs)
    for name in ("mlm_logits", "nsp_logits"):
        reference = expected[name].reshape(-1, expected[name].shape[-1])
        chosen = np.argmax(reference, -1)
        picked = np.argmax(produced[name].reshape(reference.shape), -1)
        agreement = np.mean(chosen == picked)
        print(f"{variant} {name}: {np.sum(chosen != picked)} of {len(chosen)} flipped")
        assert agreement >= AGREEMENT_THRESHOLD, f"{variant} {name}: argmax agreement {agreement}"
