"""`kerasbert-convert`: a Google TF1 checkpoint to a Hugging Face folder, and a Hugging Face
classifier through `.keras` back to Hugging Face; `transformers` loads what it writes and gives
the original model's outputs."""

import numpy as np
import pytest
import transformers

from kerasbert.convert import encoder_config_from_hf
from kerasbert.convert.conversions import ConversionError, convert, source_format
from tests.convert.test_from_google import (bert_variables, google_config, write_checkpoint,
                                            write_json)
from tests.binaries import run_binary
from tests.helpers import hf_config, hf_outputs, random_inputs, save_hf_model

TOLERANCE = 1e-5


def _run(*flags):
    return run_binary("convert", *flags)


def _load(directory, class_name):
    model, info = getattr(transformers, class_name).from_pretrained(
        directory, output_loading_info=True)
    assert not any(info.values()), info  # no missing, unexpected or mismatched keys
    return model.eval()


def test_google_checkpoint_to_hugging_face(tmp_path):
    config = hf_config("bert")
    reference = save_hf_model("BertForPreTraining", config, tmp_path / "reference")
    (tmp_path / "google").mkdir()
    write_json(tmp_path / "google" / "bert_config.json", google_config(config))
    prefix = write_checkpoint(tmp_path / "google" / "bert_model.ckpt", bert_variables(reference))
    assert source_format(prefix) == "google"
    convert(prefix, str(tmp_path / "hf"))
    converted = _load(tmp_path / "hf", "BertForPreTraining")
    inputs = random_inputs(config_for(config), batch=2, seq=9)
    expected, produced = hf_outputs(reference, inputs), hf_outputs(converted, inputs)
    for name in ("prediction_logits", "seq_relationship_logits"):
        np.testing.assert_allclose(getattr(produced, name), getattr(expected, name),
                                   atol=TOLERANCE, rtol=0, err_msg=name)


def config_for(hf):
    """The kerasbert config of a `transformers` config (what `random_inputs` reads)."""
    return encoder_config_from_hf(hf.to_dict())


@pytest.mark.slow
def test_hugging_face_to_keras_and_back(tmp_path):
    config = hf_config("bert", num_labels=3)
    reference = save_hf_model("BertForSequenceClassification", config, tmp_path / "hf")
    keras_file = tmp_path / "gloss.keras"
    first = _run(f"--input={tmp_path / 'hf'}", f"--output={keras_file}")
    assert first.returncode == 0, first.stderr
    assert "Wrote" in first.stdout and keras_file.is_file()
    second = _run(f"--input={keras_file}", f"--output={tmp_path / 'back'}")
    assert second.returncode == 0, second.stderr
    converted = _load(tmp_path / "back", "BertForSequenceClassification")
    inputs = random_inputs(config_for(config), batch=3, seq=7)
    np.testing.assert_allclose(hf_outputs(converted, inputs).logits,
                               hf_outputs(reference, inputs).logits, atol=TOLERANCE, rtol=0)
    assert converted.config.id2label == reference.config.id2label


@pytest.mark.slow
def test_errors_are_one_line_and_write_nothing(tmp_path):
    missing = _run(f"--input={tmp_path / 'nothing'}", f"--output={tmp_path / 'out'}")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines()[-1].startswith("kerasbert-convert: error: ")
    assert "nothing" in missing.stderr and not (tmp_path / "out").exists()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("keep me")
    with pytest.raises(ConversionError, match="taken: already exists"):
        convert(str(tmp_path / "nothing"), str(tmp_path / "taken"))
    assert (tmp_path / "taken" / "file").read_text() == "keep me"
