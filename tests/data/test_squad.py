"""read_squad: SQuAD v1.1 / v2.0 files as distributed -> examples; bad files -> TaskDataError."""

import json

import pytest

from kerasbert.data.squad import SquadAnswer, SquadExample, read_squad
from kerasbert.data.task_errors import TaskDataError

CONTEXT = "Super Bowl 50 was won by the Denver Broncos, who beat the Carolina Panthers 24–10."
UNICODE_CONTEXT = "Naïve café owners 🎉 met in Zürich in 1999."


def _write(tmp_path, data, name="dev.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def _squad(qas, context=CONTEXT, version="1.1"):
    return {"version": version, "data": [{"title": "T", "paragraphs": [{"context": context,
                                                                         "qas": qas}]}]}


def _qa(qas_id, text, start, **extra):
    return {"id": qas_id, "question": f"Question {qas_id}?",
            "answers": [{"text": text, "answer_start": start}], **extra}


def test_reads_v1_1_in_file_order_with_every_answer(tmp_path):
    data = {"version": "1.1", "data": [
        {"title": "Super_Bowl_50", "paragraphs": [
            {"context": CONTEXT, "qas": [
                {"id": "56be4db0acb8001400a502ec", "question": "Who won Super Bowl 50?",
                 "answers": [{"text": "Denver Broncos", "answer_start": 29},
                             {"text": "the Denver Broncos", "answer_start": 25},
                             {"text": "Denver Broncos", "answer_start": 29}]},
                _qa("second", "Carolina Panthers", 58)]}]},
        {"title": "Zürich", "paragraphs": [
            {"context": UNICODE_CONTEXT,
             "qas": [_qa("third", "Zürich", UNICODE_CONTEXT.index("Zürich"))]},
            {"context": "Empty paragraphs are allowed.", "qas": []}]}]}
    examples = read_squad(_write(tmp_path, data))
    assert [e.qas_id for e in examples] == ["56be4db0acb8001400a502ec", "second", "third"]
    assert examples[0] == SquadExample(
        "56be4db0acb8001400a502ec", "Who won Super Bowl 50?", CONTEXT,
        (SquadAnswer("Denver Broncos", 29), SquadAnswer("the Denver Broncos", 25),
         SquadAnswer("Denver Broncos", 29)), False)
    # Offsets count code points, as Python indexes a str (the emoji is one character).
    third = examples[2]
    assert third.context[third.answers[0].start:third.answers[0].end] == "Zürich"
    assert not any(e.is_impossible for e in examples)


def test_reads_v2_0_impossible_questions_and_ignores_plausible_answers(tmp_path):
    qas = [_qa("answerable", "Denver Broncos", 29, is_impossible=False),
           {"id": "impossible", "question": "Who lost Super Bowl 51?", "answers": [],
            "plausible_answers": [{"text": "Carolina Panthers", "answer_start": 58}],
            "is_impossible": True}]
    examples = read_squad(_write(tmp_path, _squad(qas, version="v2.0")))
    assert [(e.qas_id, e.answers, e.is_impossible) for e in examples] == [
        ("answerable", (SquadAnswer("Denver Broncos", 29),), False), ("impossible", (), True)]


def _error_cases():
    good = _qa("q1", "Denver Broncos", 29)
    return {
        "invalid JSON": ('{"version": "1.1",\n "data": [}', r"line 2: invalid JSON"),
        "not UTF-8": (b'{"data": "caf\xe9"}', "not UTF-8"),
        "empty file": ("", r"line 1: invalid JSON"),
        "no data field": ({"version": "1.1"}, "missing field 'data'"),
        "no questions": (_squad([]), "holds no questions"),
        "missing context": ({"data": [{"paragraphs": [{"qas": [good]}]}]},
                            r"data\[0\]\.paragraphs\[0\]: missing field 'context'"),
        "missing id": (_squad([good, {"question": "Who?", "answers": []}]),
                       r"data\[0\]\.paragraphs\[0\]\.qas\[1\]: missing field 'id'"),
        "missing question": (_squad([{"id": "q7", "answers": []}]),
                             "question 'q7': missing field 'question'"),
        "missing answers": (_squad([{"id": "q7", "question": "Who?"}]),
                            "question 'q7': missing field 'answers'"),
        "missing answer_start": (
            _squad([{"id": "q7", "question": "Who?", "answers": [{"text": "Denver"}]}]),
            "question 'q7' answer 0: missing field 'answer_start'"),
        "answer_start not an integer": (_squad([_qa("q7", "Denver", "29")]),
                                        "'answer_start' must be an integer, got a string"),
        "answer_start true": (_squad([_qa("q7", "S", True)]), "got true/false"),
        "answer not at its start": (
            _squad([good, _qa("q8", "Denver Broncos", 28)]),
            r"question 'q8' answer 0: 'Denver Broncos' is not at character 28 of the context "
            r"\(found ' Denver Bronco' there\)"),
        "answer beyond the context": (_squad([_qa("q8", "Broncos", 500)]),
                                      "'Broncos' is not at character 500"),
        "negative answer_start": (_squad([_qa("q8", "Super", -5)]), "not at character -5"),
        "empty answer text": (_squad([_qa("q8", "", 3)]), "question 'q8' answer 0: the answer "
                                                          "text is empty"),
        "no answers, not impossible": (_squad([{"id": "q9", "question": "Who?", "answers": []}]),
                                       "question 'q9' has no answers and is not marked"),
        "impossible with answers": (_squad([_qa("q9", "Denver", 29, is_impossible=True)]),
                                    "question 'q9' is marked is_impossible but has answers"),
        "is_impossible not a bool": (_squad([_qa("q9", "Denver", 29, is_impossible="no")]),
                                     "question 'q9': 'is_impossible' must be true or false"),
        "duplicate id": (_squad([good, _qa("q1", "Broncos", 36)]),
                         "question id 'q1' is used twice"),
        "paragraphs not a list": ({"data": [{"paragraphs": {}}]},
                                  r"data\[0\]: field 'paragraphs' must be an array, got an object"),
        "question not an object": (_squad(["q1"]),
                                   r"qas\[0\]: expected a JSON object, got a string"),
    }


@pytest.mark.parametrize("case", sorted(_error_cases()))
def test_malformed_files_raise_task_data_error_naming_file_and_question(tmp_path, case):
    data, message = _error_cases()[case]
    path = tmp_path / "train-v2.0.json"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        _write(tmp_path, data, path.name)
    with pytest.raises(TaskDataError, match=message) as raised:
        read_squad(str(path))
    text = str(raised.value)
    assert text.startswith(str(path)) and "\n" not in text
    assert isinstance(raised.value, ValueError)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_squad(str(tmp_path / "absent.json"))
