"""`from_hf` refuses checkpoints that do not fit, and says exactly what does not fit."""

import json
import re

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import kerasbert
from kerasbert.convert import (CheckpointFileError, HFConfigError, UnsupportedArchitectureError,
                               WeightMismatchError)
from tests.helpers import hf_config, save_hf_model


@pytest.fixture
def bert_dir(tmp_path):
    save_hf_model("BertModel", hf_config("bert"), tmp_path)
    return tmp_path


def _rewrite_weights(directory, change):
    path = directory / "model.safetensors"
    tensors = dict(load_file(path))
    change(tensors)
    save_file(tensors, path)


def test_missing_tensor_is_named(bert_dir):
    _rewrite_weights(bert_dir, lambda t: t.pop("encoder.layer.1.output.dense.bias"))
    with pytest.raises(WeightMismatchError, match=r"missing from the checkpoint.*encoder\.layer\.1\.output\.dense\.bias"):
        kerasbert.convert.from_hf(bert_dir)


def test_unexpected_tensor_is_named(bert_dir):
    _rewrite_weights(bert_dir, lambda t: t.update({"encoder.layer.2.extra.weight": np.zeros(3, "float32")}))
    with pytest.raises(WeightMismatchError, match=r"unexpected.*encoder\.layer\.2\.extra\.weight"):
        kerasbert.convert.from_hf(bert_dir)


def test_wrong_shape_is_named(bert_dir):
    def widen(tensors):
        tensors["embeddings.word_embeddings.weight"] = np.zeros((121, 32), "float32")

    _rewrite_weights(bert_dir, widen)
    with pytest.raises(WeightMismatchError, match=r"wrong shapes.*embeddings\.word_embeddings\.weight \(121, 32\)"):
        kerasbert.convert.from_hf(bert_dir)


def test_a_failed_load_changes_no_variable(bert_dir):
    from kerasbert.convert.checkpoint_files import read_state_dict
    from kerasbert.convert.hf_names import encoder_name_map
    from kerasbert.convert.weights import assign_weights

    encoder = kerasbert.convert.from_hf(bert_dir)
    before = [w.copy() for w in encoder.get_weights()]
    state = {name: value + 1.0 for name, value in read_state_dict(bert_dir).items()}
    state.pop("pooler.dense.bias")
    with pytest.raises(WeightMismatchError, match="pooler.dense.bias"):
        assign_weights(encoder, state, encoder_name_map(encoder.config))
    for old, new in zip(before, encoder.get_weights()):
        np.testing.assert_array_equal(old, new)


def test_every_problem_is_listed_at_once(bert_dir):
    def break_three_ways(tensors):
        tensors.pop("pooler.dense.weight")
        tensors["surprise"] = np.zeros(1, "float32")
        tensors["embeddings.LayerNorm.weight"] = np.zeros(5, "float32")

    _rewrite_weights(bert_dir, break_three_ways)
    with pytest.raises(WeightMismatchError) as error:
        kerasbert.convert.from_hf(bert_dir)
    message = str(error.value)
    assert "pooler.dense.weight" in message and "surprise" in message
    assert "embeddings.LayerNorm.weight (5,)" in message


def test_legacy_layer_norm_names_are_accepted(bert_dir):
    def rename(tensors):
        for name in [n for n in tensors if "LayerNorm" in n]:
            suffix = "gamma" if name.endswith("weight") else "beta"
            tensors[name.rsplit(".", 1)[0] + "." + suffix] = tensors.pop(name)

    _rewrite_weights(bert_dir, rename)
    encoder = kerasbert.convert.from_hf(bert_dir)
    assert encoder.config.family == "bert"


def test_no_weights_file(tmp_path):
    hf_config("bert").save_pretrained(tmp_path)
    with pytest.raises(CheckpointFileError, match="model.safetensors"):
        kerasbert.convert.from_hf(tmp_path)


def test_no_config(tmp_path):
    with pytest.raises(HFConfigError, match="config.json"):
        kerasbert.convert.from_hf(tmp_path)


@pytest.mark.parametrize("field,value,error", [
    ("model_type", "deberta", HFConfigError),
    ("position_embedding_type", "relative_key", HFConfigError),
    ("architectures", ["RobertaModel"], UnsupportedArchitectureError),
    ("num_attention_heads", 5, HFConfigError),
])
def test_config_that_does_not_fit_is_named(bert_dir, field, value, error):
    config = json.loads((bert_dir / "config.json").read_text())
    config[field] = value
    (bert_dir / "config.json").write_text(json.dumps(config))
    shown = value[0] if isinstance(value, list) else value
    with pytest.raises(error, match=str(shown)):
        kerasbert.convert.from_hf(bert_dir)


@pytest.mark.parametrize("text,kind", [("[]", "an array"), ("3", "a number"), ('"bert"', "a string"),
                                       ("null", "null"), ("{", "not valid JSON")])
def test_config_that_is_not_a_json_object_is_named(bert_dir, text, kind):
    (bert_dir / "config.json").write_text(text)
    path = re.escape(str(bert_dir / "config.json"))
    with pytest.raises(HFConfigError, match=f"{path} is not a Hugging Face config: (it holds )?"
                                            f"{kind}"):
        kerasbert.convert.from_hf(bert_dir)


def test_corrupt_safetensors(bert_dir):
    (bert_dir / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointFileError, match="model.safetensors"):
        kerasbert.convert.from_hf(bert_dir)


def test_pickle_with_arbitrary_objects_is_refused(tmp_path):
    import torch

    hf_config("bert").save_pretrained(tmp_path)
    torch.save({"embeddings.word_embeddings.weight": torch.zeros(2), "payload": object()},
               tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointFileError, match="weights_only=True"):
        kerasbert.convert.from_hf(tmp_path)


@pytest.mark.parametrize("shard", ["../elsewhere/model.safetensors",
                                   "{elsewhere}/model.safetensors",
                                   "sub/../../elsewhere/model.safetensors",
                                   "ram://elsewhere/model.safetensors", "."])
def test_index_shards_outside_the_folder_are_refused(tmp_path, shard):
    """A `*.index.json` is data: a shard name that is absolute or leaves the model folder is
    refused (today's file there would otherwise be read), naming the index and the shard."""
    model_dir, elsewhere = tmp_path / "model", tmp_path / "elsewhere"
    save_hf_model("BertModel", hf_config("bert"), model_dir)
    elsewhere.mkdir()
    (model_dir / "model.safetensors").rename(elsewhere / "model.safetensors")
    shard = shard.format(elsewhere=elsewhere)
    names = load_file(elsewhere / "model.safetensors")
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {name: shard for name in names}}))
    with pytest.raises(CheckpointFileError) as raised:
        kerasbert.convert.from_hf(model_dir)
    message = str(raised.value)
    assert message.startswith(f"{model_dir / 'model.safetensors.index.json'}: weight_map names "
                              f"shard {shard!r}, which is not inside the checkpoint folder")
    assert "\n" not in message


def test_index_shards_in_a_subfolder_are_read(bert_dir):
    (bert_dir / "shards").mkdir()
    (bert_dir / "model.safetensors").rename(bert_dir / "shards" / "model.safetensors")
    names = load_file(bert_dir / "shards" / "model.safetensors")
    (bert_dir / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {name: "shards/model.safetensors" for name in names}}))
    assert kerasbert.convert.from_hf(bert_dir).count_params() > 0
