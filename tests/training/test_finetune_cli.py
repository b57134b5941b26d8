"""`kerasbert-finetune` end to end on a slice of the shipped WordNet gloss set (tiny model).

The main run (`trained`) fine-tunes the session's pretrained tiny BERT (`pretrained_tiny_bert_file`,
tests/conftest.py) on the first 4,000 training glosses, 2 epochs at 1e-3, and must beat always
answering the most frequent training label on the first 160 dev glosses by 0.07 in dev
accuracy; a random encoder, or 480 glosses, stayed at or near that baseline. The accuracy it
reaches is printed (`-s`) and given in BUILD.md ("Learning proofs"). The other runs start from
a random tiny encoder and check flags and errors. The binary runs in this process
(`tests.binaries.run_binary`), except the run that is killed.
"""

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import sklearn.dummy
import sklearn.metrics
import tensorflow as tf

import kerasbert
from kerasbert.data import demo
from kerasbert.training.glue_metrics import is_degenerate
from kerasbert.training.pretrained_sources import PretrainedSourceError, pretrained_source
from tests.binaries import run_binary

pytestmark = pytest.mark.slow

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
VOCAB = os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt")
SIZES = {"train": 4000, "dev": 160, "test": 60}
# Runs that only check flags train on the first glosses only.
SMALL_TRAIN = "--max_train_examples=480"


def labelled_rows(split):
    with gzip.open(demo.classification_files()[split], "rt", encoding="utf-8") as file:
        return file.read().splitlines()[1:SIZES[split] + 1]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A data dir with the task's official (gzip) file names, and a tiny encoder as `.keras`."""
    root = tmp_path_factory.mktemp("finetune")
    data_dir = root / "data"
    data_dir.mkdir()
    for split, path in demo.classification_files().items():
        with gzip.open(data_dir / os.path.basename(path), "wt", encoding="utf-8") as file:
            file.write("label\ttext\n" + "\n".join(labelled_rows(split)) + "\n")
    keras.utils.set_random_seed(0)
    encoder = kerasbert.zoo.build("bert_tiny_uncased", vocab_size=len(open(VOCAB).readlines()),
                                  num_layers=2, hidden_size=64, num_heads=2,
                                  intermediate_size=128)
    encoder.save(root / "encoder.keras")
    return root


def finetune_command(workspace, model_dir, *flags, init_from=None):
    """The module's fine-tuning flags; `init_from` defaults to the random tiny encoder."""
    return ["finetune", "--task=wordnet_gloss", f"--data_dir={workspace / 'data'}",
            f"--init_from={init_from or workspace / 'encoder.keras'}",
            f"--vocab_file={VOCAB}", f"--model_dir={model_dir}", "--max_seq_length=32",
            "--train_batch_size=32", "--eval_batch_size=64", "--num_train_epochs=2",
            "--learning_rate=2e-3", *flags]


def main_run_command(workspace, model_dir, pretrained, *flags):
    """The main run's flags: the pretrained tiny BERT, all training glosses, 1e-3."""
    return finetune_command(workspace, model_dir, "--learning_rate=1e-3", *flags,
                            init_from=pretrained)


def run(command, check=True):
    """Run `command` (a binary's module in `kerasbert.cli`, then its flags) in this process."""
    result = run_binary(*command)
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}:\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-3000:]}")
    return result


def read_json(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def written_predictions(model_dir):
    with open(os.path.join(model_dir, "dev_predictions.tsv"), encoding="utf-8") as file:
        lines = file.read().splitlines()
    assert lines[0] == "index\tprediction"
    return [line.split("\t") for line in lines[1:]]


@pytest.fixture(scope="module")
def trained(workspace, pretrained_tiny_bert_file):
    model_dir = workspace / "run"
    run(main_run_command(workspace, model_dir, pretrained_tiny_bert_file))
    return model_dir


def test_writes_the_contract_files(trained):
    for name in ("eval_results.json", "dev_predictions.tsv", "model.keras", "eval_history.json",
                 "test_predictions.tsv", "checkpoint"):
        assert (trained / name).is_file(), name
    assert any((trained / "train").iterdir()) and any((trained / "eval").iterdir())
    history = read_json(trained / "eval_history.json")
    assert [entry["epoch"] for entry in history] == [1, 2]
    best = max(history, key=lambda entry: entry["score"])
    results = read_json(trained / "eval_results.json")
    assert results["epoch"] == best["epoch"] and results["accuracy"] == best["accuracy"]
    assert len(open(trained / "test_predictions.tsv").read().splitlines()) == SIZES["test"] + 1


def test_reported_metrics_equal_scikit_learn_on_the_written_predictions(trained):
    labels = demo.classification_labels()
    gold = [row.split("\t")[0] for row in labelled_rows("dev")]
    predicted = [label for _, label in written_predictions(trained)]
    assert len(predicted) == len(gold) and set(predicted) <= set(labels)
    results = read_json(trained / "eval_results.json")
    assert results["accuracy"] == pytest.approx(sklearn.metrics.accuracy_score(gold, predicted),
                                                abs=1e-12)
    assert results["matthews_correlation"] == pytest.approx(
        sklearn.metrics.matthews_corrcoef(gold, predicted), abs=1e-12)
    # It learned: well above always answering the most frequent training label,
    # and not one label for every gloss (that would make MCC 0 trivially).
    train_labels = [row.split("\t")[0] for row in labelled_rows("train")]
    majority = sklearn.dummy.DummyClassifier(strategy="most_frequent").fit(
        np.zeros((len(train_labels), 1)), train_labels).score(np.zeros((len(gold), 1)), gold)
    print(f"kerasbert-finetune from the tiny BERT: dev accuracy {results['accuracy']:.4f}, MCC "
          f"{results['matthews_correlation']:.4f}; most frequent training label {majority:.4f}")
    assert results["accuracy"] > majority + 0.07, (results, majority)
    assert not is_degenerate(predicted)


def test_the_best_model_reloads_with_its_label_names_and_gives_the_written_predictions(trained):
    model = keras.models.load_model(trained / "model.keras")
    assert isinstance(model, kerasbert.models.TaskModel)
    assert [model.id2label[i] for i in range(45)] == demo.classification_labels()
    tokenizer = kerasbert.tokenizers.load_tokenizer(VOCAB) if hasattr(
        kerasbert.tokenizers, "load_tokenizer") else \
        kerasbert.tokenizers.vocabulary_files.load_tokenizer(VOCAB)
    texts = [row.split("\t")[1] for row in labelled_rows("dev")]
    logits = model.predict(tokenizer(texts, max_length=32), verbose=0)["logits"]
    assert [model.id2label[i] for i in np.argmax(logits, axis=1)] == [
        label for _, label in written_predictions(trained)]


def test_eval_and_predict_modes_reproduce_the_best_epoch(trained, tmp_path):
    model_dir = tmp_path / "eval"
    model_dir.mkdir()
    shutil.copy(trained / "model.keras", model_dir / "model.keras")
    workspace = trained.parent
    run(finetune_command(workspace, model_dir, "--mode=eval"))
    ours, best = read_json(model_dir / "eval_results.json"), read_json(
        trained / "eval_results.json")
    assert ours["accuracy"] == pytest.approx(best["accuracy"], abs=1e-12)
    assert ours["matthews_correlation"] == pytest.approx(best["matthews_correlation"], abs=1e-12)
    run(finetune_command(workspace, model_dir, "--mode=predict"))
    assert (model_dir / "test_predictions.tsv").read_text() == (
        trained / "test_predictions.tsv").read_text()


def test_resumes_after_a_kill_bit_for_bit(workspace, trained, pretrained_tiny_bert_file):
    """Killed (SIGKILL) inside the first epoch and rerun, the run ends where the main run ends:
    every tensor of the final checkpoint, the best model's weights and every result file."""
    model_dir = workspace / "killed"
    command = main_run_command(workspace, model_dir, pretrained_tiny_bert_file,
                               "--checkpoint_interval=5")
    module, *flags = command
    process = subprocess.Popen([sys.executable, "-m", f"kerasbert.cli.{module}", *flags],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.time() + 600
    while not (model_dir / "ckpt-10.index").exists() and process.poll() is None:
        assert time.time() < deadline, "no checkpoint within 10 minutes"
        time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (model_dir / "eval_history.json").exists(), "killed before the first evaluation"
    result = run(command)
    assert "Restored" in result.stdout
    final = f"ckpt-{read_json(trained / 'eval_history.json')[-1]['step']}"
    resumed, uninterrupted = (checkpoint_values(path / final) for path in (model_dir, trained))
    assert resumed.keys() == uninterrupted.keys() and len(resumed) > 50
    for name in uninterrupted:
        if not name.startswith("save_counter"):  # counts the saves: --checkpoint_interval's
            np.testing.assert_array_equal(resumed[name], uninterrupted[name], err_msg=name)
    for ours, theirs in zip(*(keras.models.load_model(path / "model.keras").get_weights()
                              for path in (model_dir, trained))):
        np.testing.assert_array_equal(ours, theirs)
    written = sorted(name for name in os.listdir(trained) if (trained / name).is_file()
                     and not name.startswith("ckpt-") and name not in ("checkpoint", "model.keras"))
    assert {"eval_history.json", "eval_results.json", "dev_predictions.tsv",
            "test_predictions.tsv"} <= set(written)
    for name in written:
        assert (model_dir / name).read_bytes() == (trained / name).read_bytes(), name


def test_a_rerun_with_other_values_is_refused_changing_nothing(trained, pretrained_tiny_bert_file):
    recorded = read_json(trained / "kerasbert_run.json")
    assert recorded["program"] == "kerasbert-finetune"
    assert recorded["flags"]["learning_rate"] == 1e-3 and recorded["flags"]["task"] == "wordnet_gloss"
    assert recorded["model"]["num_labels"] == 45 and recorded["model"]["encoder_config"]
    before = {name: (trained / name).read_bytes() for name in os.listdir(trained)
              if (trained / name).is_file()}
    workspace = trained.parent
    result = run(main_run_command(workspace, trained, pretrained_tiny_bert_file,
                                  "--learning_rate=2e-3", "--num_train_epochs=3"), check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("kerasbert-finetune: error: ") and "--overwrite" in line
    assert "--learning_rate: recorded 0.001, given 0.002" in line
    assert "--num_train_epochs: recorded 2.0, given 3.0" in line
    assert {name: (trained / name).read_bytes() for name in os.listdir(trained)
            if (trained / name).is_file()} == before


def test_a_rerun_on_a_replaced_train_file_is_refused_naming_it(trained,
                                                              pretrained_tiny_bert_file):
    """The same flags, but the training file at the same path holds other examples: the run
    record's fingerprint of it differs, and the rerun stops before it writes anything."""
    workspace = trained.parent
    train_file = next((workspace / "data").glob("*train*"))
    original = train_file.read_bytes()
    before = {name: (trained / name).read_bytes() for name in os.listdir(trained)
              if (trained / name).is_file()}
    try:
        with gzip.open(train_file, "wt", encoding="utf-8") as file:
            file.write("label\ttext\n" + "\n".join(labelled_rows("train")[::-1]) + "\n")
        result = run(main_run_command(workspace, trained, pretrained_tiny_bert_file),
                     check=False)
    finally:
        train_file.write_bytes(original)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("kerasbert-finetune: error: ") and "--overwrite" in line
    assert f"{train_file}: its " in line  # its size or its content differs
    assert {name: (trained / name).read_bytes() for name in os.listdir(trained)
            if (trained / name).is_file()} == before


def checkpoint_values(prefix):
    """{name: array} of every numeric tensor of the checkpoint `prefix`."""
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name, dtype in
            reader.get_variable_to_dtype_map().items() if dtype.is_floating or dtype.is_integer}


def test_several_seeds_report_median_and_spread_with_layerwise_decay(workspace, tmp_path):
    model_dir = tmp_path / "seeds"
    run(finetune_command(workspace, model_dir, "--num_seeds=3", "--num_train_epochs=1",
                         "--layerwise_lr_decay=0.8", SMALL_TRAIN))
    results = read_json(model_dir / "eval_results.json")
    per_seed = [results["seeds"][seed]["accuracy"] for seed in ("0", "1", "2")]
    assert results["seeds_summary"]["accuracy"] == {
        "median": pytest.approx(np.median(per_seed)), "min": pytest.approx(min(per_seed)),
        "max": pytest.approx(max(per_seed)), "std": pytest.approx(np.std(per_seed))}
    assert results["accuracy"] == pytest.approx(np.median(per_seed))
    assert all((model_dir / f"seed_{seed}" / "model.keras").is_file() for seed in range(3))
    # The top-level files are the median run's: its predictions give its reported accuracy.
    gold = [row.split("\t")[0] for row in labelled_rows("dev")]
    predicted = [label for _, label in written_predictions(model_dir)]
    assert results["accuracy"] == pytest.approx(sklearn.metrics.accuracy_score(gold, predicted))
    assert isinstance(results["degenerate_seeds"], list)


def test_max_train_examples_and_from_scratch(workspace, tmp_path):
    """`--max_train_examples` trains on a sample; `--from_scratch` keeps the architecture and
    drops the pretrained weights."""
    result = run(finetune_command(workspace, tmp_path / "scratch", "--max_train_examples=64",
                                  "--num_train_epochs=1", "--from_scratch"))
    assert "64 training examples, 2 batches of 32" in result.stdout
    assert "from random weights in the architecture of" in result.stdout
    pretrained = keras.saving.load_model(workspace / "encoder.keras")
    tuned = keras.saving.load_model(tmp_path / "scratch" / "model.keras")
    assert tuned.encoder.config == pretrained.config
    # Two optimizer steps at 2e-3 move a weight by ~4e-3 at most; a random start is O(0.02) away.
    start = pretrained.get_layer("embeddings").weights[0].numpy()
    after = tuned.encoder.get_layer("embeddings").weights[0].numpy()
    assert np.max(np.abs(after - start)) > 0.02


def test_a_malformed_training_file_is_one_line_naming_file_and_line(workspace, tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(workspace / "data", data_dir)
    train = data_dir / os.path.basename(demo.classification_files()["train"])
    with gzip.open(train, "wt", encoding="utf-8") as file:
        file.write("label\ttext\nnoun.animal\ta dog\nnoun.animal\ttoo\tmany\n")
    command = finetune_command(workspace, tmp_path / "bad", f"--data_dir={data_dir}")
    result = run(command, check=False)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    message = [line for line in result.stderr.splitlines() if "kerasbert-finetune" in line]
    assert len(message) == 1 and str(train) in message[0] and "line 3" in message[0]


def test_missing_files_and_sources_are_reported(workspace, tmp_path):
    result = run(finetune_command(workspace, tmp_path / "m", f"--data_dir={tmp_path}"),
                 check=False)
    assert result.returncode == 1 and "does not exist" in result.stderr
    assert "Traceback" not in result.stderr
    with pytest.raises(PretrainedSourceError, match="not a Hugging Face folder"):
        pretrained_source(tmp_path)


def test_pretrained_sources_give_the_stored_weights_and_tokenizer(workspace, tmp_path):
    """A kerasbert-pretrain directory and a Hugging Face folder as `--init_from` sources."""
    from tests.helpers import hf_config, save_hf_model

    pretrain_dir = tmp_path / "pretrain"
    run(["pretrain", "--model=bert_tiny_uncased",
         "--config_overrides=num_layers=1,hidden_size=32,num_heads=2,intermediate_size=64",
         f"--text_files={demo.pretraining_corpus_files()[0]}", f"--vocab_file={VOCAB}",
         f"--model_dir={pretrain_dir}", "--train_steps=2", "--batch_size=4",
         "--max_seq_length=32", "--steps_per_loop=1"])
    source = pretrained_source(pretrain_dir)
    encoder = source.make_encoder()
    reader = tf.train.load_checkpoint(str(pretrain_dir))
    stored = reader.get_tensor(
        "model_variables/embeddings..token_embedding..embeddings/.ATTRIBUTES/VARIABLE_VALUE")
    np.testing.assert_array_equal(encoder.token_embedding.embeddings.numpy(), stored)
    assert source.tokenizer.tokenize(["the list"]).to_list() == \
        kerasbert.tokenizers.vocabulary_files.load_tokenizer(VOCAB).tokenize(
            ["the list"]).to_list()

    hf_dir = tmp_path / "hf"
    save_hf_model("BertModel", hf_config("bert"), hf_dir)
    shutil.copy(VOCAB, hf_dir / "vocab.txt")
    source = pretrained_source(hf_dir)
    assert source.kind == "huggingface" and source.tokenizer is not None
    reference = kerasbert.convert.from_hf(hf_dir, encoder_only=True)
    for ours, theirs in zip(source.make_encoder().weights, reference.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())

