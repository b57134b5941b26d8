"""Answers to raw text from an export's signatures, in the runtimes that serve them: what
`kerasbert-predict` (alias `kerasbert-classify`) runs.

Each record (a dict) goes to the signature of the exported model's task, and comes back with the
answer fields added:

| task | record fields | signature | answer fields |
|---|---|---|---|
| sequence classification | `text` (and `text_pair`) | `serve_text` (`serve_text_pair`) | `label`, `probabilities` (`{label: p}`); regression: `score` |
| token classification | `text` | `serve_entities` | `entities`: `[{entity, word, start, end, score}]` |
| span QA | `question`, `context` | `serve_question` | `answer`, `start`, `end`, `score` (v2.0: `has_answer`) |
| multiple choice | `context`, `choices` | `serve_choices` | `choice`, `probabilities` |
| text embedding | `text` | `serve_embedding` | `embedding` (a list of floats) |

`search` ranks the records of a text embedding export against a query instead: the top k by
cosine similarity, each with its `cosine` and `rank`.

Runtimes: the SavedModel (`saved_model`, as TF Serving runs it) and, for a classifier, an
embedding model, a span QA model or a token classifier, the raw-text TFLite file too (`tflite`,
as a phone runs it: `serve_text`, `serve_question`, `serve_entities`); with both, their
answers (labels, spans, entities, choices; vectors to a cosine similarity of
`FLOAT_MIN_COSINE`) must agree, else an `ExportError` names the record.

The export folder may be local or a TensorFlow file-system URL (`gs://...`): an artifact is then
run from a local copy. Artifacts run in this process, so use exports you trust; the paths its
`export_report.json` gives must lead to files inside the export folder.
"""

import contextlib
import json
import os
import posixpath
import sys
import warnings

import numpy as np

from kerasbert import file_system
from kerasbert.choices import PREDICT_RUNTIMES as RUNTIMES
from kerasbert.export.answer_signatures import SIGNATURES
from kerasbert.export.embedding_answers import FLOAT_MIN_COSINE
from kerasbert.export.artifact_runner import saved_model_runner, tflite_runner
from kerasbert.export.errors import ExportError
from kerasbert.export.exporter import REPORT_FILE, TEXT_TFLITE_FILE
from kerasbert.export.text_tflite import SIGNATURE_KEY, TEXT_INPUT
from kerasbert.export.text_tflite_answers import TEXT_TFLITE_ANSWERS
from kerasbert.json_files import read_json_file

INPUT_FORMATS = ("auto", "text", "jsonl")
_FIELDS = {"sequence_classification": ("text",), "token_classification": ("text",),
           "question_answering": ("question", "context"), "multiple_choice": ("context", "choices"),
           "text_embedding": ("text",)}
# The tasks model_text.tflite serves: through `serve_text` (the model's outputs and answers), or
# through the answer signature of `TEXT_TFLITE_ANSWERS` (span QA, entities).
_TEXT_TFLITE_TASKS = ("sequence_classification", "text_embedding", *TEXT_TFLITE_ANSWERS)


def read_report(export_dir):
    """`export_dir`'s `export_report.json` as a dict.

    >>> import tempfile
    >>> read_report(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    kerasbert.export.errors.ExportError: ...export_report.json: no such file; ...
    """
    path = file_system.join(export_dir, REPORT_FILE)
    if not file_system.isfile(path):
        raise ExportError(f"{path}: no such file; {export_dir} is not a kerasbert-export folder")
    return read_json_file(path, "a kerasbert-export report")


def exported_task(export_dir):
    """The task of `export_dir`'s model (`sequence_classification`, ...), from its report; an
    `ExportError` for a model without one (an encoder or a pretraining model)."""
    model = read_report(export_dir)["model"]
    task = model.get("task") or ("sequence_classification" if model.get("labels") else None)
    if task not in _FIELDS:
        raise ExportError(f"{file_system.join(export_dir, REPORT_FILE)}: the exported model "
                          f"({model.get('name')}) is not a task model; nothing to predict")
    return task


def default_runtimes(export_dir):
    """Both runtimes for a classifier or embedding export with `model_text.tflite`, else the
    SavedModel."""
    report = read_report(export_dir)
    task = exported_task(export_dir)
    text_tflite = report["artifacts"].get(TEXT_TFLITE_FILE)
    if task in _TEXT_TFLITE_TASKS and text_tflite is not None and (
            _text_tflite_signature(task) in text_tflite.get("signatures", {SIGNATURE_KEY: {}})):
        return list(RUNTIMES)
    return ["saved_model"]


def _text_tflite_signature(task):
    return TEXT_TFLITE_ANSWERS.get(task, SIGNATURE_KEY)


def predict(export_dir, records, runtimes=None):
    """`records` (dicts with the task's fields, see the module docstring) with their answers.

    Raises `ExportError` naming the first record on which two runtimes give different answers,
    or a record that lacks a field.
    """
    task = exported_task(export_dir)
    runtimes = list(runtimes or default_runtimes(export_dir))
    unknown = [runtime for runtime in runtimes if runtime not in RUNTIMES]
    if unknown:
        raise ExportError(f"unknown runtime {unknown[0]!r}; choose from {list(RUNTIMES)}")
    if "tflite" in runtimes and task not in _TEXT_TFLITE_TASKS:
        raise ExportError(f"the tflite runtime serves classifiers, embedding, span QA and token "
                          f"classification models only (model_text.tflite); this export's "
                          f"model is for {task}: use "
                          "--runtimes=saved_model")
    for number, record in enumerate(records, 1):
        missing = [field for field in _FIELDS[task] if field not in record]
        if missing:
            raise ExportError(f"record {number} ({_shown(record)}) has no {missing[0]!r} field; a "
                              f"{task} export needs {' and '.join(_FIELDS[task])}")
    labels = read_report(export_dir)["model"].get("labels")
    answers = {runtime: [_answer(task, outputs, labels) for outputs in
                         _outputs(export_dir, runtime, task, records)] for runtime in runtimes}
    first, *others = runtimes
    for other in others:
        for record, a, b in zip(records, answers[first], answers[other]):
            if task == "text_embedding":
                cosine = _cosines(np.array([a["embedding"]]), np.array(b["embedding"]))[0]
                if cosine < FLOAT_MIN_COSINE:
                    raise ExportError(f"{first} and {other} embed {_shown(record)} to vectors "
                                      f"of cosine similarity {cosine:.6f} < {FLOAT_MIN_COSINE}")
            elif _decision(a) != _decision(b):
                raise ExportError(f"{first} says {_decision(a)} but {other} says "
                                  f"{_decision(b)} for {_shown(record)}")
    return [{**record, **answer, "runtimes": runtimes}
            for record, answer in zip(records, answers[first])]


def search(export_dir, query, records, top_k=10, runtimes=None):
    """The `top_k` of `records` (dicts with `text`) nearest to `query` in a text embedding
    export, best first: each record with its `cosine` similarity and `rank` (1 first).

    Brute force (every record embedded, one matrix product): fine for thousands to about a
    million lines; past that, index the vectors `predict` writes with an approximate
    nearest-neighbour library (ScaNN, FAISS) instead.
    """
    if exported_task(export_dir) != "text_embedding":
        raise ExportError(f"{export_dir}: --query searches a text embedding export; this one's "
                          f"model is for {exported_task(export_dir)}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ExportError(f"top_k must be a positive integer, got {top_k!r}")
    embedded = predict(export_dir, [{"text": query}] + list(records), runtimes)
    vectors = np.array([row["embedding"] for row in embedded])
    cosines = _cosines(vectors[1:], vectors[0])
    order = np.argsort(-cosines, kind="stable")[:top_k]
    return [{**records[index], "cosine": float(cosines[index]), "rank": rank}
            for rank, index in enumerate(order, 1)]


def read_records(input_file, input_format="auto"):
    """The records of `input_file` (standard input when it is None or "-"): one text a line
    (`text`; records `{"text": line}`) or one JSON object a line (`jsonl`); `auto` picks `jsonl`
    for `.jsonl` / `.json` files. Blank lines are skipped; an `ExportError` names a line that
    is not a JSON object, or a file with none."""
    if input_format not in INPUT_FORMATS:
        raise ExportError(f"unknown input format {input_format!r}; choose from "
                          f"{list(INPUT_FORMATS)}")
    from_stdin = input_file in (None, "-")
    if input_format == "auto":
        input_format = "jsonl" if not from_stdin and input_file.endswith(
            (".jsonl", ".json")) else "text"
    text = sys.stdin.read() if from_stdin else file_system.read_text(input_file)
    input_file = "standard input" if from_stdin else input_file
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if input_format == "text":
            records.append({"text": line.strip()})
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise ExportError(f"{input_file} line {number}: not JSON ({error})") from None
        if not isinstance(record, dict):
            raise ExportError(f"{input_file} line {number}: a JSON {type(record).__name__}, not "
                              "an object with the task's fields")
        records.append(record)
    if not records:
        raise ExportError(f"{input_file}: no records (no non-blank line)")
    return records


def predict_file(export_dir, input_file, input_format="auto", runtimes=None, output_file=None,
                 query=None, top_k=10):
    """`predict` the records of `input_file` (`read_records`), or with a `query` `search`
    them for its `top_k` nearest, and write the results, one JSON object a line, to
    `output_file` (written atomically) or, without one, print them; the results."""
    from kerasbert.atomic_files import write_atomically

    records = read_records(input_file, input_format)
    predictions = (predict(export_dir, records, runtimes) if query is None else
                   search(export_dir, query, records, top_k, runtimes))
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in predictions)
    if output_file:
        write_atomically(output_file, lines)
    else:
        print(lines, end="")
    return predictions


def _outputs(export_dir, runtime, task, records):
    """One output dict (numpy, one row) per record, from `runtime`."""
    if runtime == "tflite":
        with file_system.local_copy(_artifact_path(export_dir, TEXT_TFLITE_FILE)) as path, \
                _native_stderr_silenced():  # the interpreter's INFO line about XNNPACK
            run, _ = tflite_runner({}, {"path": path, "custom_ops": "tensorflow_text"})
            # The raw-text TFLite signature takes one text at a time; it has no text pairs.
            if any(record.get("text_pair") for record in records):
                raise ExportError("model_text.tflite takes single texts; records with a "
                                  "text_pair need --runtimes=saved_model")
            return [_row(run(_text_tflite_signature(task),
                             {field: _strings([record[field]]) for field in _FIELDS[task]}), 0)
                    for record in records]
    with file_system.local_copy(_artifact_path(export_dir, "saved_model")) as path:
        run, _ = saved_model_runner({"needs_tensorflow_text": True}, {"path": path})
        rows = [None] * len(records)
        for signature, indices, feeds in _calls(task, records):
            outputs = run(signature, feeds)
            for row, index in enumerate(indices):
                rows[index] = _row(outputs, row)
        return rows


def _calls(task, records):
    """`(signature, record indices, feeds)` batches: records that share a signature (and, for
    multiple choice, a number of choices) run together."""
    groups = {}
    for index, record in enumerate(records):
        if task == "sequence_classification":
            key = "serve_text_pair" if record.get("text_pair") else "serve_text"
        elif task == "multiple_choice":
            key = (SIGNATURES[task], len(record["choices"]))
        else:
            key = SIGNATURES[task]
        groups.setdefault(key, []).append(index)
    for key, indices in groups.items():
        chosen = [records[index] for index in indices]
        if key == "serve_text":
            feeds = {TEXT_INPUT: _strings([r["text"] for r in chosen])}
        elif key == "serve_text_pair":
            feeds = {"text_a": _strings([r["text"] for r in chosen]),
                     "text_b": _strings([r["text_pair"] for r in chosen])}
        elif task == "multiple_choice":
            feeds = {"context": _strings([r["context"] for r in chosen]),
                     "choices": _strings([list(r["choices"]) for r in chosen])}
        else:
            feeds = {field: _strings([r[field] for r in chosen]) for field in _FIELDS[task]}
        yield (key[0] if isinstance(key, tuple) else key), indices, feeds


def _answer(task, outputs, labels):
    """The JSON answer fields of one record's outputs."""
    if task == "sequence_classification":
        if "score" in outputs:
            return {"score": float(outputs["score"])}
        return {"label": _text(outputs["label"]),
                "probabilities": {label: float(p) for label, p in
                                  zip(labels, outputs["probabilities"])}}
    if task == "text_embedding":
        return {"embedding": [float(value) for value in outputs["embedding"]]}
    if task == "multiple_choice":
        return {"choice": int(outputs["choice"]),
                "probabilities": [float(p) for p in outputs["probabilities"]]}
    if task == "question_answering":
        answer = {"answer": _text(outputs["answer"]), "start": int(outputs["start"]),
                  "end": int(outputs["end"]), "score": float(outputs["score"])}
        if "has_answer" in outputs:
            answer["has_answer"] = bool(outputs["has_answer"])
        return answer
    return {"entities": [
        {"entity": _text(entity), "word": _text(word), "start": int(start), "end": int(end),
         "score": float(score)}
        for entity, word, start, end, score in zip(
            outputs["entity"], outputs["word"], outputs["start"], outputs["end"],
            outputs["score"]) if _text(entity)]}


def _decision(answer):
    """What two runtimes must agree on: the answer without its scores and probabilities."""
    if "entities" in answer:
        return [{key: value for key, value in entity.items() if key != "score"}
                for entity in answer["entities"]]
    if "score" in answer and "label" not in answer and "answer" not in answer:
        return round(answer["score"], 4)  # regression: the score is the answer
    return {key: value for key, value in answer.items() if key not in ("score", "probabilities")}


def _cosines(vectors, vector):
    """The cosine similarity of each row of `vectors` to `vector`."""
    vectors, vector = np.asarray(vectors, np.float64), np.asarray(vector, np.float64)
    return vectors @ vector / np.maximum(
        np.linalg.norm(vectors, axis=1) * np.linalg.norm(vector), 1e-12)


@contextlib.contextmanager
def _native_stderr_silenced():
    """File descriptor 2 pointed at the null device while the block runs: what native code
    (the TFLite runtime) prints there stays off the terminal, and so does TensorFlow's warning
    that its interpreter moved to ai_edge_litert; Python's own errors are raised, not printed,
    so nothing of kerasbert's is lost."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        with warnings.catch_warnings():  # TensorFlow's notice that its interpreter moved
            warnings.filterwarnings("ignore", message=r"(?s).*tf\.lite\.Interpreter is deprecated")
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _row(outputs, row):
    return {name: np.asarray(value)[row] for name, value in outputs.items()}


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _shown(record):
    text = json.dumps(record, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _artifact_path(export_dir, name):
    """Where the report says artifact `name` is (a SavedModel may sit in a version folder):
    a relative path inside `export_dir`, or an `ExportError` naming the report, the field and
    the path."""
    artifacts = read_report(export_dir)["artifacts"]
    if name not in artifacts:
        raise ExportError(f"{export_dir}: has no {name} (export it with --text_signatures"
                          f"{'' if name == 'saved_model' else ' and a WordPiece model'})")
    relative = artifacts[name]["path"]
    report = file_system.join(export_dir, REPORT_FILE)
    field = f"artifacts.{name}.path"
    if not isinstance(relative, str) or not relative:
        raise ExportError(f"{report}: field {field} is {relative!r}, not a path")
    path = file_system.join(export_dir, relative)
    if (os.path.isabs(relative) or posixpath.isabs(relative)
            or not file_system.is_local(relative)):
        raise ExportError(f"{report}: field {field} is {relative!r}, an absolute path; an "
                          "artifact's path must be relative to the export folder")
    if not file_system.is_within(path, export_dir) or (
            file_system.absolute(path) == file_system.absolute(export_dir)):
        raise ExportError(f"{report}: field {field} is {relative!r}, which is not inside the "
                          f"export folder {export_dir}; an artifact's path must stay inside it")
    return path


def _strings(texts):
    return np.vectorize(lambda text: text.encode("utf-8"), otypes=[object])(
        np.array(texts, dtype=object))
