"""`kerasbert-finetune` learns every task family from files in its official format.

Each task is a small synthetic one that only a correctly aligned pipeline can learn: SQuAD
answers that sit in a later window of their context, CoNLL names that the WordPiece vocabulary
splits into several sub-tokens inside sentences longer than one window, SWAG endings and an
STS-B pair whose score depends on both texts. A tiny 2-layer encoder is fine-tuned by the binary
(in this process with its own absl flags, `tests.binaries.run_binary`: a subprocess would import
TensorFlow again for each run; the console script itself is run as a subprocess in
test_finetune_cli.py), and the metrics it reports are recomputed from the prediction files it
wrote by the independent evaluators: the official SQuAD scripts (as tf-models-official ships
them), seqeval, scikit-learn and SciPy. The learning asserted is `BOUNDS`; its margins over
seeds, and how the epochs were chosen, are measured by `python -m tests.proofs.finetune_tasks
measure` (BUILD.md, "Learning proofs").
"""

import csv
import json
import os
import random
import re

import keras
import numpy as np
import pytest
import scipy.stats
import seqeval.metrics
import sklearn.metrics
import transformers
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

import kerasbert.data.demo
import kerasbert.zoo
from tests.binaries import run_binary

VOCAB = os.path.join(kerasbert.data.demo.vocabulary_dir("wordpiece"), "vocab.txt")
SEED = 0
# Each task's files are made by `random.Random(DATA_SEEDS[task] + 100 * seed)`.
DATA_SEEDS = {"squad_v1": 0, "squad_v2": 1, "conll2003": 2, "swag": 3, "stsb": 5}
# The learning each task's test asserts: every metric above its bound. Answering "" everywhere
# scores SQuAD v2.0 exact 33.3 (the share of impossible questions); SWAG's chance is 0.25.
# tests/proofs/finetune_tasks.py measures them over several seeds.
BOUNDS = {
    "squad_v1": {"exact": 80.0, "f1": 85.0, "later_window_exact": 0.75},
    "squad_v2": {"exact": 75.0, "f1": 78.0, "HasAns_exact": 70.0, "NoAns_exact": 70.0},
    "conll2003": {"f1": 0.85, "precision": 0.85, "recall": 0.85},
    "swag": {"accuracy": 0.8},
    "stsb": {"pearson": 0.8, "spearman": 0.8},
}
KINDS = ("PER", "LOC", "ORG")
# Made-up names start with their kind's letters (the first WordPiece of such a word is that one
# letter), then shared syllables (later sub-tokens, the same for every kind): only the first
# sub-token tells the kind.
NAME_STARTS = {"PER": ("zo", "ju"), "LOC": ("qu", "vy"), "ORG": ("xa", "wu")}
_SYLLABLES = ("rel", "bat", "kel", "var", "mun", "dil", "pal", "ost", "trev", "nik", "bur",
              "rov", "gal", "fen", "dro", "vek", "sul", "yam", "pir", "tho", "lun")
# Four classes of single-token vocabulary words for the pair and multiple-choice tasks.
CLASSES = (("tree", "box", "apple", "file", "socket", "thread"),
           ("buffer", "module", "server", "cache", "logger", "handler"),
           ("iterator", "tuple", "queue", "widget", "table", "window"),
           ("lock", "stack", "heap", "token", "frame", "shell"))
TEMPLATE_WORDS = {"the", "then", "it", "is", "was", "owned", "by", "in", "kept", "made", "who",
                  "owner", "user", "author", "own", "where", "stored", "located", "place",
                  "location", "which", "company", "team", "group", "built", "what", "and", "or",
                  "at", "near"}


def short_of(results, bounds):
    """{metric: (value, bound)} of the metrics of `bounds` that `results` is not above."""
    return {metric: (results[metric], bound) for metric, bound in bounds.items()
            if not results[metric] > bound}


def _filler_words():
    """Lower-case vocabulary words of 3-8 letters that play no role in any task."""
    with open(VOCAB, encoding="utf-8") as file:
        words = [line.strip() for line in file]
    reserved = TEMPLATE_WORDS | {word for words in CLASSES for word in words}
    return sorted(word for word in words
                  if word.isalpha() and word.isascii() and word.islower() and
                  3 <= len(word) <= 8 and word not in reserved)


FILLER = _filler_words()


def _name(rng, kind, suffix=""):
    """A made-up name of `kind` (not in the vocabulary: several WordPiece sub-tokens)."""
    middle = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 2)))
    return (rng.choice(NAME_STARTS[kind]) + middle + suffix).capitalize()


def _filler(rng, low, high):
    return " ".join(rng.choice(FILLER) for _ in range(rng.randint(low, high)))


def save_encoder(path, seed=SEED):
    """Save a tiny random BERT encoder made under `seed` to `path` (`.keras`): what `--init_from`
    starts from.

    Hidden size 128 with 4 heads and no dropout: with hidden size 64 the span task (a start that
    depends on the question) was learned within the step budget by only some seeds.
    """
    with open(VOCAB, encoding="utf-8") as file:
        vocab_size = sum(1 for _ in file)
    keras.utils.set_random_seed(seed)
    kerasbert.zoo.build("bert_tiny_uncased", vocab_size=vocab_size, num_layers=2, hidden_size=128,
                        num_heads=4, intermediate_size=256, max_positions=128, dropout=0.0,
                        attention_dropout=0.0).save(path)
    return path


@pytest.fixture(scope="module")
def encoder_file(tmp_path_factory):
    return save_encoder(tmp_path_factory.mktemp("encoder") / "encoder.keras")


@pytest.fixture(scope="module")
def hf_tokenizer():
    """The same vocabulary in `transformers`' tokenizer: an independent count of sub-tokens."""
    return transformers.BertTokenizerFast(VOCAB, do_lower_case=True)


def _finetune(encoder_file, model_dir, task, train_file, dev_file, flags, seed):
    """Run `kerasbert-finetune` on these flags in this process (`tests.binaries`); return its
    `eval_results.json`."""
    run = run_binary("finetune", f"--task={task}", f"--train_file={train_file}",
                     f"--dev_file={dev_file}", f"--init_from={encoder_file}",
                     f"--vocab_file={VOCAB}", f"--model_dir={model_dir}", f"--seed={seed}",
                     *flags)
    assert run.returncode == 0, run.stderr
    with open(os.path.join(model_dir, "eval_results.json"), encoding="utf-8") as file:
        return json.load(file)


# ---------------------------------------------------------------------------------------------
# SQuAD: a long context of filler sentences and facts "It is owned by <name>." (kept in, made by);
# the question asks for one kind. An answer name starts with its kind's letter and ends with its
# kind's suffix (one sub-token each), so start and end are learnable only where labelled.

SQUAD_MAX_SEQ_LENGTH = 64
SQUAD_FLAGS = (f"--max_seq_length={SQUAD_MAX_SEQ_LENGTH}", "--max_query_length=16",
               "--doc_stride=24", "--train_batch_size=32")
# Seeds 0-2 (`python -m tests.proofs.finetune_tasks measure`): 3 epochs give exact 100, 100,
# 73.3 (seed 2 is below the bound: the margin depends on the seed; the test runs seed 0);
# 2 epochs gave 32.5-60.8.
SQUAD_V1_FLAGS = (*SQUAD_FLAGS, "--num_train_epochs=3", "--learning_rate=2e-3")
# v2.0 must also learn when no window holds the kind asked for: at 2e-3 it collapsed to answering
# nothing in epoch 2; at 1e-3 it reached 98% exact in epoch 3 and 99% in epoch 4. Seeds 0-2:
# 4 epochs give exact 100, 96.7, 38.3 (seed 2 below the bound); 3 epochs, 100, 32.5, 35.8.
SQUAD_V2_FLAGS = (*SQUAD_FLAGS, "--num_train_epochs=4", "--learning_rate=1e-3",
                  "--tune_null_threshold")
# Questions name their kind in most of their words (so that a tiny model finds it quickly).
QUESTIONS = {"PER": "Who is the owner, the user, the author who owns it?",
             "LOC": "Where is it kept, stored or located, at what place and location?",
             "ORG": "Which company, team or group built and made it?"}
FACTS = {"PER": "It is owned by ", "LOC": "It is kept in ", "ORG": "It was made by "}
FILLER_SENTENCES = 6
ANSWER_SUFFIXES = {"PER": "ian", "LOC": "ory", "ORG": "ment"}


def _answer_name(rng, kind, tokenizer):
    """A name of `kind` whose last sub-token is its kind's suffix and no other kind's."""
    suffix_pieces = {"##" + suffix for suffix in ANSWER_SUFFIXES.values()}
    while True:
        name = _name(rng, kind, ANSWER_SUFFIXES[kind])
        pieces = tokenizer.tokenize(name)
        if pieces[-1] == "##" + ANSWER_SUFFIXES[kind] and not suffix_pieces & set(pieces[:-1]):
            return name


def _squad_paragraph(rng, tokenizer, number, version_2):
    present = rng.sample(KINDS, 2) if version_2 else list(KINDS)
    items = [_filler(rng, 4, 8).capitalize() + "." for _ in range(FILLER_SENTENCES)]
    for kind in present:
        items.insert(rng.randint(0, len(items)), kind)
    context, answers = "", {}
    for item in items:
        if item in FACTS:
            name = _answer_name(rng, item, tokenizer)
            answers[item] = {"text": name, "answer_start": len(context) + len(FACTS[item])}
            item = FACTS[item] + name + "."
        context += item + " "
    qas = [{"id": f"p{number}-{kind}", "question": QUESTIONS[kind],
            "answers": [answers[kind]] if kind in answers else [],
            "is_impossible": kind not in answers}
           for kind in rng.sample(KINDS, 3)]
    for qa in qas:
        if qa["is_impossible"]:
            qa["plausible_answers"] = []
        if not version_2:
            del qa["is_impossible"]
    return {"context": context.rstrip(), "qas": qas}


def _write_squad(path, rng, tokenizer, paragraphs, version_2):
    """A SQuAD file in the official layout (articles of paragraphs of questions)."""
    paragraph_list = [_squad_paragraph(rng, tokenizer, number, version_2)
                      for number in range(paragraphs)]
    articles = [{"title": f"Synthetic {start // 10}",
                 "paragraphs": paragraph_list[start:start + 10]}
                for start in range(0, paragraphs, 10)]
    with open(path, "w", encoding="utf-8") as file:
        json.dump({"version": "v2.0" if version_2 else "1.1", "data": articles}, file)
    return articles


def _questions(articles):
    return [(paragraph["context"], qa) for article in articles
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def _later_window_questions(articles, tokenizer, max_seq_length):
    """Ids of the answerable questions whose answer starts past the first window's context."""
    late = set()
    for context, qa in _questions(articles):
        if qa["answers"]:
            capacity = max_seq_length - 3 - len(tokenizer.tokenize(qa["question"]))
            start = qa["answers"][0]["answer_start"]
            if len(tokenizer.tokenize(context[:start])) >= capacity:
                late.add(qa["id"])
    return late


def _first_name_baseline(articles):
    """A positional baseline: every question answered with the context's first name."""
    first = re.compile("(?:" + "|".join(FACTS.values()) + r")(\w+)\.")
    return {qa["id"]: first.search(context).group(1) for context, qa in _questions(articles)}


def _data_rng(task, seed):
    """The random generator of `task`'s files for `seed` (seed 0: the tests' files)."""
    return random.Random(DATA_SEEDS[task] + 100 * seed)


def squad_v1_outcome(encoder_file, tokenizer, directory, seed=SEED, flags=SQUAD_V1_FLAGS):
    """(dev articles, predictions, eval_results.json, ids of the later-window questions) of a
    SQuAD v1.1 fine-tuning on files made under `seed`, in `directory`."""
    rng = _data_rng("squad_v1", seed)
    _write_squad(directory / "train-v1.1.json", rng, tokenizer, 480, version_2=False)
    dev = _write_squad(directory / "dev-v1.1.json", rng, tokenizer, 40, version_2=False)
    results = _finetune(encoder_file, directory / "run", "squad_v1",
                        directory / "train-v1.1.json", directory / "dev-v1.1.json", flags, seed)
    with open(directory / "run" / "predictions.json", encoding="utf-8") as file:
        predictions = json.load(file)
    late = _later_window_questions(dev, tokenizer, SQUAD_MAX_SEQ_LENGTH)
    return dev, predictions, results, late


def later_window_exact(dev, predictions, late):
    """The exact-match rate on the questions whose answer is only in a later window."""
    return float(np.mean([predictions[qa["id"]] == qa["answers"][0]["text"]
                          for _, qa in _questions(dev) if qa["id"] in late]))


@pytest.fixture(scope="module")
def squad_v1_run(encoder_file, hf_tokenizer, tmp_path_factory):
    return squad_v1_outcome(encoder_file, hf_tokenizer, tmp_path_factory.mktemp("squad_v1"))


@pytest.mark.slow
def test_squad_v1_learns_answers_in_later_windows(squad_v1_run):
    dev, predictions, results, late = squad_v1_run
    questions = _questions(dev)
    print(f"squad_v1: {results}; {len(late)} of {len(questions)} answers only in later windows")
    assert len(late) >= 0.3 * len(questions)  # the premise: many answers past the first window
    baseline = squad_evaluate_v1_1.evaluate(dev, _first_name_baseline(dev))
    assert baseline["exact_match"] < 0.4
    late_exact = later_window_exact(dev, predictions, late)
    print(f"squad_v1: exact on the later-window answers {late_exact:.3f}, first-name baseline "
          f"{baseline}")
    assert not short_of({**results, "later_window_exact": late_exact}, BOUNDS["squad_v1"])


@pytest.mark.slow
def test_squad_v1_metrics_equal_the_official_evaluation(squad_v1_run):
    dev, predictions, results, _ = squad_v1_run
    assert set(predictions) == {qa["id"] for _, qa in _questions(dev)}
    official = squad_evaluate_v1_1.evaluate(dev, predictions)
    assert results["exact"] == pytest.approx(100.0 * official["exact_match"], abs=1e-9)
    assert results["f1"] == pytest.approx(100.0 * official["final_f1"], abs=1e-9)


def squad_v2_outcome(encoder_file, tokenizer, directory, seed=SEED, flags=SQUAD_V2_FLAGS):
    """(dev articles, {predictions, null_odds, nbest_predictions}, eval_results.json) of a SQuAD
    v2.0 fine-tuning on files made under `seed`, in `directory`."""
    rng = _data_rng("squad_v2", seed)
    _write_squad(directory / "train-v2.0.json", rng, tokenizer, 480, version_2=True)
    dev = _write_squad(directory / "dev-v2.0.json", rng, tokenizer, 40, version_2=True)
    results = _finetune(encoder_file, directory / "run", "squad_v2",
                        directory / "train-v2.0.json", directory / "dev-v2.0.json", flags, seed)
    files = {}
    for name in ("predictions", "null_odds", "nbest_predictions"):
        with open(directory / "run" / f"{name}.json", encoding="utf-8") as file:
            files[name] = json.load(file)
    return dev, files, results


@pytest.fixture(scope="module")
def squad_v2_run(encoder_file, hf_tokenizer, tmp_path_factory):
    return squad_v2_outcome(encoder_file, hf_tokenizer, tmp_path_factory.mktemp("squad_v2"))


@pytest.mark.slow
def test_squad_v2_learns_answers_and_impossible_questions(squad_v2_run):
    _, _, results = squad_v2_run
    print(f"squad_v2: {results}")
    assert not short_of(results, BOUNDS["squad_v2"])


@pytest.mark.slow
def test_squad_v2_metrics_equal_the_official_evaluation(squad_v2_run):
    dev, files, results = squad_v2_run
    assert set(files["predictions"]) == set(files["null_odds"]) == \
        set(files["nbest_predictions"]) == {qa["id"] for _, qa in _questions(dev)}
    official = squad_evaluate_v2_0.evaluate(dev, files["predictions"], files["null_odds"])
    for ours, theirs in (("exact", "exact"), ("f1", "f1"), ("HasAns_exact", "HasAns_exact"),
                         ("HasAns_f1", "HasAns_f1"), ("NoAns_exact", "NoAns_exact"),
                         ("NoAns_f1", "NoAns_f1"), ("best_exact", "final_exact"),
                         ("best_exact_thresh", "final_exact_thresh"), ("best_f1", "final_f1"),
                         ("best_f1_thresh", "final_f1_thresh")):
        assert results[ours] == pytest.approx(official[theirs], abs=1e-9), ours


# ---------------------------------------------------------------------------------------------
# CoNLL-2003 (IOB1, as released): made-up names, one or two words, each several sub-tokens of
# which only the first tells the kind; "user", "near" and "company" stand next to them. Sentences
# are three or more windows long.

CONLL_MAX_SEQ_LENGTH = 32
# 2 epochs (3 until 2026-11-29): f1, precision and recall 1.000 on seeds 0-2
# (`python -m tests.proofs.finetune_tasks measure`).
CONLL_FLAGS = (f"--max_seq_length={CONLL_MAX_SEQ_LENGTH}", "--num_train_epochs=2",
               "--train_batch_size=32", "--learning_rate=3e-3")
TRIGGERS = {"PER": ("user", "NN", "B-NP", "O"), "LOC": ("near", "IN", "B-PP", "O"),
            "ORG": ("company", "NN", "I-NP", "O")}


def _conll_sentence(rng):
    rows = []  # (word, POS, chunk, tag)
    while len(rows) < 50:
        if rng.random() < 0.3:
            kind = rng.choice(KINDS)
            entity = [(_name(rng, kind), "NNP", "I-NP", f"I-{kind}")
                      for _ in range(rng.randint(1, 2))]
            rows += entity + [TRIGGERS[kind]] if kind == "ORG" else [TRIGGERS[kind]] + entity
        else:
            rows.append((rng.choice(FILLER), "NN", "B-NP", "O"))
    return rows


def _write_conll(path, rng, sentences):
    """A CoNLL-2003 file: `-DOCSTART-` lines, `word POS chunk tag` rows, IOB1 tags."""
    written = []
    with open(path, "w", encoding="utf-8") as file:
        for number in range(sentences):
            if number % 8 == 0:
                file.write("-DOCSTART- -X- -X- O\n\n")
            rows = _conll_sentence(rng)
            written.append(rows)
            file.write("".join(" ".join(row) + "\n" for row in rows) + "\n")
    return written


def _read_predictions_txt(path):
    """Sentences of (word, gold, predicted) from a `word gold predicted` file."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as file:
        for line in file:
            if line.strip():
                current.append(tuple(line.split()))
            elif current:
                sentences.append(current)
                current = []
    if current:
        sentences.append(current)
    return sentences


def conll_outcome(encoder_file, directory, seed=SEED, flags=CONLL_FLAGS):
    """(dev sentences, the written `dev_predictions.txt`, eval_results.json) of a CoNLL-2003
    fine-tuning on files made under `seed`, in `directory`."""
    rng = _data_rng("conll2003", seed)
    _write_conll(directory / "eng.train", rng, 320)
    dev = _write_conll(directory / "eng.testa", rng, 60)
    results = _finetune(encoder_file, directory / "run", "conll2003", directory / "eng.train",
                        directory / "eng.testa", flags, seed)
    written = _read_predictions_txt(directory / "run" / "dev_predictions.txt")
    return dev, written, results


@pytest.fixture(scope="module")
def conll_run(encoder_file, tmp_path_factory):
    return conll_outcome(encoder_file, tmp_path_factory.mktemp("conll"))


@pytest.mark.slow
def test_conll_learns_split_names_across_windows(conll_run, hf_tokenizer):
    dev, written, results = conll_run
    names = [row[0] for rows in dev for row in rows if row[3] != "O"]
    assert min(len(hf_tokenizer.tokenize(name)) for name in names) >= 2
    lengths = [len(hf_tokenizer.tokenize(" ".join(row[0] for row in rows))) for rows in dev]
    print(f"conll2003: {results}; sentences of {min(lengths)}-{max(lengths)} sub-tokens")
    assert min(lengths) > 2 * (CONLL_MAX_SEQ_LENGTH - 2)  # three or more windows each
    assert not short_of(results, BOUNDS["conll2003"])
    assert [[row[:2] for row in rows] for rows in written] == \
        [[(row[0], row[3]) for row in rows] for rows in dev]


@pytest.mark.slow
def test_conll_metrics_equal_seqeval_on_the_written_predictions(conll_run):
    _, written, results = conll_run
    gold = [[row[1] for row in rows] for rows in written]
    predicted = [[row[2] for row in rows] for rows in written]
    assert results["precision"] == pytest.approx(seqeval.metrics.precision_score(gold, predicted),
                                                 abs=1e-12)
    assert results["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, predicted),
                                              abs=1e-12)
    assert results["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, predicted), abs=1e-12)


def _read_tsv_predictions(path):
    """(index, prediction) rows of a `dev_predictions.tsv` after its `index<TAB>prediction` header."""
    with open(path, encoding="utf-8") as file:
        lines = file.read().splitlines()
    assert lines[0] == "index\tprediction"
    return [tuple(line.split("\t")) for line in lines[1:]]


def _tsv_task_run(encoder_file, directory, task, write, seed, files, sizes, flags):
    """Write `task`'s training and dev files made under `seed` with `write` and fine-tune on
    them in `directory`: (what `write` returned for dev, the rows of `dev_predictions.tsv`,
    `eval_results.json`)."""
    rng = _data_rng(task, seed)
    (train_name, dev_name), (train_size, dev_size) = files, sizes
    write(directory / train_name, rng, train_size)
    truths = write(directory / dev_name, rng, dev_size)
    results = _finetune(encoder_file, directory / "run", task, directory / train_name,
                        directory / dev_name, flags, seed)
    return truths, _read_tsv_predictions(directory / "run" / "dev_predictions.tsv"), results


def _predictions_in_order(rows, count):
    """The predictions of `rows`, checked to be the dev examples' indices 0..count-1 in order."""
    assert [index for index, _ in rows] == [str(index) for index in range(count)]
    return [prediction for _, prediction in rows]


def _class_words(rng, classes):
    """One word of each class in `classes` (class numbers), as a sentence start."""
    return " ".join(rng.choice(CLASSES[number]) for number in classes).capitalize()


# ---------------------------------------------------------------------------------------------
# SWAG: the right ending's objects are of the first sentence's objects' class; the three others
# are each of another class.

SWAG_COLUMNS = ("", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
                "ending0", "ending1", "ending2", "ending3", "label")
# At 3 epochs of 2e-3: 61% accuracy; 6 epochs of 1e-3 gave 98% by the second. At 1e-3, seeds
# 0-2: 4 epochs give 1.000, 0.742, 1.000 (seed 1 below the bound; the test runs seed 0);
# 3 epochs, 1.000, 0.575, 1.000; 2 epochs, 0.292, 0.308, 0.917.
SWAG_FLAGS = ("--max_seq_length=24", "--num_train_epochs=4", "--train_batch_size=16",
              "--learning_rate=1e-3")


def _write_swag(path, rng, examples):
    """A SWAG CSV file with the official header and an unnamed index column."""
    labels = []
    with open(path, "w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(SWAG_COLUMNS)
        for index in range(examples):
            kinds = _shuffled(rng, range(len(CLASSES)))
            label = kinds.index(0)
            context_kind = rng.randrange(len(CLASSES))
            kinds = [(kind + context_kind) % len(CLASSES) for kind in kinds]
            sent1 = f"{_class_words(rng, [context_kind] * 3)}, {_filler(rng, 1, 3)}."
            sent2 = "Then the"
            endings = [_class_words(rng, [kind] * 3).lower() + "." for kind in kinds]
            writer.writerow([index, f"anetv_{index:05d}", index % 20, f"{sent1} {sent2}", sent1,
                             sent2, "gold", *endings, label])
            labels.append(label)
    return labels


def swag_outcome(encoder_file, directory, seed=SEED, flags=SWAG_FLAGS):
    """(dev labels, dev prediction rows, eval_results.json) of a SWAG fine-tuning."""
    return _tsv_task_run(encoder_file, directory, "swag", _write_swag, seed,
                         ("train.csv", "val.csv"), (600, 120), flags)


@pytest.fixture(scope="module")
def swag_run(encoder_file, tmp_path_factory):
    return swag_outcome(encoder_file, tmp_path_factory.mktemp("swag"))


@pytest.mark.slow
def test_swag_learns_and_accuracy_equals_sklearn(swag_run):
    labels, rows, results = swag_run
    print(f"swag: {results}")
    predicted = [int(prediction) for prediction in _predictions_in_order(rows, len(labels))]
    assert results["accuracy"] == pytest.approx(sklearn.metrics.accuracy_score(labels, predicted),
                                                abs=1e-12)
    assert not short_of(results, BOUNDS["swag"])


# ---------------------------------------------------------------------------------------------
# A GLUE pair: STS-B's score is the mean number of class-0 objects of the two sentences (neither
# alone decides it). Classification GLUE tasks learn in test_finetune_learning.py (the gloss set)
# and test_finetune_cli.py; a synthetic RTE rule (a threshold on that sum, or class identity)
# reached only 0.56-0.99 dev accuracy depending on the seed and schedule, too unsteady to assert.

# 2 epochs (3 until 2026-11-29): Pearson 0.999, Spearman 0.991-0.993 on seeds 0-2
# (`python -m tests.proofs.finetune_tasks measure`).
GLUE_FLAGS = ("--max_seq_length=32", "--num_train_epochs=2", "--train_batch_size=16",
              "--learning_rate=2e-3")


def _shuffled(rng, values):
    values = list(values)
    rng.shuffle(values)
    return values


def _write_stsb(path, rng, examples):
    """An STS-B TSV file with the official ten columns."""
    scores = []
    lines = ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
             "\tscore"]
    for index in range(examples):
        counts = rng.randint(0, 5), rng.randint(0, 5)
        first, second = (_class_words(rng, _shuffled(rng, [0] * count + [1] * (5 - count))) + "."
                         for count in counts)
        score = sum(counts) / 2
        lines.append(f"{index}\tmain-captions\tMSRvid\t2012test\t{index:04d}\tnone\tnone\t"
                     f"{first}\t{second}\t{score:.3f}")
        scores.append(score)
    with open(path, "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return scores


def stsb_outcome(encoder_file, directory, seed=SEED, flags=GLUE_FLAGS):
    """(dev scores, dev prediction rows, eval_results.json) of an STS-B fine-tuning."""
    return _tsv_task_run(encoder_file, directory, "stsb", _write_stsb, seed,
                         ("train.tsv", "dev.tsv"), (800, 160), flags)


@pytest.fixture(scope="module")
def stsb_run(encoder_file, tmp_path_factory):
    return stsb_outcome(encoder_file, tmp_path_factory.mktemp("stsb"))


@pytest.mark.slow
def test_stsb_learns_and_correlations_equal_scipy(stsb_run):
    scores, rows, results = stsb_run
    print(f"stsb: {results}")
    predicted = [float(prediction) for prediction in _predictions_in_order(rows, len(scores))]
    # The file rounds to 3 decimals; the metrics were computed before rounding.
    assert results["pearson"] == pytest.approx(scipy.stats.pearsonr(scores, predicted)[0],
                                               abs=1e-4)
    assert results["spearman"] == pytest.approx(scipy.stats.spearmanr(scores, predicted)[0],
                                                abs=1e-3)
    assert not short_of(results, BOUNDS["stsb"])
