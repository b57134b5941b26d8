"""Conversions with their folders on `ram://` (TensorFlow's in-memory file system, standing in
for `gs://` and `s3://`): `from_hf`, `kerasbert.tokenizers.from_hf`, `from_google` and
`from_keras_hub` read a remote folder into exactly what they read from the same local one,
`to_hf` writes a remote folder that reads back the same, and `kerasbert-convert` runs both ways
with input and output on `ram://` without leaving a local folder named `ram:`."""

import json
import os
import uuid

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert import file_system
from kerasbert.data import demo
from kerasbert.models.tasks import encoder_of
from tests.convert.test_from_google import (bert_variables, google_config, write_checkpoint,
                                            write_json)
from tests.helpers import hf_config, random_inputs, save_hf_model
from tests.ram_runs import run_on_ram

TEXTS = ["Héllo wörld, naïve café!", "The quick brown fox jumps over the lazy dog.", "日本語 ok"]


def _on_ram(local):
    """A copy of the local file or folder `local` under a fresh `ram://` folder."""
    remote = f"ram://convert-{uuid.uuid4().hex[:8]}/{os.path.basename(os.fspath(local))}"
    file_system.makedirs(file_system.dirname(remote))
    if os.path.isdir(local):
        file_system.copy_tree(os.fspath(local), remote)
    else:
        file_system.copy(os.fspath(local), remote)
    return remote


def _assert_same_outputs(first, second, seq=9):
    config = encoder_of(first).config
    inputs = random_inputs(config, batch=3, seq=seq)
    if "masked_lm_positions" in first.input:
        inputs["masked_lm_positions"] = np.array([[1, 2, 3]] * 3, dtype="int32")
    expected, produced = first(inputs), second(inputs)
    assert sorted(expected) == sorted(produced)
    for name in expected:
        np.testing.assert_array_equal(np.asarray(produced[name]), np.asarray(expected[name]),
                                      err_msg=name)


@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory):
    """Local Hugging Face folders: a classifier (one safetensors file, label names) and a
    bare encoder in three safetensors shards with their index."""
    root = tmp_path_factory.mktemp("hf")
    save_hf_model("BertForSequenceClassification",
                  hf_config("bert", num_labels=3, id2label={0: "neg", 1: "mid", 2: "pos"}),
                  root / "classifier")
    save_hf_model("BertModel", hf_config("bert"), root / "sharded", max_shard_size="20KB")
    assert (root / "sharded" / "model.safetensors.index.json").is_file()
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", ["classifier", "sharded"])
def test_from_hf_reads_a_remote_folder_as_the_local_one(hf_folders, name):
    local = hf_folders / name
    remote = _on_ram(local)
    expected, produced = kerasbert.convert.from_hf(local), kerasbert.convert.from_hf(remote)
    assert getattr(produced, "id2label", None) == getattr(expected, "id2label", None)
    _assert_same_outputs(expected, produced)


def test_remote_index_shards_are_confined_to_the_folder(hf_folders):
    remote = _on_ram(hf_folders / "sharded")
    index = file_system.join(remote, "model.safetensors.index.json")
    values = json.loads(file_system.read_text(index))
    values["weight_map"] = {name: "../elsewhere.safetensors" for name in values["weight_map"]}
    with file_system.open_file(index, "w") as file:
        file.write(json.dumps(values))
    with pytest.raises(kerasbert.convert.CheckpointFileError,
                       match=f"^{index}: weight_map names shard '../elsewhere.safetensors', "
                             "which is not inside the checkpoint folder"):
        kerasbert.convert.from_hf(remote)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["wordpiece", "byte_pair", "sentence_piece"])
def test_tokenizer_from_hf_reads_a_remote_folder_as_the_local_one(kind):
    local = demo.vocabulary_dir(kind)
    expected = kerasbert.tokenizers.from_hf(local)
    produced = kerasbert.tokenizers.from_hf(_on_ram(local))
    assert type(produced) is type(expected)
    assert produced.tokenize(TEXTS).to_list() == expected.tokenize(TEXTS).to_list()
    for name, value in expected(TEXTS, TEXTS[::-1], max_length=24).items():
        np.testing.assert_array_equal(produced(TEXTS, TEXTS[::-1], max_length=24)[name], value)


def test_to_hf_writes_a_remote_folder_that_reads_back_the_same(hf_folders):
    model = kerasbert.convert.from_hf(hf_folders / "classifier")
    tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    model = kerasbert.models.build_task_model(
        model.encoder.config.replace(vocab_size=tokenizer.vocabulary_size()),
        "sequence_classification", num_labels=3, id2label=model.id2label)
    target = f"ram://to-hf-{uuid.uuid4().hex[:8]}/out/gloss"
    assert kerasbert.convert.to_hf(model, target, tokenizer=tokenizer) == target
    assert file_system.listdir(file_system.dirname(target)) == ["gloss"]  # no temporary left
    assert file_system.listdir(target) == ["config.json", "model.safetensors",
                                           "special_tokens_map.json", "tokenizer_config.json",
                                           "vocab.txt"]
    back = kerasbert.convert.from_hf(target)
    assert back.id2label == model.id2label
    _assert_same_outputs(model, back)
    assert kerasbert.tokenizers.from_hf(target).tokenize(TEXTS).to_list() == \
        tokenizer.tokenize(TEXTS).to_list()
    with pytest.raises(FileExistsError, match=f"{target} exists and is not empty"):
        kerasbert.convert.to_hf(model, target)


def test_from_google_reads_a_remote_checkpoint_as_the_local_one(tmp_path):
    config = hf_config("bert")
    reference = save_hf_model("BertForPreTraining", config, tmp_path / "reference")
    folder = tmp_path / "google"
    folder.mkdir()
    write_json(folder / "bert_config.json", google_config(config))
    write_checkpoint(folder / "bert_model.ckpt", bert_variables(reference))
    remote = _on_ram(folder)
    expected = kerasbert.convert.from_google(str(folder / "bert_model.ckpt"))
    # The config is found beside the remote prefix, as beside a local one.
    produced = kerasbert.convert.from_google(file_system.join(remote, "bert_model.ckpt"))
    _assert_same_outputs(expected, produced)


def test_from_keras_hub_reads_a_remote_preset_as_the_local_one(tmp_path):
    import keras_hub

    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt"), lowercase=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=2, num_heads=2, hidden_dim=32,
        intermediate_dim=37, max_sequence_length=64)
    backbone.save_to_preset(str(tmp_path / "preset"))
    tokenizer.save_to_preset(str(tmp_path / "preset"))
    expected, expected_tokenizer = kerasbert.convert.from_keras_hub(tmp_path / "preset",
                                                                     with_tokenizer=True)
    produced, produced_tokenizer = kerasbert.convert.from_keras_hub(
        _on_ram(tmp_path / "preset"), with_tokenizer=True)
    _assert_same_outputs(expected, produced)
    assert produced_tokenizer.tokenize(TEXTS).to_list() == \
        expected_tokenizer.tokenize(TEXTS).to_list()


@pytest.mark.slow
def test_convert_binary_both_ways_on_ram(hf_folders, tmp_path):
    """Hugging Face folder -> `.keras` file and `.keras` file -> Hugging Face folder, input and
    output on `ram://` each time."""
    (tmp_path / "to-keras").mkdir()
    (tmp_path / "to-hf").mkdir()
    to_keras = run_on_ram("convert", ["--input={ram}/hf", "--output={ram}/out/gloss.keras"],
                          tmp_path / "to-keras", inputs={"hf": hf_folders / "classifier"})
    assert to_keras.returncode == 0, to_keras.stderr[-3000:]
    assert not to_keras.local_ram_folder_made
    assert os.listdir(to_keras.path("out")) == ["gloss.keras"]
    expected = kerasbert.convert.from_hf(hf_folders / "classifier")
    _assert_same_outputs(expected, keras.models.load_model(to_keras.path("out", "gloss.keras")))

    to_hf = run_on_ram("convert", ["--input={ram}/gloss.keras", "--output={ram}/out/gloss-hf"],
                       tmp_path / "to-hf",
                       inputs={"gloss.keras": to_keras.path("out", "gloss.keras")})
    assert to_hf.returncode == 0, to_hf.stderr[-3000:]
    assert not to_hf.local_ram_folder_made
    assert os.listdir(to_hf.path("out")) == ["gloss-hf"]
    assert sorted(os.listdir(to_hf.path("out", "gloss-hf"))) == ["config.json",
                                                                 "model.safetensors"]
    back = kerasbert.convert.from_hf(to_hf.path("out", "gloss-hf"))
    assert back.id2label == expected.id2label
    _assert_same_outputs(expected, back)
