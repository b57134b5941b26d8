"""Quantized variants that lose the float model's outputs are refused like a wrong float artifact:
`kerasbert-export` exits 1 with one line naming each artifact and its numbers, and leaves nothing
at (or beside) the destination. Two models are broken on purpose, and each breaks every
quantized variant (float16, dynamic int8, full int8):

- a near-tie classifier: random weights, 9 labels, each column of the classifier kernel one
  shared vector plus 1e-2 of its own, and biases that centre the logits on the mean pooled
  output of training text, so that the float model's logits all but tie for every text. Rounding
  the kernel (float16; dynamic int8 per output channel: the head has 1,152 weights, over the
  1,024 below which dynamic-range quantization keeps a kernel float) or the encoder's outputs
  (full int8, which keeps the head float) moves the logits by more than the gaps;
- an outlier encoder: the session's pretrained tiny BERT's encoder with one feed-forward unit of
  its last layer rewired: input weights of +-1e5 (past float16's 65504, which float16 clamps
  them to) and output weights of +-1e-5. In float32 the unit carries a normal-sized signal
  (GELU(1e5 x) * 1e-5 is about max(x, 0)); in int8 its activation of ~1e6 sets the int8 scale of
  the whole layer's activations, which rounds every other unit to 0, and its output weights
  round to 0 in their channels.

Each bad model's numbers are checked independently (ai-edge-litert and numpy on held-out text):
it really misses the rule. The same encoder without the rewired unit is accepted.
"""

import gzip
import os
import re

import keras
import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

import kerasbert
from kerasbert.data import demo
from kerasbert.export.compare import AGREEMENT_THRESHOLD, COSINE_THRESHOLD
from kerasbert.export.signatures import serving_function
from kerasbert.export.tflite import convert_to_tflite
from kerasbert.models.tasks import encoder_of
from tests.binaries import run_binary

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 32
VARIANTS = {"float16": "model_float16.tflite", "dynamic_int8": "model_dynamic_int8.tflite",
            "int8": "model_int8.tflite"}
NEAR_TIE_SPREAD = 1e-2
OUTLIER_INPUT_WEIGHT, OUTLIER_OUTPUT_WEIGHT = 1e5, 1e-5


def corpus_lines(shard, start, count):
    with gzip.open(demo.pretraining_corpus_files()[shard], "rt", encoding="utf-8") as file:
        lines = [line.strip() for line in file if len(line.split()) > 3]
    return lines[start:start + count]


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory):
    """64 calibration lines, then 256 judging lines, of a training shard."""
    path = tmp_path_factory.mktemp("texts") / "calibration.txt"
    path.write_text("\n".join(corpus_lines(1, 0, 320)) + "\n", encoding="utf-8")
    return path


def near_tie_classifier(tokenizer, max_positions=MAX_SEQ_LENGTH):
    """The near-tie classifier (module docstring)."""
    keras.utils.set_random_seed(1)
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        vocab_size=tokenizer.vocabulary_size(), max_positions=max_positions, num_layers=1,
        hidden_size=128, num_heads=2, intermediate_size=256)
    model = kerasbert.models.build_task_model(config, "sequence_classification", num_labels=9)
    head = model.get_layer("classifier")
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(config.hidden_size, 1))
    kernel = (shared + NEAR_TIE_SPREAD * rng.normal(size=(config.hidden_size, 9))).astype("float32")
    training_text = tokenizer(corpus_lines(0, 0, 64), max_length=max_positions)
    pooled = np.asarray(model.encoder(training_text)["pooled_output"]).mean(axis=0)
    head.set_weights([kernel, (-pooled @ kernel).astype("float32")])
    return model


def rewire_one_unit(encoder, unit=0):
    """The outlier encoder's rewired unit (module docstring), in place."""
    last = encoder.config.num_layers - 1
    layers = {layer.path: layer for layer in encoder._flatten_layers() if hasattr(layer, "kernel")}
    intermediate = next(layer for path, layer in layers.items()
                        if path.endswith(f"transformer_layer_{last}/intermediate"))
    output = next(layer for path, layer in layers.items()
                  if path.endswith(f"transformer_layer_{last}/output"))
    signs = np.random.default_rng(0).choice([-1.0, 1.0], size=(2, encoder.config.hidden_size))
    kernel, bias = np.array(intermediate.kernel), np.array(intermediate.bias)
    kernel[:, unit], bias[unit] = OUTLIER_INPUT_WEIGHT * signs[0], 0.0
    intermediate.kernel.assign(kernel)
    intermediate.bias.assign(bias)
    weights = np.array(output.kernel)
    weights[unit] = OUTLIER_OUTPUT_WEIGHT * signs[1]
    output.kernel.assign(weights)
    return encoder


@pytest.fixture(scope="module")
def models(pretrained_tiny_bert_file, demo_tokenizer, tmp_path_factory):
    """`{name: .keras path}`: the two bad models and the good encoder."""
    folder = tmp_path_factory.mktemp("models")
    pretrained = encoder_of(keras.saving.load_model(pretrained_tiny_bert_file))
    built = {"near_tie": near_tie_classifier(demo_tokenizer), "good_encoder": pretrained,
             "outlier_encoder": rewire_one_unit(
                 encoder_of(keras.saving.load_model(pretrained_tiny_bert_file)))}
    paths = {}
    for name, model in built.items():
        paths[name] = folder / f"{name}.keras"
        model.save(paths[name])
    return paths


def run_export(model_file, output_dir, calibration_file):
    return run_binary(
        "export", f"--model={model_file}",
        f"--output_dir={output_dir}", "--formats=tflite",
        f"--quantize={','.join(VARIANTS)}", f"--calibration_data={calibration_file}",
        f"--tokenizer={demo.vocabulary_dir('wordpiece')}", f"--max_seq_length={MAX_SEQ_LENGTH}")


def held_out_inputs(tokenizer, count=256):
    packed = tokenizer(corpus_lines(3, 0, count), max_length=MAX_SEQ_LENGTH)
    return {name: np.asarray(value, np.int32) for name, value in packed.items()}


def independent_outputs(model_file, tokenizer, calibration_file):
    """`(float outputs, {variant: outputs}, inputs)` on held-out text: each variant converted
    here and run by ai-edge-litert, none of the exporter's judging involved."""
    model = keras.saving.load_model(model_file)
    serve = serving_function(model)
    lines = calibration_file.read_text(encoding="utf-8").splitlines()[:64]
    calibration = [{name: np.asarray(value, np.int32) for name, value in tokenizer(
        [line], max_length=MAX_SEQ_LENGTH).items()} for line in lines]
    inputs = held_out_inputs(tokenizer)
    expected = {name: np.asarray(value) for name, value in model(inputs, training=False).items()}
    produced = {}
    for variant in VARIANTS:
        flatbuffer = convert_to_tflite(serve, model, variant,
                                       calibration if variant == "int8" else None)
        runner = Interpreter(model_content=flatbuffer).get_signature_runner("serving_default")
        produced[variant] = runner(**inputs)
    return expected, produced, inputs


def token_cosines(expected, produced, padding_mask):
    keep = padding_mask.astype(bool) if expected.ndim == 3 else slice(None)
    expected, produced = expected[keep], np.nan_to_num(produced[keep], nan=0.0, posinf=0.0,
                                                       neginf=0.0)
    return np.sum(expected * produced, -1) / np.maximum(
        np.linalg.norm(expected, axis=-1) * np.linalg.norm(produced, axis=-1), 1e-30)


@pytest.fixture(scope="module")
def refused(models, calibration_file, tmp_path_factory):
    """`{bad model: (completed binary, output_dir)}`."""
    results = {}
    for name in ("near_tie", "outlier_encoder"):
        output_dir = tmp_path_factory.mktemp(name) / "out"
        results[name] = run_export(models[name], output_dir, calibration_file), output_dir
    return results


def assert_refused(completed, output_dir):
    assert completed.returncode == 1, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr
    line = completed.stderr.strip().splitlines()[-1]
    assert line.startswith("kerasbert-export: error: "), line
    assert not output_dir.exists()
    assert [name for name in os.listdir(output_dir.parent) if ".partial-" in name] == []
    return line


def test_the_near_tie_classifier_is_refused_in_every_variant(refused):
    line = assert_refused(*refused["near_tie"])
    for variant, file_name in VARIANTS.items():
        found = re.search(re.escape(file_name) + r": output 'logits' argmax_agreement ([0-9.]+) "
                          r"on 256 judging inputs \((\d+) of 256 flipped", line)
        assert found, (variant, line)
        assert float(found.group(1)) < AGREEMENT_THRESHOLD and int(found.group(2)) > 2


def test_the_near_tie_classifier_really_flips(models, demo_tokenizer, calibration_file):
    expected, produced, _ = independent_outputs(models["near_tie"], demo_tokenizer,
                                                calibration_file)
    chosen = expected["logits"].argmax(-1)
    top_two = np.sort(expected["logits"], -1)[:, -2:]
    assert np.median(top_two[:, 1] - top_two[:, 0]) < 1e-2 * np.abs(expected["logits"]).max()
    for variant, outputs in produced.items():
        agreement = np.mean(outputs["logits"].argmax(-1) == chosen)
        assert agreement < AGREEMENT_THRESHOLD - 0.03, (variant, agreement)


def test_the_outlier_encoder_is_refused_in_every_variant(refused):
    line = assert_refused(*refused["outlier_encoder"])
    for variant, file_name in VARIANTS.items():
        found = re.search(re.escape(file_name) + r": output '(?:pooled|sequence)_output' "
                          r"min_cosine (-?[0-9.]+) on 256 judging inputs", line)
        assert found, (variant, line)
        assert float(found.group(1)) < COSINE_THRESHOLD


def test_the_outlier_encoder_really_loses_its_outputs(models, demo_tokenizer, calibration_file):
    expected, produced, inputs = independent_outputs(models["outlier_encoder"], demo_tokenizer,
                                                     calibration_file)
    for variant, outputs in produced.items():
        worst = min(token_cosines(expected[name], outputs[name], inputs["padding_mask"]).min()
                    for name in expected)
        assert worst < COSINE_THRESHOLD, (variant, worst)


def test_the_same_encoder_without_the_outlier_is_accepted(models, demo_tokenizer,
                                                          calibration_file, tmp_path):
    completed = run_export(models["good_encoder"], tmp_path / "out", calibration_file)
    assert completed.returncode == 0, completed.stderr[-2000:]
    for file_name in VARIANTS.values():
        assert f"{file_name}: verified" in completed.stdout
    expected, produced, inputs = independent_outputs(models["good_encoder"], demo_tokenizer,
                                                     calibration_file)
    for variant, outputs in produced.items():
        for name in expected:
            worst = token_cosines(expected[name], outputs[name], inputs["padding_mask"]).min()
            assert worst >= COSINE_THRESHOLD, (variant, name, worst)
