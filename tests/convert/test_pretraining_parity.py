"""`from_hf` on checkpoints with pretraining heads gives a `PretrainingModel` whose every head
matches `transformers` (MLM logits at the masked positions, NSP / SOP, replaced-token logits)."""

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert.models.pretraining import PretrainingModel
from tests.helpers import (assert_pretraining_outputs_match, hf_config, hf_outputs, masked_positions,
                           random_inputs, save_hf_model)

TOLERANCE = 1e-5

# (family, transformers class, config overrides, heads, transformers output -> our output)
CASES = [
    ("bert", "BertForPreTraining", {}, ("mlm", "nsp"),
     {"prediction_logits": "mlm_logits", "seq_relationship_logits": "nsp_logits"}),
    ("bert", "BertForMaskedLM", dict(hidden_act="gelu_new"), ("mlm",), {"logits": "mlm_logits"}),
    ("roberta", "RobertaForMaskedLM", dict(hidden_act="relu"), ("mlm",), {"logits": "mlm_logits"}),
    ("albert", "AlbertForPreTraining", dict(num_hidden_layers=4, num_hidden_groups=2,
                                            inner_group_num=2), ("mlm", "sop"),
     {"prediction_logits": "mlm_logits", "sop_logits": "sop_logits"}),
    ("albert", "AlbertForMaskedLM", {}, ("mlm",), {"logits": "mlm_logits"}),
    ("electra", "ElectraForPreTraining", dict(embedding_size=16), ("rtd",),
     {"logits": "rtd_logits"}),
    ("electra", "ElectraForMaskedLM", dict(embedding_size=16, hidden_act="relu"), ("mlm",),
     {"logits": "mlm_logits"}),
    ("distilbert", "DistilBertForMaskedLM", {}, ("mlm",), {"logits": "mlm_logits"}),
    ("modernbert", "ModernBertForMaskedLM", {}, ("mlm",), {"logits": "mlm_logits"}),
]


@pytest.mark.parametrize("case", CASES, ids=[case[1] for case in CASES])
def test_heads_match_transformers(case, tmp_path):
    family, model_class, overrides, heads, output_names = case
    reference = save_hf_model(model_class, hf_config(family, **overrides), tmp_path)
    model = kerasbert.convert.from_hf(tmp_path)
    assert isinstance(model, PretrainingModel) and model.heads == heads
    assert set(model.output) == set(output_names.values())
    assert_pretraining_outputs_match(model, reference, output_names, TOLERANCE)


def test_decoder_is_tied_to_the_token_embedding(tmp_path):
    save_hf_model("BertForMaskedLM", hf_config("bert"), tmp_path)
    model = kerasbert.convert.from_hf(tmp_path)
    inputs = random_inputs(model.encoder.config, batch=1, seq=6)
    inputs["masked_lm_positions"] = np.array([[1, 2]], "int32")
    before = model(inputs)["mlm_logits"]
    embedding = model.encoder.token_embedding.embeddings
    embedding.assign(embedding.numpy() * 2.0)
    assert np.abs(model(inputs)["mlm_logits"] - before).max() > 1e-2
    assert sum(1 for weight in model.weights if weight is embedding) == 1


def test_saves_and_reloads_with_its_heads(tmp_path):
    save_hf_model("AlbertForPreTraining", hf_config("albert"), tmp_path / "hf")
    model = kerasbert.convert.from_hf(tmp_path / "hf")
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    inputs = random_inputs(model.encoder.config, batch=2, seq=8)
    inputs["masked_lm_positions"] = masked_positions(inputs, 3, 0)
    for name, value in model(inputs).items():
        np.testing.assert_allclose(reloaded(inputs)[name], value, rtol=0, atol=1e-6)
    assert reloaded.head_layers["mlm"].token_embedding is reloaded.encoder.token_embedding


def test_untied_decoder_is_refused(tmp_path):
    """An old-style checkpoint that stores the decoder weight must have it equal the embeddings."""
    import torch

    reference = save_hf_model("BertForMaskedLM", hf_config("bert"), tmp_path)
    state = {name: tensor.clone() for name, tensor in reference.state_dict().items()}
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"] + 1
    (tmp_path / "model.safetensors").unlink()
    torch.save(state, tmp_path / "pytorch_model.bin")
    with pytest.raises(kerasbert.convert.WeightMismatchError, match="cls.predictions.decoder"):
        kerasbert.convert.from_hf(tmp_path)
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    torch.save(state, tmp_path / "pytorch_model.bin")
    assert isinstance(kerasbert.convert.from_hf(tmp_path), PretrainingModel)
