"""`kerasbert-finetune --task=text_embedding`: contrastive training from a sentence-transformers
folder (its pooling and normalization carried), dev retrieval scores equal to
sentence-transformers' evaluator on the trained model written back as its folder, the test split
scored into test_scores.json, eval mode reproducing them; a kill -9 mid-run resumed bit for bit;
mixed_bfloat16 learning what float32 learns; and the errors it reports."""

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
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer import evaluation

import kerasbert
from kerasbert.data import demo
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from tests.binaries import run_binary
from tests.helpers import save_sentence_transformers_model
from tests.reliability.faults import checkpoint_values

pytestmark = pytest.mark.slow


def _gloss_halves(count):
    """(first half, second half) of `count` shipped dev glosses of at least eight words."""
    with gzip.open(demo.classification_files()["dev"], "rt", encoding="utf-8") as file:
        glosses = [line.split("\t")[1] for line in file.read().splitlines()[1:]]
    halves = []
    for gloss in glosses:
        words = gloss.split()
        if len(words) >= 8:
            halves.append((" ".join(words[:len(words) // 2]), " ".join(words[len(words) // 2:])))
    return halves[:count]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """train.tsv (anchor, positive, hard negative), dev.tsv and test.tsv (anchor, positive),
    and a tiny sentence-transformers model with max pooling and no normalization."""
    root = tmp_path_factory.mktemp("text_embedding")
    halves = _gloss_halves(200)
    data = root / "data"
    data.mkdir()
    train = [f"{a}\t{b}\t{halves[(index + 1) % 120][1]}" for index, (a, b) in
             enumerate(halves[:120])]
    (data / "train.tsv").write_text("\n".join(train) + "\n")
    (data / "dev.tsv").write_text("\n".join(f"{a}\t{b}" for a, b in halves[120:160]) + "\n")
    (data / "test.tsv").write_text("\n".join(f"{a}\t{b}" for a, b in halves[160:]) + "\n")
    folder, _ = save_sentence_transformers_model(root / "source", "bert", "max", normalize=False)
    return root, folder


def _run(*flags):
    result = run_binary("finetune", *flags)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _training_flags(root, source, model_dir, *flags):
    """Two epochs of 15 steps (120 examples in batches of 8), a checkpoint every 3 steps."""
    return ["--task=text_embedding", f"--data_dir={root / 'data'}", f"--init_from={source}",
            f"--model_dir={model_dir}", "--max_seq_length=32", "--train_batch_size=8",
            "--num_train_epochs=2", "--learning_rate=1e-3", "--checkpoint_interval=3", *flags]


@pytest.fixture(scope="module")
def trained(workspace):
    root, source = workspace
    model_dir = root / "trained_run"
    _run(*_training_flags(root, source, model_dir))
    return model_dir


def test_trains_scores_and_reproduces_sentence_transformers_retrieval(workspace, trained,
                                                                       tmp_path):
    root, source = workspace
    model_dir = tmp_path / "run"
    shutil.copytree(trained, model_dir)
    results = json.loads((model_dir / "eval_results.json").read_text())
    assert results["score"] == results["mrr@10"] and results["queries"] == 40
    assert {"recall@1", "recall@10", "ndcg@10"} <= set(results)
    test_scores = json.loads((model_dir / "test_scores.json").read_text())
    assert test_scores["queries"] == 40
    model = keras.models.load_model(model_dir / "model.keras")
    assert isinstance(model, kerasbert.models.TextEmbeddingModel)
    assert (model.pooling, model.normalize, model.max_seq_length) == ("max", False, 32)

    # The dev scores are sentence-transformers' on the trained model in its own format.
    written = kerasbert.convert.to_hf(model, tmp_path / "trained",
                                      tokenizer=tokenizer_from_hf(source))
    rows = [line.split("\t") for line in (root / "data" / "dev.tsv").read_text().splitlines()]
    theirs = evaluation.InformationRetrievalEvaluator(
        {f"q{index}": anchor for index, (anchor, _) in enumerate(rows)},
        {f"d{index:03d}": positive for index, (_, positive) in enumerate(rows)},
        {f"q{index}": {f"d{index:03d}"} for index in range(len(rows))},
        mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[1], precision_recall_at_k=[1, 10],
        map_at_k=[10], write_csv=False)(SentenceTransformer(str(written), device="cpu"))
    for name in ("mrr@10", "recall@1", "recall@10", "ndcg@10"):
        assert results[name] == pytest.approx(theirs[f"cosine_{name}"], abs=1e-9), name

    _run("--task=text_embedding", f"--data_dir={root / 'data'}", f"--model_dir={model_dir}",
         "--mode=eval", "--max_seq_length=32", f"--tokenizer_dir={source}")
    again = json.loads((model_dir / "eval_results.json").read_text())
    assert again["mrr@10"] == pytest.approx(results["mrr@10"], abs=1e-9)


def test_a_killed_run_resumes_bit_for_bit(workspace, trained, tmp_path):
    """kill -9 once the first checkpoint is recorded, then the same command again: the run ends where the
    uninterrupted one ends (every tensor of the final checkpoint, the best model's weights,
    the result files byte for byte)."""
    root, source = workspace
    model_dir = tmp_path / "killed"
    flags = _training_flags(root, source, model_dir)
    process = subprocess.Popen([sys.executable, "-m", "kerasbert.cli.finetune", *flags],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    deadline = time.time() + 300
    state = model_dir / "checkpoint"  # names ckpt-3 once it is whole and recorded
    while not (state.exists() and "ckpt-3" in state.read_text()) and process.poll() is None:
        assert time.time() < deadline, "no checkpoint within 5 minutes"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run ended before the kill"
    assert not (model_dir / "eval_results.json").exists()

    assert "Restored" in _run(*flags).stdout
    resumed, uninterrupted = (checkpoint_values(path / "ckpt-30") for path in (model_dir, trained))
    assert resumed.keys() == uninterrupted.keys() and len(resumed) > 50
    for name in uninterrupted:
        if not name.startswith("save_counter"):
            np.testing.assert_array_equal(resumed[name], uninterrupted[name], err_msg=name)
    for ours, theirs in zip(*(keras.models.load_model(path / "model.keras").get_weights()
                              for path in (model_dir, trained))):
        np.testing.assert_array_equal(ours, theirs)
    for name in ("eval_history.json", "eval_results.json", "dev_scores.json", "test_scores.json"):
        assert (model_dir / name).read_bytes() == (trained / name).read_bytes(), name


def test_trains_in_bfloat16_to_the_float32_run_s_vectors(workspace, trained, tmp_path):
    """Under mixed_bfloat16 the same run (emulated where the CPU lacks the units) learns what
    the float32 run learns: its dev MRR@10 within 0.05 of float32's, and the two trained
    models' vectors of the dev anchors at a cosine of at least 0.99 (measured on 2026-11-30:
    a smallest cosine of 0.9968 and an MRR@10 gap of 0.003)."""
    root, source = workspace
    model_dir = tmp_path / "bfloat16"
    _run(*_training_flags(root, source, model_dir, "--mixed_precision=mixed_bfloat16"))
    record = json.loads((model_dir / "kerasbert_run.json").read_text())
    assert record["flags"]["mixed_precision"] == "mixed_bfloat16"
    ours, theirs = (json.loads((path / "eval_results.json").read_text())
                    for path in (model_dir, trained))
    assert abs(ours["mrr@10"] - theirs["mrr@10"]) <= 0.05, (ours, theirs)
    tokenizer = tokenizer_from_hf(source)
    anchors = [line.split("\t")[0] for line in
               (root / "data" / "dev.tsv").read_text().splitlines()]
    inputs = tokenizer(anchors, max_length=32, padding="longest")
    vectors = [np.asarray(keras.models.load_model(path / "model.keras")(inputs)["embedding"],
                          np.float64) for path in (model_dir, trained)]
    cosines = np.sum(vectors[0] * vectors[1], axis=1) / np.prod(
        [np.linalg.norm(vector, axis=1) for vector in vectors], axis=0)
    assert cosines.min() >= 0.99, cosines.min()


@pytest.mark.parametrize("flags,message", [
    (["--task=wordnet_gloss", "--pooling=cls"], "--pooling and --normalize are for "
                                                "--task=text_embedding"),
    (["--task=text_embedding", "--train_file={scored}"], "{scored}: scored pairs"),
])
def test_reports_misuse_in_one_line(workspace, tmp_path, flags, message):
    root, source = workspace
    scored = tmp_path / "scored.tsv"
    scored.write_text("a cat\ta feline\t4.5\na car\ta truck\t2\n")
    flags = [flag.format(scored=scored) for flag in flags]
    result = run_binary("finetune", *flags, f"--data_dir={root / 'data'}",
                        f"--init_from={source}", f"--model_dir={tmp_path / 'run'}",
                        "--max_seq_length=32")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and message.format(scored=scored) in result.stderr
