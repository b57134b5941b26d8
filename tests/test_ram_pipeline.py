"""The library path from raw text to a verified export, every file on `ram://` (TensorFlow's
in-memory file system, the stand-in here for `gs://` and `s3://`), in this one process:
vocabulary -> pretraining records -> pretraining with checkpoints -> fine-tuning -> export."""

import gzip
import itertools
import json
import os
import uuid

import pytest
import tensorflow as tf

import kerasbert
from kerasbert import file_system
from kerasbert.atomic_files import atomic_path
from kerasbert.data import demo
from kerasbert.data.tfrecords import read_pretraining_records, serialize_instances, write_tfrecord
from kerasbert.tokenizers import vocabulary_training
from kerasbert.training.finetune import FinetuneSettings, TaskFiles, finetune
from kerasbert.training.finetuning_tasks import get_finetuning_task
from kerasbert.training.loop import train
from kerasbert.training.pretrained_sources import pretrained_source

SEQUENCE_LENGTH, PREDICTIONS = 32, 5
CORPUS_LINES = 1500
GLOSS_ROWS = {"train": 96, "dev": 48, "test": 16}


def copy_lines(source, destination, count):
    with gzip.open(source, "rt", encoding="utf-8") as text:
        lines = list(itertools.islice(text, count))
    with file_system.open_file(destination, "w") as file:
        file.writelines(lines)


@pytest.mark.slow
def test_raw_text_to_verified_export_on_ram(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = f"ram://pipeline-{uuid.uuid4().hex}"
    corpus = file_system.join(root, "text", "corpus.txt")
    copy_lines(demo.pretraining_corpus_files()[0], corpus, CORPUS_LINES)
    task_dir = file_system.join(root, "gloss")
    files = demo.classification_files()
    for split, path in files.items():
        copy_lines(path, file_system.join(task_dir, f"{split}.tsv"), GLOSS_ROWS[split] + 1)

    # Vocabulary.
    vocabulary_dir = file_system.join(root, "vocab")
    vocabulary_training.train("wordpiece", [corpus], 1500, vocabulary_dir)
    tokenizer = kerasbert.tokenizers.from_hf(vocabulary_dir)
    assert 500 < tokenizer.vocabulary_size() <= 1500

    # Pretraining records: masked instances written to ram:// and read back.
    records = file_system.join(root, "records", "train.tfrecord")
    data_config = kerasbert.data.PretrainingDataConfig(
        objective="nsp", batch_size=16, max_seq_length=SEQUENCE_LENGTH,
        max_predictions_per_seq=PREDICTIONS)
    batches = kerasbert.data.pretraining_dataset([corpus], tokenizer, data_config, seed=1,
                                                 epochs=1)
    assert write_tfrecord(records, (record for batch in batches.take(8)
                                    for record in serialize_instances(batch))) == records
    instances = read_pretraining_records(records, SEQUENCE_LENGTH, PREDICTIONS)
    assert sum(1 for _ in instances) == 128

    # Pretraining, checkpoints on ram://, then the model saved there.
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        vocab_size=tokenizer.vocabulary_size(), num_layers=2, hidden_size=32, num_heads=2,
        intermediate_size=64, max_positions=SEQUENCE_LENGTH)
    with strategy.scope():
        pretraining_model = kerasbert.models.build_pretraining_model(config)
        pretraining_model.compile(optimizer=kerasbert.training.create_optimizer(
            "adamw", 1e-3, num_train_steps=4, num_warmup_steps=1))
    pretrain_dir = file_system.join(root, "pretrain")
    messages = []
    train(pretraining_model, strategy,
          lambda context: instances.repeat().batch(8, drop_remainder=True), pretrain_dir, 4,
          steps_per_loop=2, checkpoint_interval=2, progress=False, log=messages.append)
    assert {"checkpoint", "ckpt-4.index", "train"} <= set(file_system.listdir(pretrain_dir))
    pretrained_path = file_system.join(root, "pretrained.keras")
    with atomic_path(pretrained_path) as temporary:
        pretraining_model.save(temporary)

    # Fine-tuning from the pretrained model on ram://, the run written there.
    finetune_dir = file_system.join(root, "finetune")
    source = pretrained_source(pretrained_path)
    settings = FinetuneSettings(max_seq_length=SEQUENCE_LENGTH, num_train_epochs=1,
                                train_batch_size=16, eval_batch_size=32, learning_rate=1e-3)
    results = finetune(get_finetuning_task("wordnet_gloss"), source.make_encoder, tokenizer,
                       TaskFiles(file_system.join(task_dir, "train.tsv"),
                                 [file_system.join(task_dir, "dev.tsv")],
                                 [file_system.join(task_dir, "test.tsv")]),
                       finetune_dir, settings, strategy, log=messages.append)
    assert 0.0 <= results["accuracy"] <= 1.0
    written = set(file_system.listdir(finetune_dir))
    assert {"model.keras", "eval_results.json", "eval_history.json"} <= written, written
    assert json.loads(file_system.read_text(
        file_system.join(finetune_dir, "eval_results.json")))["accuracy"] == results["accuracy"]

    # Export of the fine-tuning run, built and verified locally, published on ram://.
    export_dir = file_system.join(root, "export")
    report = kerasbert.export.export(finetune_dir, export_dir, formats=("saved_model", "tflite"),
                                     max_seq_length=SEQUENCE_LENGTH)
    assert set(file_system.listdir(export_dir)) >= {"export_report.json", "saved_model",
                                                     "model.tflite"}
    assert sorted(report["artifacts"]) == ["model.tflite", "saved_model"]
    assert all(entry["verified"] for entry in report["artifacts"].values()), report["artifacts"]
    assert json.loads(file_system.read_text(
        file_system.join(export_dir, "export_report.json"))) == json.loads(json.dumps(report))
    tflite_bytes = file_system.read_bytes(file_system.join(export_dir, "model.tflite"))
    assert tflite_bytes[4:8] == b"TFL3"
    reloaded = tf.saved_model.load(file_system.join(export_dir, "saved_model"))
    assert "serving_default" in reloaded.signatures

    file_system.rmtree(root)
    assert not os.path.exists(tmp_path / "ram:"), "a ram:// path was used as a local path"
