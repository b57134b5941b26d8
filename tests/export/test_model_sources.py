"""What `--model` takes besides Hugging Face folders: a `kerasbert-pretrain` directory (here an
ELECTRA run, which exports its discriminator) and a `kerasbert-finetune` directory."""

import json

import keras
import numpy as np
import onnxruntime
import pytest
import tensorflow as tf

import kerasbert
from kerasbert.export.model_sources import load_export_model
from kerasbert.models import ElectraPretrainer, generator_config
from kerasbert.training.loop import model_variables
from kerasbert.training.pretrained_sources import PRETRAINED_MODEL_FILE, pretraining_description
from tests.helpers import TINY_CONFIGS, random_inputs


@pytest.fixture(scope="module")
def electra_run(tmp_path_factory):
    keras.utils.set_random_seed(5)
    config = TINY_CONFIGS["electra"]
    pretrainer = ElectraPretrainer(config, generator_config(config, 0.5))
    run_dir = tmp_path_factory.mktemp("electra_run")
    (run_dir / PRETRAINED_MODEL_FILE).write_text(json.dumps(
        pretraining_description(config, None, generator_ratio=0.5)))
    tf.train.Checkpoint(model_variables=model_variables(pretrainer)).save(str(run_dir / "ckpt"))
    return run_dir, pretrainer


@pytest.mark.slow
def test_a_pretraining_run_exports_its_discriminator(electra_run, tmp_path):
    run_dir, pretrainer = electra_run
    report = kerasbert.export.export(run_dir, tmp_path / "out", formats=("onnx",),
                                     max_seq_length=32)
    assert report["model"]["outputs"] == ["rtd_logits"] and report["model"]["family"] == "electra"
    inputs = random_inputs(TINY_CONFIGS["electra"], batch=2, seq=12)
    session = onnxruntime.InferenceSession(str(tmp_path / "out" / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    (produced,) = session.run(["rtd_logits"], inputs)
    # The pretrainer's own discriminator and trained replaced-token head, not a fresh head.
    expected = pretrainer.get_layer("rtd_head")(pretrainer.discriminator(inputs)["sequence_output"])
    np.testing.assert_allclose(produced, expected, atol=1e-4)


def test_a_finetune_directory_exports_its_model_keras(tmp_path):
    model = kerasbert.models.build_task_model(kerasbert.models.build_encoder(TINY_CONFIGS["bert"]),
                                              "question_answering")
    model.save(tmp_path / "model.keras")
    loaded, tokenizer = load_export_model(tmp_path)
    assert sorted(loaded.output) == ["end_logits", "start_logits"] and tokenizer is None


def test_a_directory_that_is_no_model_is_named(tmp_path):
    with pytest.raises(kerasbert.export.ExportError, match=str(tmp_path)):
        load_export_model(tmp_path)
