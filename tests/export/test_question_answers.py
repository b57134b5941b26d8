"""A span question-answering model's `serve_question(question, context)` answers in the graph as
the Python pipeline does: with contexts that fit one window, the same answer, character offsets
and score as transformers' question-answering pipeline on the same weights and tokenizer (the
pipeline's own decoding functions, `select_starts_ends`); with long contexts (several windows),
exactly what `reference_question_answers` (`squad_windows`, `squad_dataset`, `decode_squad`)
says, SQuAD v2.0's "no answer" included."""

import numpy as np
import pytest
import tensorflow as tf
import torch

import kerasbert
from kerasbert.data import demo
from kerasbert.data.squad import SquadExample
from kerasbert.data.squad_features import squad_windows
from kerasbert.export.answer_settings import AnswerSettings
from kerasbert.export.question_answers import (question_answer_checks, question_answer_names,
                                               question_function, reference_question_answers)
from tests.export.test_text_signatures import save_tokenizer
from tests.helpers import hf_config, model_garden_squad_lib, save_hf_model

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 48
TOLERANCE = 1e-4
QUESTIONS = ["What is the dessert?", "  Who said it?", "Where?", "Why, señor?",
             "How long is the film?", "Which fox?"]
CONTEXTS = [
    "Crème brûlée is a dessert; the waiter said so.",
    "\"Hello!\" said Zoë, (twice) - and left.",
    "The café on Über-Straße serves déjà vu crêpes.",
    "Because the façade, señor, was painted in 1999.",
    "A fine film, and a long one: 3 hours, 12 minutes.",
    "The quick brown fox jumps over the lazy dog.",
]
# Several windows each at 32 tokens (doc_stride 8), mixed with one-window and empty contexts.
LONG_CONTEXTS = [
    "The quick brown fox jumps over the lazy dog. " * 5,
    CONTEXTS[0],
    "Crème brûlée, señor! Über façade; déjà vu. It was not bad at all, was it? " * 4,
    "",
    " ".join(f"word{index} and the number {index}." for index in range(20)),
]
LONG_QUESTIONS = ["Who jumps over the dog?", "What is it?", " Was it bad?",
                  "Nothing to see", "Which number comes after the seventh word and before the "
                  "twelfth one, if any?"]
LONG_SETTINGS = AnswerSettings(max_seq_length=32, doc_stride=8, max_query_length=8,
                               max_answer_length=6, n_best_size=5)


@pytest.fixture(scope="module")
def bert_qa(tmp_path_factory):
    """A random BERT `BertForQuestionAnswering`, its tokenizer, and both imported to kerasbert."""
    root = tmp_path_factory.mktemp("questions")
    tokenizer = save_tokenizer("bert", root)
    model = save_hf_model("BertForQuestionAnswering", hf_config(
        "bert", vocab_size=len(tokenizer), max_position_embeddings=MAX_SEQ_LENGTH), root)
    return (model, tokenizer, kerasbert.convert.from_hf(root), kerasbert.tokenizers.from_hf(root),
            root)


def pipeline_answers(model, tokenizer, questions, contexts, settings):
    """What transformers' question-answering pipeline (4.x; `pipeline("question-answering",
    max_answer_len=..., max_seq_len=..., align_to_words=False)`) answers for contexts that fit one
    window, with transformers' own `select_starts_ends`. transformers 5 removed the pipeline
    ("question-answering" is no task any more) but kept `select_starts_ends`, so its
    preprocessing (question first, `truncation="only_second"`, p_mask 1 outside the context but
    0 on [CLS]) and postprocessing (`offsets[start][0]`, `offsets[end][1]`, the context
    substring) are done here as the pipeline did."""
    try:
        from transformers.pipelines.question_answering import select_starts_ends
    except ImportError:
        from transformers.pipelines.document_question_answering import select_starts_ends

    rows = []
    for question, context in zip(questions, contexts):
        encoded = tokenizer(question, context, truncation="only_second",
                            max_length=settings.max_seq_length,
                            stride=settings.max_seq_length - settings.doc_stride,
                            return_overflowing_tokens=True, return_offsets_mapping=True,
                            return_token_type_ids=True)
        assert len(encoded["input_ids"]) == 1, f"{context!r} needs more than one window"
        p_mask = np.array([[token != 1 for token in encoded.sequence_ids(0)]])
        p_mask[0, [index for index, token_id in enumerate(encoded["input_ids"][0])
                   if token_id == tokenizer.cls_token_id]] = 0
        with torch.no_grad():
            outputs = model(**{name: torch.tensor(encoded[name]) for name in
                               ("input_ids", "attention_mask", "token_type_ids")})
        starts, ends, scores, _ = select_starts_ends(
            outputs.start_logits.numpy(), outputs.end_logits.numpy(), p_mask,
            np.array(encoded["attention_mask"]), top_k=1,
            max_answer_len=settings.max_answer_length)
        offsets = encoded["offset_mapping"][0]
        start, end = offsets[starts[0]][0], offsets[ends[0]][1]
        rows.append((context[start:end], start, end, float(scores[0])))
    return rows


def run(function, questions, contexts):
    outputs = function(tf.constant(questions), tf.constant(contexts))
    return {name: value.numpy() for name, value in outputs.items()}


def test_one_window_answers_equal_the_transformers_pipeline(bert_qa):
    hf_model, hf_tokenizer, model, tokenizer, _ = bert_qa
    # Every pair of tokens is a candidate: the pipeline keeps no n-best list.
    settings = AnswerSettings(max_seq_length=MAX_SEQ_LENGTH, doc_stride=16,
                              n_best_size=MAX_SEQ_LENGTH, max_query_length=16,
                              max_answer_length=5)
    expected = pipeline_answers(hf_model, hf_tokenizer, QUESTIONS, CONTEXTS, settings)
    produced = run(question_function(model, tokenizer, settings), QUESTIONS, CONTEXTS)
    assert set(produced) == set(question_answer_names(settings)) == {"answer", "start", "end",
                                                                     "score"}
    answers = [answer.decode("utf-8") for answer in produced["answer"]]
    assert len(set(answers)) >= 2, answers  # the test can tell answers apart
    assert answers == [row[0] for row in expected]
    assert produced["start"].tolist() == [row[1] for row in expected]
    assert produced["end"].tolist() == [row[2] for row in expected]
    for context, answer, start, end in zip(CONTEXTS, answers, produced["start"],
                                           produced["end"]):
        assert context[start:end] == answer != ""
    np.testing.assert_allclose(produced["score"], [row[3] for row in expected], rtol=TOLERANCE,
                               atol=0)
    assert produced["start"].dtype == np.int32 and produced["score"].dtype == np.float32


def test_long_contexts_answer_as_the_python_decoder(bert_qa):
    model, tokenizer = bert_qa[2:4]
    function = question_function(model, tokenizer, LONG_SETTINGS)
    produced = run(function, LONG_QUESTIONS, LONG_CONTEXTS)
    expected = reference_question_answers(model, tokenizer, LONG_SETTINGS, LONG_QUESTIONS,
                                          LONG_CONTEXTS)
    assert_same(produced, expected)
    features = squad_windows([SquadExample(str(index), question, context) for index, (
        question, context) in enumerate(zip(LONG_QUESTIONS, LONG_CONTEXTS))], tokenizer,
        max_seq_length=32, doc_stride=8, max_query_length=8)
    windows = [sum(f.example_index == index for f in features) for index in range(5)]
    assert windows[0] > 3 and windows[1] == windows[3] == 1, windows
    first_window_end = {f.example_index: int(f.char_ends[-1]) for f in reversed(features)
                        if f.window_length}
    assert any(start >= first_window_end[index] for index, start in
               enumerate(produced["start"]) if windows[index] > 1), produced  # a later window
    assert produced["answer"][3] == b"" and sum(map(bool, produced["answer"])) >= 3
    empty = function(tf.constant([], tf.string), tf.constant([], tf.string))
    assert {name: value.shape for name, value in empty.items()} == {
        name: (0,) for name in ("answer", "start", "end", "score")}


def test_roberta_long_contexts_answer_as_the_python_decoder(tmp_path):
    """Byte-level BPE: `<s> question </s></s> window </s>`, and space tokens, whose spans
    `decode_squad` skips."""
    tokenizer = save_tokenizer("roberta", tmp_path)
    save_hf_model("RobertaForQuestionAnswering", hf_config(
        "roberta", vocab_size=len(tokenizer), max_position_embeddings=34), tmp_path)
    model, tokenizer = kerasbert.convert.from_hf(tmp_path), kerasbert.tokenizers.from_hf(tmp_path)
    settings = LONG_SETTINGS.replace(version_2_with_negative=True)
    produced = run(question_function(model, tokenizer, settings), LONG_QUESTIONS, LONG_CONTEXTS)
    assert_same(produced, reference_question_answers(model, tokenizer, settings, LONG_QUESTIONS,
                                                     LONG_CONTEXTS))
    assert sum(produced["has_answer"]) >= 2, produced


@pytest.mark.parametrize("threshold", [-1e6, 1e6])
def test_squad_v2_says_no_answer_as_the_python_decoder(bert_qa, threshold):
    model, tokenizer = bert_qa[2:4]
    settings = LONG_SETTINGS.replace(version_2_with_negative=True,
                                     null_score_diff_threshold=threshold)
    produced = run(question_function(model, tokenizer, settings), LONG_QUESTIONS, LONG_CONTEXTS)
    expected = reference_question_answers(model, tokenizer, settings, LONG_QUESTIONS,
                                          LONG_CONTEXTS)
    assert_same(produced, expected)
    has_answer = produced["has_answer"].tolist()
    if threshold < 0:
        assert not any(has_answer)
        assert produced["start"].tolist() == produced["end"].tolist() == [0] * len(has_answer)
    else:  # every question with a span; not the empty context's
        assert has_answer == [bool(answer) for answer in produced["answer"]]
        assert has_answer[3] is False and sum(has_answer) >= 3
    assert all(answer == b"" for answer, has in zip(produced["answer"], has_answer) if not has)


def test_the_checks_fail_on_a_different_answer():
    expected = {"answer": np.array([b"fox", b""], dtype=object), "start": np.array([4, 0]),
                "end": np.array([7, 0]), "score": np.array([0.5, 0.25]),
                "has_answer": np.array([True, False])}
    checks = question_answer_checks(dict(expected), expected, TOLERANCE)
    assert [check["output"] for check in checks] == ["answer", "start", "end", "score",
                                                     "has_answer"]
    assert all(check["passed"] and check["check"] == "answer" for check in checks)
    produced = {**expected, "answer": np.array(["dog", ""]), "score": np.array([0.5, 0.26])}
    failed = {check["output"]: check for check in question_answer_checks(produced, expected,
                                                                         TOLERANCE)}
    assert not failed["answer"]["passed"] and failed["answer"]["differing_rows"] == 1
    assert not failed["score"]["passed"] and failed["start"]["passed"]
    produced = {**expected, "has_answer": np.array([True, True])}
    assert [check["passed"] for check in question_answer_checks(produced, expected, TOLERANCE)
            ] == [True, True, True, True, False]


def assert_same(produced, expected):
    checks = question_answer_checks(produced, expected, 1e-5)
    assert [check["output"] for check in checks] == list(expected)
    assert all(check["passed"] for check in checks), (checks, produced, expected)


def test_an_exported_finetune_folder_answers_with_its_recorded_settings(bert_qa, tmp_path):
    """`kerasbert.export.export` of a `kerasbert-finetune` folder takes the run's recorded SQuAD
    v2.0 flags, verifies `serve_question` of the SavedModel and of `model_text.tflite` against the
    Python decoder (in a fresh process that never imports kerasbert), and the reloaded
    SavedModel, also through `kerasbert-predict`'s library call (which runs and compares both
    files), answers exactly as `reference_question_answers` with those settings."""
    import json

    from kerasbert.export.predictions import predict
    from tests.export.artifacts import run_signature

    model, tokenizer = bert_qa[2:4]
    settings = LONG_SETTINGS.replace(version_2_with_negative=True, null_score_diff_threshold=2.0)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    model.save(run_dir / "model.keras")
    flags = {"task": "squad_v2", "max_seq_length": settings.max_seq_length,
             **{name: getattr(settings, name) for name in (
                 "doc_stride", "max_query_length", "max_answer_length", "n_best_size",
                 "null_score_diff_threshold")}}
    (run_dir / "kerasbert_run.json").write_text(json.dumps(
        {"program": "kerasbert-finetune", "flags": flags, "model": {}}))
    report = kerasbert.export.export(run_dir, tmp_path / "out", formats=("saved_model", "tflite"),
                                     text_signatures=True, tokenizer=str(bert_qa[4]))
    assert {name: report["answer_settings"][name] for name in flags if name != "task"} == {
        name: value for name, value in flags.items() if name != "task"}
    assert report["answer_settings"]["version_2_with_negative"] is True
    assert report["max_seq_length"] == settings.max_seq_length
    for artifact in ("saved_model", "model_text.tflite"):  # the phone's file answers too
        checks = [check for check in report["artifacts"][artifact]["checks"]
                  if check.get("signature") == "serve_question"]
        assert {check["output"] for check in checks} == set(question_answer_names(settings))
        assert all(check["passed"] for check in checks), (artifact, checks)

    expected = reference_question_answers(model, tokenizer, settings, LONG_QUESTIONS,
                                          LONG_CONTEXTS)
    assert 0 < sum(expected["has_answer"]) < len(LONG_QUESTIONS)  # both ways
    produced = run_signature(str(tmp_path / "out"), "serve_question",
                             {"question": LONG_QUESTIONS, "context": LONG_CONTEXTS})
    produced["answer"] = np.array([text.encode() for text in produced["answer"]], object)
    assert_same(produced, expected)
    answers = predict(str(tmp_path / "out"), [{"question": question, "context": context}
                                              for question, context in zip(LONG_QUESTIONS,
                                                                           LONG_CONTEXTS)])
    assert [answer["answer"].encode() for answer in answers] == expected["answer"].tolist()
    assert [answer["has_answer"] for answer in answers] == expected["has_answer"].tolist()
    assert [answer["start"] for answer in answers] == expected["start"].tolist()
    assert {tuple(answer["runtimes"]) for answer in answers} == {("tflite", "saved_model")}


# Contexts users meet: several doc-stride windows each at 48 tokens, accented Latin and CJK text
# (each CJK character its own token), and answers that can sit in any window.
HARD_CONTEXTS = [
    "Crème brûlée, señor! Über façade; déjà vu. Zoë's café in Zürich served crêpes to a naïve "
    "maître d'hôtel, à la française. " * 4,
    "東京は日本の首都です。北京は中国の首都です。京都は古い都です。Tokyo, 東京, is large. " * 4,
    "The quick brown fox jumps over the lazy dog near the river bank. " * 6,
    " ".join(f"Item {index} costs {index * 3} euros in the shop." for index in range(14)),
]
HARD_QUESTIONS = ["Who said it was not bad?", "What is the capital of Japan?",
                  "What does the fox jump over?", "How much does item seven cost?"]
# Windows of 48 tokens every 16, and the decoder's defaults: n-best 20, answers of 30 tokens.
HARD_SETTINGS = AnswerSettings(max_seq_length=MAX_SEQ_LENGTH, doc_stride=16,
                               max_query_length=16)


def model_garden_answers(hf_model, vocabulary, folder, questions, contexts, settings):
    """Model Garden's SQuAD pipeline end to end, with no kerasbert code: its windows
    (`convert_examples_to_features` with its `FullTokenizer` over the model's `vocabulary`),
    the
    transformers model's logits on them, and its `postprocess_output` (Google's `run_squad.py`
    decoding): `(texts, null_odds)` by question index."""
    import collections
    import json

    squad_lib, tokenization = model_garden_squad_lib()
    path = folder / "questions.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": [{"id": str(index), "question": question, "answers": [],
                                      "is_impossible": False}]}
        for index, (question, context) in enumerate(zip(questions, contexts))]}]}),
        encoding="utf-8")
    version_2 = settings.version_2_with_negative
    examples = squad_lib.read_squad_examples(str(path), is_training=False,
                                             version_2_with_negative=version_2)
    features = []
    squad_lib.convert_examples_to_features(
        examples, tokenization.FullTokenizer(str(vocabulary), do_lower_case=True),
        max_seq_length=settings.max_seq_length, doc_stride=settings.doc_stride,
        max_query_length=settings.max_query_length, is_training=False,
        output_fn=lambda feature, is_padding: is_padding or features.append(feature),
        batch_size=1)
    with torch.no_grad():
        outputs = hf_model(input_ids=torch.tensor([f.input_ids for f in features]),
                           attention_mask=torch.tensor([f.input_mask for f in features]),
                           token_type_ids=torch.tensor([f.segment_ids for f in features]))
    result = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
    results = [result(feature.unique_id, start.tolist(), end.tolist()) for feature, start, end
               in zip(features, outputs.start_logits.numpy(), outputs.end_logits.numpy())]
    texts, _, null_odds = squad_lib.postprocess_output(
        examples, features, results, n_best_size=settings.n_best_size,
        max_answer_length=settings.max_answer_length, do_lower_case=True,
        version_2_with_negative=version_2,
        null_score_diff_threshold=settings.null_score_diff_threshold)
    return texts, null_odds, collections.Counter(f.example_index for f in features)


@pytest.fixture(scope="module")
def cjk_bert_qa(tmp_path_factory):
    """A random `BertForQuestionAnswering` whose WordPiece vocabulary (the shipped one) also
    holds the CJK characters of `HARD_CONTEXTS`: with them unknown, Google's decoding
    (`get_final_text`) cannot find "[UNK]" in the context and answers the whole whitespace
    tokens around the span, where the signature answers the span's own characters."""
    import transformers

    root = tmp_path_factory.mktemp("cjk_questions")
    vocabulary = (root / "vocab.txt")
    words = open(f"{demo.vocabulary_dir('wordpiece')}/vocab.txt", encoding="utf-8").read()
    known = set(words.split("\n"))
    characters = sorted({character for text in HARD_CONTEXTS for character in text
                         if ord(character) > 0x2E80 and character not in known})
    vocabulary.write_text(words.rstrip("\n") + "\n" + "\n".join(characters) + "\n",
                          encoding="utf-8")
    hf_tokenizer = transformers.BertTokenizerFast(str(vocabulary), do_lower_case=True)
    hf_tokenizer.save_pretrained(root)
    model = save_hf_model("BertForQuestionAnswering", hf_config(
        "bert", vocab_size=len(hf_tokenizer), max_position_embeddings=MAX_SEQ_LENGTH), root)
    return (model, kerasbert.convert.from_hf(root), kerasbert.tokenizers.from_hf(root),
            vocabulary)


@pytest.mark.parametrize("version_2, threshold_rule", [(False, None), (True, "zero"),
                                                       (True, "between"), (True, "below")])
def test_hard_inputs_answer_as_model_garden_s_squad_pipeline(cjk_bert_qa, tmp_path, version_2,
                                                             threshold_rule):
    """`serve_question` on several windows, the default n-best, SQuAD v2.0's no-answer rule
    (its threshold at 0, between the questions' null odds, below all of them), and accented and
    CJK text answers what Model Garden's windows, transformers' logits and Model Garden's
    decoding answer."""
    hf_model, model, tokenizer, vocabulary = cjk_bert_qa
    settings = HARD_SETTINGS.replace(version_2_with_negative=version_2)
    if threshold_rule in ("between", "below"):
        _, odds, _ = model_garden_answers(hf_model, vocabulary, tmp_path, HARD_QUESTIONS,
                                          HARD_CONTEXTS, settings)
        odds = sorted(odds.values())
        settings = settings.replace(null_score_diff_threshold=float(
            (odds[1] + odds[2]) / 2 if threshold_rule == "between" else odds[0] - 1.0))
    produced = run(question_function(model, tokenizer, settings), HARD_QUESTIONS, HARD_CONTEXTS)
    texts, null_odds, windows = model_garden_answers(hf_model, vocabulary, tmp_path,
                                                     HARD_QUESTIONS, HARD_CONTEXTS, settings)
    assert min(windows.values()) >= 3, windows  # every context needs several windows
    answers = [answer.decode("utf-8") for answer in produced["answer"]]
    widened = []
    for index, (context, answer, start, end) in enumerate(zip(
            HARD_CONTEXTS, answers, produced["start"], produced["end"])):
        assert context[start:end] == answer
        theirs = texts[str(index)]
        if answer == theirs:
            continue
        # Google's `get_final_text` cannot align a CJK span (its BasicTokenizer spaces out
        # ideographs but not kana, so the pieces differ) and answers the whole whitespace
        # tokens around it: the same span, widened to whitespace.
        first = max(context.rfind(" ", 0, start), context.rfind("\n", 0, start)) + 1
        last = min([position for position in (context.find(" ", end), len(context))
                    if position >= 0])
        assert theirs == context[first:last], (index, answer, theirs)
        widened.append(index)
    assert set(widened) <= {1}, widened  # only the CJK context
    if version_2:
        assert produced["has_answer"].tolist() == [bool(texts[str(index)]) for index in
                                                   range(len(HARD_QUESTIONS))]
        expected_answers = {"zero": None, "between": 2, "below": 0}[threshold_rule]
        if expected_answers is not None:
            assert sum(produced["has_answer"]) == expected_answers, null_odds
    if threshold_rule != "below":  # answers in accented and CJK text were compared
        assert any(ord(character) > 127 for answer in answers for character in answer), answers
