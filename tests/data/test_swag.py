"""SWAG reader, multiple-choice batches and prediction file, on tiny CSV files in SWAG's layout."""

import csv

import numpy as np
import pytest
import sklearn.metrics
import transformers

import kerasbert.data.demo as demo
import kerasbert.zoo
from kerasbert.data.swag import (METRICS, swag_dataset, swag_examples, swag_examples_dataset,
                                 swag_labels, write_swag_predictions)
from kerasbert.data.task_errors import TaskDataError
from kerasbert.training.glue_metrics import compute_metrics

HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0",
          "ending1", "ending2", "ending3", "label"]
# (sent1, sent2, endings, label), in the spirit of SWAG's val.csv.
ROWS = [
    ("Students lower their eyes nervously.", "She",
     ("pats her shoulder, then saunters toward someone.", "turns with two students.",
      "walks slowly towards someone.", "wheels around as her dog thunders out."), 2),
    ('He rides the motorcycle down the hall and into the elevator. He', "looks",
     ('at a mirror in the mirror as he watches someone walk through a door.',
      'down the corridor, "then" through the elevator doors.', "into the lift.",
      "at the floor,\nthen stands."), 1),
    ("The playback button is pressed.", "Someone",
     ("nods.", "smiles at the screen.", "leaves.", "wipes his eyes."), 0),
    ("A man is sitting on a roof.", "He",
     ("is using wrap to wrap a pair of skis.", "is ripping level tiles off.",
      "is holding a rubik's cube.", "starts pulling up roofing on a roof."), 3),
    ("Someone opens the door.", "The room",
     ("is dark.", "is full of people, all of them shouting.", "smells.", "is empty."), 0),
]


def write_swag(path, rows=ROWS, header=HEADER, labelled=True):
    """Write a SWAG CSV as pandas wrote the released files (index column, minimal quoting)."""
    header = header if labelled else header[:-1]
    with open(path, "w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        for number, (sent1, sent2, endings, label) in enumerate(rows):
            row = {"": str(10 + number), "video-id": f"anetv_{number}",
                   "fold-ind": str(5000 + number),
                   "startphrase": f"{sent1} {sent2}", "sent1": sent1, "sent2": sent2,
                   "gold-source": "gold", "label": str(label),
                   **{f"ending{i}": ending for i, ending in enumerate(endings)}}
            writer.writerow([row[name] for name in header])
    return path


@pytest.fixture(scope="module")
def bert():
    """(ours, transformers' BertTokenizerFast) over the shipped WordPiece vocabulary (not
    `BertTokenizerFast(vocab_file=...)`: in transformers 5 that keeps only the special tokens)."""
    return (kerasbert.zoo.build_tokenizer("bert_tiny_uncased", demo.vocabulary_dir("wordpiece")),
            transformers.BertTokenizerFast.from_pretrained(demo.vocabulary_dir("wordpiece")))


def test_reader_builds_the_pairs_as_run_swag(tmp_path):
    path = write_swag(tmp_path / "val.csv")
    examples = list(swag_examples(str(path)))
    assert [e.index for e in examples] == ["10", "11", "12", "13", "14"]
    assert [e.label for e in examples] == [2, 1, 0, 3, 0]
    # The second record spans two lines (a quoted newline), so the third starts on line 5.
    assert [e.line for e in examples] == [2, 3, 5, 6, 7]
    for example, (sent1, sent2, endings, _) in zip(examples, ROWS):
        assert example.pairs() == [(sent1, f"{sent2} {ending}") for ending in endings]
    assert swag_labels(examples).tolist() == [2, 1, 0, 3, 0]


def test_test_file_and_files_without_the_index_column(tmp_path):
    test = write_swag(tmp_path / "test.csv", labelled=False)
    examples = list(swag_examples(str(test)))
    assert [e.label for e in examples] == [None] * 5
    with pytest.raises(ValueError, match="unlabelled"):
        swag_labels(examples)
    with pytest.raises(TaskDataError, match=r"line 1: the header lacks the column.s. \['label'\]"):
        list(swag_examples(str(test), labelled=True))
    plain = write_swag(tmp_path / "plain.csv", header=HEADER[4:])
    examples = list(swag_examples(str(plain)))
    assert [e.index for e in examples] == ["0", "1", "2", "3", "4"]
    assert [e.endings for e in examples] == [endings for _, _, endings, _ in ROWS]


@pytest.mark.parametrize("content,line,pattern", [
    (",sent1,sent2,ending0,ending1,ending2,ending3,label\n0,a,b,c,d,e,f,1\n1,a,b,c,d,e,1\n", 3,
     "expected 8 fields, got 7"),
    (",sent1,sent2,ending0,ending1,ending2,ending3,label\n0,a,b,c,d,e,f,4\n", 2,
     "SWAG label '4' is not an ending number 0-3"),
    (",sent1,sent2,ending0,ending1,ending2,ending3,label\n0,a,b,c,d,e,f,\n", 2,
     "SWAG label '' is not"),
    (",sent1,sent2,ending0,ending1,ending3,label\n", 1, r"lacks the column\(s\) \['ending2'\]"),
    (",sent1,sent2,ending0,ending1,ending2,ending3,label\n", 1, "ends without any SWAG example"),
    ("", 1, "the file is empty"),
    (',sent1,sent2,ending0,ending1,ending2,ending3,label\n0,a,b,c,d,e,f,1\n1,"a"x,b,c,d,e,f,1\n',
     3, "malformed CSV"),
])
def test_malformed_files_name_file_and_line(tmp_path, content, line, pattern):
    path = tmp_path / "train.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TaskDataError, match=pattern) as error:
        list(swag_examples(str(path)))
    assert f"{path} line {line}:" in str(error.value)


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b"sent1,sent2,ending0,ending1,ending2,ending3,label\n"
                     b"a,b,c,d,e,f,1\na,b,caf\xe9,d,e,f,1\n")
    with pytest.raises(TaskDataError, match=f"{path} line 3: not UTF-8"):
        list(swag_examples(str(path)))


@pytest.mark.slow
def test_batches_hold_the_four_pairs_packed_as_transformers_packs_them(tmp_path, bert):
    ours, reference = bert
    path = write_swag(tmp_path / "val.csv")
    examples = list(swag_examples(str(path)))
    dataset = swag_dataset(str(path), ours, max_seq_length=20, batch_size=2,
                           length_buckets=False)
    assert dataset.element_spec["token_ids"].shape.as_list() == [None, 4, 20]
    batches = [{name: value.numpy() for name, value in batch.items()} for batch in dataset]
    merged = {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}
    pairs = [pair for example in examples for pair in example.pairs()]
    expected = reference([a for a, _ in pairs], [b for _, b in pairs], max_length=20,
                         truncation="longest_first", padding="max_length")
    for ours_name, theirs_name in (("token_ids", "input_ids"), ("segment_ids", "token_type_ids"),
                                   ("padding_mask", "attention_mask")):
        assert merged[ours_name].dtype == np.int32
        assert merged[ours_name].shape == (5, 4, 20)
        assert merged[ours_name].reshape(20, 20).tolist() == expected[theirs_name]
    assert merged["labels"].dtype == np.int32 and merged["labels"].tolist() == [2, 1, 0, 3, 0]
    assert merged["example_index"].tolist() == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_shuffled_batches_keep_inputs_and_labels_together(tmp_path, bert):
    tokenizer = bert[0]
    examples = list(swag_examples(str(write_swag(tmp_path / "train.csv"))))

    def two_passes(seed):
        dataset = swag_examples_dataset(examples, tokenizer, max_seq_length=20, batch_size=5,
                                        shuffle=True, seed=seed, drop_remainder=True,
                                        length_buckets=False)
        assert dataset.element_spec["token_ids"].shape.as_list() == [5, 4, 20]
        return [{name: value.numpy() for name, value in batch.items()}
                for batch in dataset.repeat(2)]

    first, second = two_passes(seed=7)
    assert sorted(first["example_index"].tolist()) == [0, 1, 2, 3, 4]
    assert first["example_index"].tolist() != second["example_index"].tolist()
    for batch in (first, second):
        order = batch["example_index"]
        pairs = [pair for i in order for pair in examples[i].pairs()]
        packed = tokenizer([a for a, _ in pairs], [b for _, b in pairs], max_length=20)
        np.testing.assert_array_equal(batch["token_ids"].reshape(20, 20), packed["token_ids"])
        assert batch["labels"].tolist() == [examples[i].label for i in order]
    again = two_passes(seed=7)
    assert [batch["example_index"].tolist() for batch in again] == [
        first["example_index"].tolist(), second["example_index"].tolist()]


def test_unlabelled_batches_have_no_labels(tmp_path, bert):
    path = write_swag(tmp_path / "test.csv", labelled=False)
    batch = next(iter(swag_dataset(str(path), bert[0], max_seq_length=16)))
    assert sorted(batch) == ["example_index", "padding_mask", "segment_ids", "token_ids"]


def test_predictions_file_round_trips_and_accuracy_equals_sklearn(tmp_path):
    examples = list(swag_examples(str(write_swag(tmp_path / "val.csv"))))
    predictions = np.array([2, 0, 0, 3, 1])
    path = write_swag_predictions(str(tmp_path / "dev_predictions.tsv"), examples, predictions)
    with open(path, encoding="utf-8", newline="") as file:
        header, *rows = list(csv.reader(file, delimiter="\t"))
    assert header == ["index", "prediction"]
    assert rows == [[e.index, str(p)] for e, p in zip(examples, predictions)]
    labels = swag_labels(examples)
    assert METRICS == ("accuracy",)
    assert compute_metrics(METRICS, labels, predictions) == {
        "accuracy": sklearn.metrics.accuracy_score(labels, predictions)}
    with pytest.raises(ValueError, match="ending numbers 0-3"):
        write_swag_predictions(str(tmp_path / "bad.tsv"), examples, [0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="5 examples but predictions of shape"):
        write_swag_predictions(str(tmp_path / "bad.tsv"), examples, [0, 1])
    assert not (tmp_path / "bad.tsv").exists()
