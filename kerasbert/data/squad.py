"""SQuAD v1.1 and v2.0 JSON files -> checked question examples.

    read_squad(path)                      one `SquadExample` per question, in file order
    squad_windows(examples, tokenizer)    windows of each context (`data.squad_features`)
    squad_dataset(features)               `tf.data` batches of those windows
    decode_squad(examples, features, ...) logits -> answer texts (`kerasbert.data.squad_decoding`)

The files are read as distributed: `{"version", "data": [{"title", "paragraphs": [{"context",
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible",
"plausible_answers"}]}]}]}`; `is_impossible` (v2.0 only) defaults to false and
`plausible_answers` are not used. Everything is checked: a file that is not JSON, a missing or
mistyped field, a question id used twice, an answerable question without answers (or an
impossible one with answers), an answer whose text is not at its `answer_start` in the context,
and a file without questions raise `TaskDataError` naming the file and the question id (or, where
there is none, the position in the file).
"""

import dataclasses
import json
import typing

from kerasbert import file_system
from kerasbert.data.task_errors import TaskDataError


class SquadAnswer(typing.NamedTuple):
    """One gold answer: its `text` and the character where it starts in the context.

    >>> answer = SquadAnswer("Denver Broncos", 177)
    >>> answer.end
    191
    """

    text: str
    start: int

    @property
    def end(self):
        """The character after the answer (exclusive end)."""
        return self.start + len(self.text)


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context, with its gold answers (none when it is impossible).

    >>> example = SquadExample("q1", "Who won?", "The Broncos won.", (SquadAnswer("Broncos", 4),))
    >>> example.context[example.answers[0].start:example.answers[0].end], example.is_impossible
    ('Broncos', False)
    """

    qas_id: str
    question: str
    context: str
    answers: tuple = ()
    is_impossible: bool = False


def read_squad(path):
    """The questions of the SQuAD v1.1 or v2.0 file at `path`, as a list of `SquadExample`s.

    Answers keep the file's order (the first is the training target); each is
    checked to be at its stated `answer_start`. Raises `TaskDataError` (naming
    the file and the question id) for malformed files, see the module docstring.

    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev-v2.0.json")
    >>> context = "Paris is the capital of France."
    >>> qas = [{"id": "a", "question": "What is the capital of France?",
    ...         "answers": [{"text": "Paris", "answer_start": 0}], "is_impossible": False},
    ...        {"id": "b", "question": "What is the capital of Peru?", "answers": [],
    ...         "is_impossible": True}]
    >>> with open(path, "w") as f:
    ...     json.dump({"version": "v2.0", "data": [{"title": "France", "paragraphs": [
    ...         {"context": context, "qas": qas}]}]}, f)
    >>> [(e.qas_id, e.answers, e.is_impossible) for e in read_squad(path)]
    [('a', (SquadAnswer(text='Paris', start=0),), False), ('b', (), True)]
    """
    try:
        with file_system.open_file(path, encoding="utf-8") as file:
            data = json.load(file)
    except UnicodeDecodeError as error:
        raise TaskDataError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})"
                            ) from None
    except json.JSONDecodeError as error:
        raise TaskDataError(f"{path} line {error.lineno}: invalid JSON ({error.msg})") from None
    articles = _field(data, "data", list, path, "the top level")
    examples, seen = [], set()
    for article_number, article in enumerate(articles):
        where = f"data[{article_number}]"
        paragraphs = _field(article, "paragraphs", list, path, where)
        for paragraph_number, paragraph in enumerate(paragraphs):
            where = f"data[{article_number}].paragraphs[{paragraph_number}]"
            context = _field(paragraph, "context", str, path, where)
            for question_number, qa in enumerate(_field(paragraph, "qas", list, path, where)):
                qas_id = _field(qa, "id", str, path, f"{where}.qas[{question_number}]")
                if qas_id in seen:
                    raise TaskDataError(f"{path}: question id {qas_id!r} is used twice")
                seen.add(qas_id)
                examples.append(_example(qa, qas_id, context, path))
    if not examples:
        raise TaskDataError(f"{path}: the file holds no questions")
    return examples


def _example(qa, qas_id, context, path):
    where = f"question {qas_id!r}"
    question = _field(qa, "question", str, path, where)
    is_impossible = qa.get("is_impossible", False)
    if not isinstance(is_impossible, bool):
        raise TaskDataError(f"{path}: {where}: 'is_impossible' must be true or false, "
                            f"got {is_impossible!r}")
    answers = []
    for number, answer in enumerate(_field(qa, "answers", list, path, where)):
        answer_where = f"{where} answer {number}"
        text = _field(answer, "text", str, path, answer_where)
        start = _field(answer, "answer_start", int, path, answer_where)
        if not text:
            raise TaskDataError(f"{path}: {answer_where}: the answer text is empty")
        found = context[start:start + len(text)] if 0 <= start else ""
        if found != text:
            raise TaskDataError(f"{path}: {answer_where}: {text!r} is not at character {start} "
                                f"of the context (found {found!r} there)")
        answers.append(SquadAnswer(text, start))
    if is_impossible and answers:
        raise TaskDataError(f"{path}: {where} is marked is_impossible but has answers "
                            "(put them under 'plausible_answers')")
    if not is_impossible and not answers:
        raise TaskDataError(f"{path}: {where} has no answers and is not marked is_impossible")
    return SquadExample(qas_id, question, context, tuple(answers), is_impossible)


def _field(mapping, key, kind, path, where):
    """`mapping[key]`, checked to be a `kind` (bool is no int here)."""
    if not isinstance(mapping, dict):
        raise TaskDataError(f"{path}: {where}: expected a JSON object, got {_json_type(mapping)}")
    if key not in mapping:
        raise TaskDataError(f"{path}: {where}: missing field {key!r}")
    value = mapping[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TaskDataError(f"{path}: {where}: field {key!r} must be {_json_type(kind())}, "
                            f"got {_json_type(value)}")
    return value


def _json_type(value):
    names = {dict: "an object", list: "an array", str: "a string", int: "an integer",
             float: "a number", bool: "true/false", type(None): "null"}
    return names.get(type(value), type(value).__name__)
