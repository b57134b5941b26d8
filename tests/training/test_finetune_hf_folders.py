"""`kerasbert-finetune --init_from=<a Hugging Face folder>` runs every task kind to its end for
the families whose tokenizer it reads from the folder's `tokenizer.json` (`FOLDERS`: ModernBERT's
byte-level BPE): sequence classification and regression, token tagging, span QA and multiple
choice, each through a checkpoint (the data position is saved with the byte-pair tokenizer in
the pipeline), its dev evaluation and prediction files; sequence-level heads pool as the
folder's config.json says (`classifier_pooling` "mean"). The metrics it reports are recomputed
from those files by the independent evaluators (scikit-learn, SciPy, seqeval, the official SQuAD
script). Learning is proven on BERT (test_finetune_tasks_learn.py) and on ModernBERT's masked LM
(test_learning.py); these runs are a few steps of a random tiny model.

The binary runs in this process (`tests.binaries.run_binary`)."""

import gzip
import json
import os
import random
import zipfile

import pytest
import scipy.stats
import seqeval.metrics
import sklearn.metrics
import transformers
from official.nlp.tools import squad_evaluate_v1_1

from kerasbert.data import demo
from tests.binaries import run_binary
from tests.helpers import hf_config, save_hf_model, save_modernbert_tokenizer
from tests.training import test_finetune_tasks_learn as tasks

pytestmark = pytest.mark.slow

# Each task: its files' names, how many examples they hold and the flags of its run.
COMMON_FLAGS = ("--num_train_epochs=1", "--train_batch_size=16", "--eval_batch_size=32",
                "--learning_rate=1e-3")
TASKS = {
    "wordnet_gloss": (("train.tsv.gz", "dev.tsv.gz"), (64, 32), ("--max_seq_length=32",)),
    "stsb": (("train.tsv", "dev.tsv"), (48, 24), ("--max_seq_length=32",)),
    "swag": (("train.csv", "val.csv"), (32, 16), ("--max_seq_length=24",)),
    "conll2003": (("train.txt", "valid.txt"), (16, 8), ("--max_seq_length=32",)),
    "squad_v1": (("train.json", "dev.json"), (8, 4),
                 ("--max_seq_length=64", "--max_query_length=16", "--doc_stride=24")),
}


# family: (the transformers class saved, a function that saves its tokenizer to a folder and
# returns transformers' tokenizer of it). One row so far: the families whose tokenizer
# kerasbert-finetune reads from the folder's tokenizer.json.
FOLDERS = {"modernbert": ("ModernBertForMaskedLM", save_modernbert_tokenizer)}


@pytest.fixture(scope="module", params=FOLDERS)
def hf_folder(request, tmp_path_factory):
    """A random tiny model of the family with its tokenizer (ModernBERT: local window 16)."""
    family = request.param
    model_class, save_tokenizer = FOLDERS[family]
    folder = tmp_path_factory.mktemp(family)
    tokenizer = save_tokenizer(folder)
    # Mean pooling, as the released ModernBERT checkpoints' config.json says (the default is
    # the first token): the fine-tuned sequence-level heads must pool the same way.
    save_hf_model(model_class, hf_config(
        family, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
        classifier_pooling="mean"), folder)
    return folder


def _write_glosses(path, split, size):
    """The first `size` rows of the shipped gloss set's `split`; their labels."""
    with gzip.open(demo.classification_files()[split], "rt", encoding="utf-8") as file:
        lines = file.read().splitlines()[:size + 1]
    with gzip.open(path, "wt", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return [line.split("\t")[0] for line in lines[1:]]


def _write(task, path, rng, size):
    if task == "wordnet_gloss":
        return _write_glosses(path, "dev" if path.name.startswith("dev") else "train", size)
    if task == "squad_v1":  # answer names checked against the WordPiece vocabulary's pieces
        wordpiece = transformers.BertTokenizerFast(tasks.VOCAB, do_lower_case=True)
        return tasks._write_squad(path, rng, wordpiece, size, version_2=False)
    return {"stsb": tasks._write_stsb, "swag": tasks._write_swag,
            "conll2003": tasks._write_conll}[task](path, rng, size)


@pytest.mark.parametrize("task", TASKS)
def test_every_task_kind_runs_and_its_metrics_equal_the_evaluators(hf_folder, tmp_path, task):
    (train_name, dev_name), (train_size, dev_size), flags = TASKS[task]
    rng = random.Random(0)
    _write(task, tmp_path / train_name, rng, train_size)
    truths = _write(task, tmp_path / dev_name, rng, dev_size)
    model_dir = tmp_path / "run"
    run = run_binary("finetune", f"--task={task}", f"--train_file={tmp_path / train_name}",
                     f"--dev_file={tmp_path / dev_name}", f"--init_from={hf_folder}",
                     f"--model_dir={model_dir}", *COMMON_FLAGS, *flags)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "(huggingface)" in run.stdout and "ckpt-" in "".join(os.listdir(model_dir))
    with open(model_dir / "eval_results.json", encoding="utf-8") as file:
        results = json.load(file)
    with zipfile.ZipFile(model_dir / "model.keras") as archive:
        saved = json.loads(archive.read("config.json"))["config"]
    assert saved["pooling"] == ("mean" if saved["task"] in ("sequence_classification",
                                                            "multiple_choice") else "first_token")
    if task == "wordnet_gloss":
        predicted = tasks._predictions_in_order(
            tasks._read_tsv_predictions(model_dir / "dev_predictions.tsv"), dev_size)
        assert results["accuracy"] == pytest.approx(
            sklearn.metrics.accuracy_score(truths, predicted), abs=1e-12)
    elif task == "stsb":
        predicted = [float(value) for value in tasks._predictions_in_order(
            tasks._read_tsv_predictions(model_dir / "dev_predictions.tsv"), dev_size)]
        # The file rounds to 3 decimals (the metric was computed before): an untrained model's
        # scores lie close together, so the rounding moved Pearson's r by 4e-4 here.
        assert results["pearson"] == pytest.approx(scipy.stats.pearsonr(truths, predicted)[0],
                                                   abs=2e-3)
    elif task == "swag":
        predicted = [int(value) for value in tasks._predictions_in_order(
            tasks._read_tsv_predictions(model_dir / "dev_predictions.tsv"), dev_size)]
        assert results["accuracy"] == pytest.approx(
            sklearn.metrics.accuracy_score(truths, predicted), abs=1e-12)
    elif task == "conll2003":
        sentences = tasks._read_predictions_txt(model_dir / "dev_predictions.txt")
        assert [[word for word, _, _ in rows] for rows in sentences] == [
            [row[0] for row in rows] for rows in truths]
        assert results["f1"] == pytest.approx(seqeval.metrics.f1_score(
            [[gold for _, gold, _ in rows] for rows in sentences],
            [[tag for _, _, tag in rows] for rows in sentences]), abs=1e-9)
    else:
        with open(model_dir / "predictions.json", encoding="utf-8") as file:
            predictions = json.load(file)
        contexts = {qa["id"]: context for context, qa in tasks._questions(truths)}
        assert set(predictions) == set(contexts)
        # Answers are cut from their contexts by the byte-pair tokenizer's offsets.
        assert all(answer in contexts[qid] for qid, answer in predictions.items())
        official = squad_evaluate_v1_1.evaluate(truths, predictions)
        assert results["exact"] == pytest.approx(100.0 * official["exact_match"], abs=1e-9)
        assert results["f1"] == pytest.approx(100.0 * official["final_f1"], abs=1e-9)
