"""A classifier built and saved under `mixed_bfloat16` (what `kerasbert-finetune
--mixed_precision=mixed_bfloat16` writes) exports: the export rebuilds it in float32 with its
weights, so its TFLite file computes what a float32 twin with the same weights computes."""

import keras
import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

import kerasbert
from tests.helpers import TINY_CONFIGS, random_inputs


def classifier():
    return kerasbert.models.build_task_model(kerasbert.models.build_encoder(TINY_CONFIGS["bert"]),
                                             "sequence_classification", num_labels=3)


@pytest.mark.slow
def test_a_bfloat16_classifier_exports_to_tflite_as_its_float32_twin(tmp_path):
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(3)
        mixed = classifier()
    finally:
        keras.config.set_dtype_policy("float32")
    mixed.save(tmp_path / "model.keras")
    twin = classifier()
    twin.set_weights(mixed.get_weights())
    inputs = random_inputs(TINY_CONFIGS["bert"], batch=2, seq=16)
    expected = np.asarray(twin(inputs)["logits"])
    scale = np.abs(expected).max()
    # The bfloat16 model itself computes something else (about 1% off), so the file is not its
    # graph.
    assert np.abs(np.asarray(mixed(inputs)["logits"], np.float32) - expected).max() > 1e-3 * scale

    report = kerasbert.export.export(tmp_path / "model.keras", tmp_path / "out",
                                     formats=("tflite",), max_seq_length=16)
    assert report["artifacts"]["model.tflite"]["verified"]
    runner = Interpreter(model_path=str(tmp_path / "out" / "model.tflite")
                         ).get_signature_runner("serving_default")
    np.testing.assert_allclose(runner(**inputs)["logits"], expected, rtol=0, atol=1e-5 * scale)
