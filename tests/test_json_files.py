"""`kerasbert.json_files`: a damaged JSON file kerasbert reads is an error naming the file, and a
missing field is named with its place; what the binaries read goes through it."""

import re

import pytest

from kerasbert.data.manifest import read_manifest
from kerasbert.json_files import JsonFileError, MissingFieldError, read_json_file
from kerasbert.training.pretrained_sources import pretrained_source


def test_kinds_and_fields_are_named(tmp_path):
    path = tmp_path / "eval_history.json"
    path.write_text('[{"epoch": 1, "metrics": {"accuracy": 0.5}}]')
    history = read_json_file(path, "a history", expected=list)
    assert history == [{"epoch": 1, "metrics": {"accuracy": 0.5}}]
    with pytest.raises(MissingFieldError, match=re.escape(f"{path}: no field '[0].metrics.f1'")):
        history[0]["metrics"]["f1"]
    assert history[0]["metrics"].get("f1") is None and "f1" not in history[0]["metrics"]
    with pytest.raises(KeyError):  # also a KeyError, for code that expects one
        history[0]["loss"]
    with pytest.raises(JsonFileError, match="holds an array, not an object"):
        read_json_file(path, "a report")
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(JsonFileError, match="not valid JSON"):
        read_json_file(path)
    number = tmp_path / "count.json"
    number.write_text("3")
    assert read_json_file(number, expected=None) == 3
    with pytest.raises(JsonFileError, match=re.escape(f"{number} is not a config: it holds a "
                                                      "number, not an object")):
        read_json_file(number, "a config")


def test_a_manifest_without_a_field_names_it(tmp_path):
    path = tmp_path / "train.tfrecord.manifest.json"
    path.write_text('{"version": 1, "shards": [{"path": "train.tfrecord"}]}')
    manifest = read_manifest(path)
    with pytest.raises(ValueError, match=re.escape(f"{path}: no field 'shards[0].sha256'")):
        manifest["shards"][0]["sha256"]
    path.write_text("[1]")
    with pytest.raises(ValueError, match="is not a data set manifest: it holds an array"):
        read_manifest(path)


def test_a_damaged_kerasbert_model_json_is_named(tmp_path):
    (tmp_path / "kerasbert_model.json").write_text('{"heads": ["mlm"], "tokenizer": null}')
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    (tmp_path / "ckpt-1.index").write_bytes(b"")
    source = pretrained_source(tmp_path)
    with pytest.raises(ValueError, match=re.escape("kerasbert_model.json: no field "
                                                   "'encoder_config'")):
        source.make_encoder()
    (tmp_path / "kerasbert_model.json").write_text("[]")
    with pytest.raises(ValueError, match="is not a kerasbert_model.json: it holds an array"):
        pretrained_source(tmp_path)
