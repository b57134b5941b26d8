"""`kerasbert-finetune --task=text_embedding`: contrastive training from a sentence-transformers
folder (its pooling and normalization carried), dev retrieval scores equal to
sentence-transformers' evaluator on the trained model written back as its folder, the test split
scored into test_scores.json, eval mode reproducing them; and the errors it reports."""

import gzip
import json

import keras
import pytest
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer import evaluation

import kerasbert
from kerasbert.data import demo
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from tests.binaries import run_binary
from tests.helpers import save_sentence_transformers_model

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


def test_trains_scores_and_reproduces_sentence_transformers_retrieval(workspace, tmp_path):
    root, source = workspace
    model_dir = tmp_path / "run"
    _run("--task=text_embedding", f"--data_dir={root / 'data'}", f"--init_from={source}",
         f"--model_dir={model_dir}", "--max_seq_length=32", "--train_batch_size=16",
         "--num_train_epochs=1", "--learning_rate=1e-3")
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
