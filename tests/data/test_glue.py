"""GLUE readers, datasets and prediction files, on tiny files in the official GLUE layouts.

The layouts below are written out by hand from the files the GLUE download script produces (and
Hugging Face's GLUE processors read): CoLA's headerless train/dev files, MNLI's 12-column train,
16-column dev and 10-column test files, and so on. Packed ids are compared with `transformers`'
tokenizers built from the same shipped vocabularies.
"""

import csv
import gzip
import logging

import numpy as np
import pytest
import tensorflow as tf
import transformers

import kerasbert.data.demo as demo
import kerasbert.zoo
from kerasbert.data.glue import (examples_dataset, example_labels, glue_dataset, glue_examples,
                                 predictions_from_logits, write_dev_predictions,
                                 write_test_predictions)
from kerasbert.data.glue_tasks import GLUE_TASKS, get_task
from kerasbert.data.task_errors import TaskDataError

MNLI_PARSES = ["( ( The cat ) sat )", "( ( A cat ) sits )", "(ROOT (S (NP The cat) (VP sat)))",
               "(ROOT (S (NP A cat) (VP sits)))"]


def _indexed_pair_layout(first, second):
    """The layout of QNLI, RTE and WNLI: index, the two texts, and the label (none in test)."""
    labelled = (["index", first, second, "label"], lambda i, a, b, label: [i, a, b, label])
    return {"train": labelled, "dev": labelled,
            "test": (["index", first, second], lambda i, a, b, label: [i, a, b])}


# task -> split -> (header or None, function (index, text_a, text_b, label) -> official row).
OFFICIAL_LAYOUTS = {
    "cola": {
        "train": (None, lambda i, a, b, label: ["gj04", label, "" if label == "1" else "*", a]),
        "dev": (None, lambda i, a, b, label: ["clc95", label, "" if label == "1" else "*", a]),
        "test": (["index", "sentence"], lambda i, a, b, label: [i, a]),
    },
    "sst2": {
        "train": (["sentence", "label"], lambda i, a, b, label: [a, label]),
        "dev": (["sentence", "label"], lambda i, a, b, label: [a, label]),
        "test": (["index", "sentence"], lambda i, a, b, label: [i, a]),
    },
    "mrpc": {
        "train": (["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                  lambda i, a, b, label: [label, "702876", "702977", a, b]),
        "dev": (["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                lambda i, a, b, label: [label, "1355540", "1355592", a, b]),
        "test": (["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                 lambda i, a, b, label: [i, "1089874", "1089925", a, b]),
    },
    "stsb": {
        "train": ("index genre filename year old_index source1 source2 sentence1 sentence2 score"
                  .split(), lambda i, a, b, label: [i, "main-captions", "MSRvid", "2012test",
                                                     "0001", "none", "none", a, b, label]),
        "dev": ("index genre filename year old_index source1 source2 sentence1 sentence2 score"
                .split(), lambda i, a, b, label: [i, "main-forums", "deft-forum", "2014", "0007",
                                                   "none", "none", a, b, label]),
        "test": ("index genre filename year old_index source1 source2 sentence1 sentence2"
                 .split(), lambda i, a, b, label: [i, "main-news", "headlines", "2015", "0011",
                                                    "none", "none", a, b]),
    },
    "qqp": {
        "train": ("id qid1 qid2 question1 question2 is_duplicate".split(),
                  lambda i, a, b, label: [i, "213221", "213222", a, b, label]),
        "dev": ("id qid1 qid2 question1 question2 is_duplicate".split(),
                lambda i, a, b, label: [i, "536040", "536041", a, b, label]),
        "test": ("id question1 question2".split(), lambda i, a, b, label: [i, a, b]),
    },
    "mnli": {
        "train": ("index promptID pairID genre sentence1_binary_parse sentence2_binary_parse "
                  "sentence1_parse sentence2_parse sentence1 sentence2 label1 gold_label".split(),
                  lambda i, a, b, label: [i, "31193", "31193n", "government", *MNLI_PARSES, a, b,
                                          label, label]),
        "dev_matched": ("index promptID pairID genre sentence1_binary_parse "
                        "sentence2_binary_parse sentence1_parse sentence2_parse sentence1 "
                        "sentence2 label1 label2 label3 label4 label5 gold_label".split(),
                        lambda i, a, b, label: [i, "63735", "63735n", "slate", *MNLI_PARSES, a,
                                                b, label, "neutral", label, label, "entailment",
                                                label]),
        "dev_mismatched": ("index promptID pairID genre sentence1_binary_parse "
                           "sentence2_binary_parse sentence1_parse sentence2_parse sentence1 "
                           "sentence2 label1 label2 label3 label4 label5 gold_label".split(),
                           lambda i, a, b, label: [i, "75290", "75290c", "letters",
                                                   *MNLI_PARSES, a, b, label, label, label,
                                                   label, label, label]),
        "test_matched": ("index promptID pairID genre sentence1_binary_parse "
                         "sentence2_binary_parse sentence1_parse sentence2_parse sentence1 "
                         "sentence2".split(),
                         lambda i, a, b, label: [i, "31493", "31493", "travel", *MNLI_PARSES,
                                                 a, b]),
        "test_mismatched": ("index promptID pairID genre sentence1_binary_parse "
                            "sentence2_binary_parse sentence1_parse sentence2_parse sentence1 "
                            "sentence2".split(),
                            lambda i, a, b, label: [i, "16130", "16130", "facetoface",
                                                    *MNLI_PARSES, a, b]),
        "diagnostic": (["index", "sentence1", "sentence2"], lambda i, a, b, label: [i, a, b]),
    },
    "qnli": _indexed_pair_layout("question", "sentence"),
    "rte": _indexed_pair_layout("sentence1", "sentence2"),
    "wnli": _indexed_pair_layout("sentence1", "sentence2"),
}
# Files without an index column: their examples are numbered in file order.
NO_INDEX_COLUMN = {("cola", "train"), ("cola", "dev"), ("sst2", "train"), ("sst2", "dev"),
                   ("mrpc", "train"), ("mrpc", "dev")}
OFFICIAL_LABELS = {"cola": ["0", "1"], "sst2": ["0", "1"], "mrpc": ["0", "1"], "qqp": ["0", "1"],
                   "wnli": ["0", "1"], "stsb": ["3.800", "0.000", "5.000", "1.250"],
                   "mnli": ["contradiction", "entailment", "neutral"],
                   "qnli": ["entailment", "not_entailment"],
                   "rte": ["entailment", "not_entailment"]}
SENTENCES = [
    ("The sailors rode the breeze clear of the rocks.", "A ship sailed past the rocks."),
    ('He said "no", then left.', "Nobody said anything at all, it seems."),
    ("Café owners in Zürich open early.", "Shops open late."),
    ("Lists hold values; dictionaries map keys to values.", "A list maps keys."),
    ("The weights are 'in' the file.", "The file is empty."),
    ("Functions return None by default when no value is returned explicitly by "
     "the body of the function, as the tutorial explains in detail.", "Functions return None."),
]


def official_examples(task, split, count=len(SENTENCES)):
    """(index, text_a, text_b, label) of `count` examples of a task file; labels cycle."""
    labelled = get_task(task).splits[split].layout.labelled
    pair = get_task(task).is_pair
    labels = OFFICIAL_LABELS[task]
    return [(str(100 + n), a, b if pair else None, labels[n % len(labels)] if labelled else None)
            for n, (a, b) in enumerate(SENTENCES[:count])]


def write_official_file(directory, task, split, examples=None):
    """Write the task's `split` file in its official layout; return the path."""
    header, row = OFFICIAL_LAYOUTS[task][split]
    examples = official_examples(task, split) if examples is None else examples
    lines = [] if header is None else ["\t".join(header)]
    lines += ["\t".join(row(*example)) for example in examples]
    path = directory / task / get_task(task).splits[split].file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_lines(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizers():
    """family -> (ours, transformers' tokenizer) over the shipped vocabularies."""
    # Not BertTokenizerFast(vocab_file=...): in transformers 5 that keeps only the special tokens.
    families = {"bert": ("bert_tiny_uncased", "wordpiece", transformers.BertTokenizerFast),
                "roberta": ("roberta_base", "byte_pair", transformers.RobertaTokenizer),
                "albert": ("albert_base_v2", "sentence_piece", transformers.AlbertTokenizer)}
    return {family: (kerasbert.zoo.build_tokenizer(preset, demo.vocabulary_dir(kind)),
                     reference.from_pretrained(demo.vocabulary_dir(kind)))
            for family, (preset, kind, reference) in families.items()}


def all_batches(dataset):
    """The dataset's batches concatenated into one dict of numpy arrays."""
    batches = [{name: value.numpy() for name, value in batch.items()} for batch in dataset]
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


# --- the task table ---

def test_table_has_every_glue_task_with_the_official_files_labels_and_metrics():
    assert list(GLUE_TASKS) == ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte",
                                "wnli", "wordnet_gloss"]
    submissions = {(name, split): s.submission_file for name, task in GLUE_TASKS.items()
                   for split, s in task.splits.items() if s.submission_file}
    assert submissions == {
        ("cola", "test"): "CoLA.tsv", ("sst2", "test"): "SST-2.tsv", ("mrpc", "test"): "MRPC.tsv",
        ("stsb", "test"): "STS-B.tsv", ("qqp", "test"): "QQP.tsv",
        ("mnli", "test_matched"): "MNLI-m.tsv", ("mnli", "test_mismatched"): "MNLI-mm.tsv",
        ("mnli", "diagnostic"): "AX.tsv", ("qnli", "test"): "QNLI.tsv", ("rte", "test"): "RTE.tsv",
        ("wnli", "test"): "WNLI.tsv"}
    assert {split: s.file_name for split, s in GLUE_TASKS["mnli"].splits.items()} == {
        "train": "train.tsv", "dev_matched": "dev_matched.tsv",
        "dev_mismatched": "dev_mismatched.tsv", "test_matched": "test_matched.tsv",
        "test_mismatched": "test_mismatched.tsv", "diagnostic": "diagnostic.tsv"}
    for name in ("cola", "sst2", "mrpc", "stsb", "qqp", "qnli", "rte", "wnli"):
        assert {s: GLUE_TASKS[name].splits[s].file_name for s in GLUE_TASKS[name].splits} == {
            "train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    assert {name: task.labels for name, task in GLUE_TASKS.items() if name != "wordnet_gloss"} == {
        "cola": ("0", "1"), "sst2": ("0", "1"), "mrpc": ("0", "1"), "stsb": None,
        "qqp": ("0", "1"), "mnli": ("contradiction", "entailment", "neutral"),
        "qnli": ("entailment", "not_entailment"), "rte": ("entailment", "not_entailment"),
        "wnli": ("0", "1")}
    assert {name: task.metrics for name, task in GLUE_TASKS.items()} == {
        "cola": ("matthews_correlation",), "sst2": ("accuracy",), "mrpc": ("accuracy", "f1"),
        "stsb": ("pearson", "spearman"), "qqp": ("accuracy", "f1"), "mnli": ("accuracy",),
        "qnli": ("accuracy",), "rte": ("accuracy",), "wnli": ("accuracy",),
        "wordnet_gloss": ("accuracy", "matthews_correlation")}
    assert [name for name, task in GLUE_TASKS.items() if task.is_pair] == [
        "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"]
    assert GLUE_TASKS["wordnet_gloss"].labels == tuple(demo.classification_labels())
    assert get_task("mnli").splits_of_role("test") == ("test_matched", "test_mismatched",
                                                       "diagnostic")
    with pytest.raises(ValueError, match="unknown task 'mnli-mm'"):
        get_task("mnli-mm")


# --- reading ---

@pytest.mark.parametrize("task,split", [(task, split) for task in OFFICIAL_LAYOUTS
                                        for split in OFFICIAL_LAYOUTS[task]])
def test_reader_reads_the_official_layout(tmp_path, task, split):
    expected = official_examples(task, split)
    path = write_official_file(tmp_path, task, split)
    examples = list(glue_examples(task, str(path)))
    header_lines = 0 if OFFICIAL_LAYOUTS[task][split][0] is None else 1
    indices = ([str(n) for n in range(len(expected))] if (task, split) in NO_INDEX_COLUMN
               else [index for index, *_ in expected])
    assert [(e.index, e.text_a, e.text_b, e.label) for e in examples] == [
        (index, a, b, label) for index, (_, a, b, label) in zip(indices, expected)]
    assert [e.line for e in examples] == [header_lines + n + 1 for n in range(len(expected))]


def test_reader_takes_an_explicit_split_for_other_file_names_and_gzip(tmp_path):
    path = write_official_file(tmp_path, "mnli", "dev_mismatched")
    renamed = tmp_path / "mm.tsv.gz"
    with gzip.open(renamed, "wb") as file:
        file.write(path.read_bytes())
    with pytest.raises(ValueError, match="not an official mnli file name"):
        list(glue_examples("mnli", str(renamed)))
    examples = list(glue_examples("mnli", str(renamed), split="dev_mismatched"))
    assert examples == list(glue_examples("mnli", str(path)))
    with pytest.raises(ValueError, match="mnli has no split 'dev'"):
        list(glue_examples("mnli", str(path), split="dev"))


def test_crlf_endings_and_a_byte_order_mark_are_not_part_of_the_data(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_bytes("\ufeffindex\tsentence1\tsentence2\tlabel\r\n0\tA b.\tC\rd.\t1\r\n"
                     .encode("utf-8"))
    [example] = glue_examples("wnli", str(path))
    assert (example.index, example.text_a, example.text_b, example.label) == (
        "0", "A b.", "C\rd.", "1")


def test_wordnet_gloss_demo_files_read_through_the_same_path():
    files = demo.classification_files()
    examples = list(glue_examples("wordnet_gloss", files["dev"]))
    with gzip.open(files["dev"], "rt", encoding="utf-8") as file:
        rows = [line.rstrip("\n").split("\t") for line in file][1:]
    assert len(examples) == len(rows) == 11_739
    assert [(e.label, e.text_a, e.text_b) for e in examples] == [(l, t, None) for l, t in rows]
    assert examples[3].index == "3" and examples[3].line == 5
    labels = example_labels("wordnet_gloss", examples)
    assert labels.dtype == np.int32
    assert labels.tolist() == [demo.classification_labels().index(l) for l, _ in rows]


# --- malformed files ---

def assert_error(path, line, pattern, *args, **kwargs):
    with pytest.raises(TaskDataError, match=pattern) as error:
        list(glue_examples(*args, **kwargs))
    message = str(error.value)
    assert f"{path} line {line}:" in message and "\n" not in message


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = write_official_file(tmp_path, "rte", "dev")
    lines = path.read_text().splitlines()
    lines[3] = lines[3].rsplit("\t", 1)[0]
    write_lines(path, lines)
    assert_error(path, 4, "expected 4 tab-separated columns .rte dev., got 3", "rte", str(path))
    cola = write_official_file(tmp_path, "cola", "train")
    write_lines(cola, cola.read_text().splitlines() + ["gj04\t1\tThe end."])
    assert_error(cola, 7, "expected 4 tab-separated columns", "cola", str(cola))


def test_unknown_label_names_file_and_line(tmp_path):
    path = write_official_file(tmp_path, "mnli", "dev_matched")
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rsplit("\t", 1)[0] + "\t-"
    write_lines(path, lines)
    assert_error(path, 3, "unknown mnli label '-'", "mnli", str(path))
    sst = write_lines(tmp_path / "sst2" / "train.tsv", ["sentence\tlabel", "Good.\tpositive"])
    assert_error(sst, 2, "unknown sst2 label 'positive'", "sst2", str(sst))


@pytest.mark.parametrize("score", ["high", "", "nan", "inf"])
def test_non_numeric_stsb_score_names_file_and_line(tmp_path, score):
    path = write_official_file(tmp_path, "stsb", "train",
                               [("0", "A man plays.", "A man sings.", "2.5"),
                                ("1", "A dog runs.", "A cat runs.", score)])
    assert_error(path, 3, "stsb score .* is not a finite number", "stsb", str(path))


def test_empty_splits_and_bad_headers(tmp_path):
    only_header = write_official_file(tmp_path, "qnli", "dev", [])
    assert_error(only_header, 1, "ends without any qnli dev example", "qnli", str(only_header))
    empty_cola = write_lines(tmp_path / "cola" / "dev.tsv", [])
    assert_error(empty_cola, 1, "ends without any cola dev example", "cola", str(empty_cola))
    empty = write_lines(tmp_path / "rte" / "test.tsv", [])
    assert_error(empty, 1, "the file is empty", "rte", str(empty))
    # A test file given as the dev split: the header has no label column.
    test_file = write_official_file(tmp_path, "mnli", "test_matched")
    assert_error(test_file, 1, r"lacks the column\(s\) \['gold_label'\]", "mnli", str(test_file),
                 split="dev_matched")
    not_utf8 = tmp_path / "dev.tsv"
    not_utf8.write_bytes(b"sentence\tlabel\nok\t1\ncaf\xe9\t0\n")
    assert_error(not_utf8, 3, "not UTF-8", "sst2", str(not_utf8))


def test_qqp_skips_lines_with_the_wrong_column_count_and_logs_their_number(tmp_path, caplog):
    path = write_official_file(tmp_path, "qqp", "train")
    lines = path.read_text().splitlines()
    # A question broken over two lines, as in the released QQP files.
    lines[2:2] = ["201\t1\t2\tWhat is", "love?\tWhat's love?\t1"]
    write_lines(path, lines)
    with caplog.at_level(logging.WARNING, logger="kerasbert.data.glue"):
        examples = list(glue_examples("qqp", str(path)))
    assert [e.index for e in examples] == [index for index, *_ in official_examples("qqp", "train")]
    assert [e.line for e in examples][:3] == [2, 5, 6]
    assert "skipped 2 line(s) with the wrong number of columns (lines 3, 4)" in caplog.text
    assert_error(path, 3, "expected 6 tab-separated columns", "qqp", str(path), bad_lines="fail")
    # Unknown labels are never skipped.
    write_lines(path, lines[:1] + ["5\t1\t2\tA?\tB?\tyes"])
    assert_error(path, 2, "unknown qqp label 'yes'", "qqp", str(path))
    with pytest.raises(ValueError, match="bad_lines must be one of"):
        list(glue_examples("qqp", str(path), bad_lines="ignore"))


# --- datasets ---

@pytest.mark.slow
@pytest.mark.parametrize("family,task,split", [("bert", "sst2", "dev"), ("bert", "stsb", "dev"),
                                               ("bert", "mnli", "dev_matched"),
                                               ("roberta", "rte", "dev"),
                                               ("albert", "qnli", "train"),
                                               ("bert", "cola", "test")])
def test_batches_are_packed_as_transformers_packs_them(tmp_path, tokenizers, family, task, split):
    ours, reference = tokenizers[family]
    path = write_official_file(tmp_path, task, split)
    examples = list(glue_examples(task, str(path)))
    dataset = glue_dataset(task, str(path), ours, max_seq_length=24, batch_size=4,
                           length_buckets=False)
    assert dataset.element_spec["token_ids"].shape.as_list() == [None, 24]
    batches = all_batches(dataset)
    texts = [e.text_a for e in examples]
    pairs = [e.text_b for e in examples] if get_task(task).is_pair else None
    expected = reference(texts, pairs, max_length=24, truncation="longest_first",
                         padding="max_length", return_token_type_ids=True)
    assert batches["token_ids"].tolist() == expected["input_ids"]
    assert batches["segment_ids"].tolist() == expected["token_type_ids"]
    assert batches["padding_mask"].tolist() == expected["attention_mask"]
    assert batches["example_index"].tolist() == list(range(len(examples)))
    for name in ("token_ids", "segment_ids", "padding_mask", "example_index"):
        assert batches[name].dtype == np.int32
    if not get_task(task).splits[split].layout.labelled:
        assert "labels" not in batches
    elif get_task(task).is_regression:
        assert batches["labels"].dtype == np.float32
        np.testing.assert_array_equal(batches["labels"], np.float32([e.label for e in examples]))
    else:
        labels = [get_task(task).labels.index(e.label) for e in examples]
        assert batches["labels"].dtype == np.int32 and batches["labels"].tolist() == labels
    # The longest example was truncated, not dropped.
    assert batches["padding_mask"].sum(axis=1).max() == 24


@pytest.mark.slow
def test_shuffling_is_deterministic_under_the_seed_and_reshuffles_every_pass(tmp_path, tokenizers):
    rows = [(str(n), f"Sentence number {n}.", None, str(n % 2)) for n in range(20)]
    path = write_official_file(tmp_path, "sst2", "train", rows)
    tokenizer = tokenizers["bert"][0]

    def passes(seed, count):
        """The example order of each of `count` passes (one iterator), and the last batches."""
        dataset = glue_dataset("sst2", str(path), tokenizer, max_seq_length=12, batch_size=8,
                               shuffle=True, seed=seed)
        batches = all_batches(dataset.repeat(count))
        return batches["example_index"].reshape(count, 20).tolist(), batches

    (first, second), batches = passes(seed=1, count=2)
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != second
    order = first + second
    assert batches["labels"].tolist() == [int(rows[i][3]) for i in order]
    packed = tokenizer([rows[i][1] for i in order], max_length=12)
    np.testing.assert_array_equal(batches["token_ids"], packed["token_ids"])
    assert passes(seed=1, count=2)[0] == [first, second]
    assert passes(seed=2, count=1)[0] != [first]


@pytest.mark.parametrize("length_buckets", [False, True])
def test_wordnet_gloss_demo_dataset(tokenizers, length_buckets):
    dataset = glue_dataset("wordnet_gloss", demo.classification_files()["test"],
                           tokenizers["bert"][0], max_seq_length=32, batch_size=64,
                           drop_remainder=True, length_buckets=length_buckets)
    length = None if length_buckets else 32
    assert dataset.element_spec["token_ids"].shape.as_list() == [64, length]
    assert dataset.element_spec["labels"].shape.as_list() == [64]
    assert dataset.cardinality() == 11_574 // 64
    batch = next(iter(dataset))
    assert batch["token_ids"].shape[1] in ((16, 32) if length_buckets else (32,))
    assert tf.reduce_all(batch["segment_ids"] == 0)
    assert 0 <= int(tf.reduce_min(batch["labels"])) and int(tf.reduce_max(batch["labels"])) < 45


def test_predictions_from_logits():
    logits = np.array([[0.1, 0.3, 0.2], [2.0, -1.0, 0.0]], np.float32)
    assert predictions_from_logits("mnli", logits).tolist() == [1, 0]
    np.testing.assert_array_equal(predictions_from_logits("stsb", [[1.5], [4.25]]), [1.5, 4.25])
    with pytest.raises(ValueError, match=r"shape \[examples, 2\]"):
        predictions_from_logits("rte", logits)


# --- prediction files ---

def read_tsv(path):
    with open(path, encoding="utf-8", newline="") as file:
        return list(csv.reader(file, delimiter="\t"))


@pytest.mark.parametrize("task,split", [(task, split) for task in OFFICIAL_LAYOUTS
                                        for split in GLUE_TASKS[task].splits_of_role("dev")])
def test_dev_predictions_round_trip(tmp_path, task, split):
    examples = list(glue_examples(task, str(write_official_file(tmp_path, task, split))))
    rng = np.random.default_rng(0)
    spec = get_task(task)
    predictions = (rng.uniform(-0.5, 5.5, len(examples)) if spec.is_regression
                   else rng.integers(0, spec.num_labels, len(examples)))
    path = write_dev_predictions(str(tmp_path / "dev_predictions.tsv"), task, examples,
                                 predictions)
    header, *rows = read_tsv(path)
    assert header == ["index", "prediction"]
    assert [index for index, _ in rows] == [e.index for e in examples]
    if spec.is_regression:  # written unclipped, 3 decimals
        np.testing.assert_allclose([float(value) for _, value in rows], predictions, atol=5e-4)
    else:
        assert [spec.labels.index(value) for _, value in rows] == predictions.tolist()
        # Labels are written as the data file writes them.
        assert {value for _, value in rows} <= set(OFFICIAL_LABELS[task])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("task,split", [(task, split) for task in OFFICIAL_LAYOUTS
                                        for split in GLUE_TASKS[task].splits_of_role("test")])
def test_test_predictions_in_glue_submission_format(tmp_path, task, split):
    examples = list(glue_examples(task, str(write_official_file(tmp_path, task, split))))
    spec = get_task(task)
    predictions = (np.array([-0.7, 0.25, 5.3, 4.9996, 2.0, 3.1234])[:len(examples)]
                   if spec.is_regression else np.arange(len(examples)) % spec.num_labels)
    path = write_test_predictions(str(tmp_path / "out"), task, split, examples, predictions)
    assert path == str(tmp_path / "out" / spec.splits[split].submission_file)
    header, *rows = read_tsv(path)
    assert header == ["index", "prediction"]
    assert [index for index, _ in rows] == [index for index, *_ in official_examples(task, split)]
    if spec.is_regression:
        assert [value for _, value in rows] == ["0.000", "0.250", "5.000", "5.000", "2.000",
                                                "3.123"]
    else:
        assert [value for _, value in rows] == [spec.labels[p] for p in predictions]
    if task == "mnli":
        assert {value for _, value in rows} == {"contradiction", "entailment", "neutral"}


def test_prediction_writers_check_their_inputs(tmp_path):
    examples = list(glue_examples("rte", str(write_official_file(tmp_path, "rte", "dev"))))
    with pytest.raises(ValueError, match="6 examples but predictions of shape"):
        write_dev_predictions(str(tmp_path / "p.tsv"), "rte", examples, [0, 1])
    for wrong in ([0, 1, 2, 0, 1, 0], [0, 1, -1, 0, 1, 0], [0, 0.5, 1, 0, 1, 0]):
        with pytest.raises(ValueError, match="rte predictions must be label ids 0-1"):
            write_dev_predictions(str(tmp_path / "p.tsv"), "rte", examples, wrong)
    with pytest.raises(ValueError, match="has no GLUE submission file"):
        write_test_predictions(str(tmp_path), "rte", "dev", examples, [0] * 6)
    with pytest.raises(ValueError, match="has no GLUE submission file"):
        write_test_predictions(str(tmp_path), "wordnet_gloss", "test", examples, [0] * 6)
    assert not (tmp_path / "p.tsv").exists()


def test_examples_dataset_needs_examples(tokenizers):
    with pytest.raises(ValueError, match="no examples"):
        examples_dataset("rte", [], tokenizers["bert"][0])
