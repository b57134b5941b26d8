"""`serve_question` and `serve_entities` inside `model_text.tflite`, run through ai-edge-litert's
`InterpreterWithCustomOps` with tensorflow-text's kernels: the answers of the SavedModel's
signatures and of the Python decoders (`reference_question_answers`, `reference_entities`). The
export's verification of these signatures, and `kerasbert-predict` running them, are tested with
the SavedModel's in test_question_answers.py and test_entity_answers.py."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.export.entity_answers import ENTITY_ANSWERS, entity_checks, reference_entities
from kerasbert.export.question_answers import (_exceeds, _pair_extreme, _two_sum,
                                               question_answer_checks, question_answer_names,
                                               question_function, reference_question_answers)
from kerasbert.export.text_tflite import (TFTEXT_CUSTOM_OPS, run_text_tflite, text_tflite_model)
from kerasbert.export.tflite import non_builtin_ops, op_inventory
from tests.export.test_entity_answers import LONG_TEXT, TEXTS, ner  # noqa: F401 (fixture)
from tests.export.test_question_answers import (HARD_CONTEXTS, HARD_QUESTIONS,  # noqa: F401
                                                HARD_SETTINGS, LONG_CONTEXTS, LONG_QUESTIONS,
                                                LONG_SETTINGS, bert_qa, cjk_bert_qa)

pytestmark = pytest.mark.slow

TOLERANCE = 1e-4  # the scores: softmax probabilities, float32 in another runtime
# Accents that lose or keep their bytes, a zero-width character, CJK and an empty text.
ODD_QUESTIONS = ["  What is déjà vu?", "東京は?", "Nothing"]
ODD_CONTEXTS = ["Zoë said:\u200b déjà vu, Ⅻ crêpes, İstanbul — naïve ŒUVRE. " * 3,
                "東京は日本の首都です。Tokyo, 東京, is large.", ""]


def assert_answers(produced, expected):
    checks = question_answer_checks(produced, expected, TOLERANCE)
    assert [check["output"] for check in checks] == list(expected)
    assert all(check["passed"] for check in checks), (checks, produced, expected)


def question_flatbuffer(model, tokenizer, settings):
    flatbuffer = text_tflite_model(model, tokenizer, settings.max_seq_length, settings=settings)
    assert non_builtin_ops(flatbuffer) == sorted(TFTEXT_CUSTOM_OPS)
    assert not [op for op in op_inventory(flatbuffer) if op.startswith("Flex")]
    return flatbuffer


def ask(flatbuffer, questions, contexts):
    return run_text_tflite(flatbuffer, {"question": questions, "context": contexts},
                           signature="serve_question")


@pytest.mark.parametrize("version_2", [False, True])
def test_serve_question_answers_as_the_python_decoder_over_several_windows(bert_qa, version_2):
    """Several windows per context, an empty context, accents, zero-width and CJK characters;
    v2.0 with a threshold that makes some questions "no answer" and leaves others answered."""
    model, tokenizer = bert_qa[2:4]
    questions, contexts = LONG_QUESTIONS + ODD_QUESTIONS, LONG_CONTEXTS + ODD_CONTEXTS
    settings = LONG_SETTINGS
    if version_2:
        odds = _null_odds(model, tokenizer, LONG_SETTINGS, questions, contexts)
        settings = LONG_SETTINGS.replace(version_2_with_negative=True,
                                         null_score_diff_threshold=float(np.median(odds)))
    flatbuffer = question_flatbuffer(model, tokenizer, settings)
    produced = ask(flatbuffer, questions, contexts)
    expected = reference_question_answers(model, tokenizer, settings, questions, contexts)
    assert sorted(produced) == sorted(question_answer_names(settings))
    assert_answers(produced, expected)
    serve_question = question_function(model, tokenizer, settings)
    saved_model = serve_question(tf.constant(questions), tf.constant(contexts))
    assert_answers(produced, {name: value.numpy() for name, value in saved_model.items()})
    assert serve_question(tf.constant(["Who?"]), tf.constant([""]))["answer"].numpy() == [b""]
    answered = sum(map(bool, produced["answer"]))
    assert (0 < answered < len(questions)) if version_2 else answered >= 3, produced
    empty = ask(flatbuffer, [], [])
    assert {name: value.shape for name, value in empty.items()} == {
        name: (0,) for name in question_answer_names(settings)}
    no_context = ask(flatbuffer, ["Who?", ""], ["", ""])  # not one context token in the batch
    assert no_context["answer"].tolist() == [b"", b""] and no_context["end"].tolist() == [0, 0]


def test_serve_question_answers_hard_inputs_as_the_python_decoder(cjk_bert_qa):
    """Windows of 48 tokens every 16 and the default n-best over accented and CJK contexts."""
    model, tokenizer = cjk_bert_qa[1:3]
    flatbuffer = question_flatbuffer(model, tokenizer, HARD_SETTINGS)
    produced = ask(flatbuffer, HARD_QUESTIONS, HARD_CONTEXTS)
    assert_answers(produced, reference_question_answers(model, tokenizer, HARD_SETTINGS,
                                                        HARD_QUESTIONS, HARD_CONTEXTS))
    for context, answer, start, end in zip(HARD_CONTEXTS, produced["answer"], produced["start"],
                                           produced["end"]):
        assert context[start:end] == answer.decode("utf-8") != ""


def _null_odds(model, tokenizer, settings, questions, contexts):
    """Per question, best null score - best span score (float64, from the Python windows)."""
    from kerasbert.export.question_answers import _best_span, window_logits

    examples, features, starts, ends = window_logits(model, tokenizer, settings, questions,
                                                     contexts)
    odds = []
    for example in examples:
        windows = [feature for feature in features if feature.example_index == int(example.qas_id)]
        span, null = _best_span(example, windows, starts, ends, settings)
        if span is not None:
            odds.append(null[0] - span[0])
    return odds


def test_serve_entities_answers_as_the_python_decoder(ner):
    texts = [*TEXTS, LONG_TEXT, "", "Zoë\u200b met İstanbul's 東京 ŒUVRE."]
    flatbuffer = text_tflite_model(ner["model"], ner["tokenizer"], ner["settings"].max_seq_length,
                                   settings=ner["settings"])
    assert non_builtin_ops(flatbuffer) == sorted(TFTEXT_CUSTOM_OPS)
    produced = run_text_tflite(flatbuffer, texts, signature="serve_entities")
    expected = reference_entities(ner["model"], ner["tokenizer"], ner["settings"], texts)
    checks = entity_checks(produced, expected, TOLERANCE)
    assert [check["output"] for check in checks] == list(ENTITY_ANSWERS)
    assert all(check["passed"] for check in checks), checks
    assert sum(map(len, expected)) >= 8 and expected[-2] == [], expected
    padding = produced["entity"] == b""
    assert padding[-2].all() and (produced["word"][padding] == b"").all()
    assert (produced["start"][padding] == -1).all() and (produced["score"][padding] == 0).all()
    assert produced["start"].dtype == np.int32 and produced["score"].dtype == np.float32
    nothing = run_text_tflite(flatbuffer, ["", " "], signature="serve_entities")
    assert nothing["entity"].shape == (2, 0)
    # serve_text is still there, with the model's own outputs.
    assert sorted(run_text_tflite(flatbuffer, texts[:2])) == ["logits"]


# Pairs of float32 sums that float32 rounds equal and float64 does not: (a, b, c, d) with
# a + b > c + d in float64.
NEAR_TIES = [(1.0, 2.0 ** -30, 1.0, 0.0), (16.0, 2.0 ** -25, 16.0, 2.0 ** -26),
             (-3.0, -2.0 ** -28, -3.0, -2.0 ** -27), (1e6, 0.03125, 1e6 + 0.0625, -0.0625)]


def test_span_scores_compare_as_float64_sums_in_tflite(tmp_path):
    """The decoder ranks spans by float64 start + end logit sums; TFLite has no float64
    arithmetic, so sums are kept as exact float32 pairs (`_two_sum`). Near-ties that float32
    sums cannot tell apart are ranked as float64 ranks them, in TensorFlow and in TFLite (the
    converter must not simplify the pair arithmetic away)."""
    values = np.array(NEAR_TIES, np.float32)
    exact = values.astype(np.float64)
    assert (exact[:, 0] + exact[:, 1] > exact[:, 2] + exact[:, 3]).all()
    assert (values[:, 0] + values[:, 1] <= values[:, 2] + values[:, 3]).any()
    thresholds = np.array([2.0 ** -29, 2.0 ** -29, 0.0, 0.03125], np.float64)  # F, T, T, F

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def rank(pairs):
        first = _two_sum(pairs[:, 0], pairs[:, 1])
        second = _two_sum(pairs[:, 2], pairs[:, 3])
        both = [tf.stack([first[part], second[part]], axis=1) for part in (0, 1)]
        _, is_max = _pair_extreme(both, tf.ones_like(both[0], tf.bool), tf.reduce_max)
        exceeds = tf.stack([_exceeds(first, second, float(threshold))[index]
                            for index, threshold in enumerate(thresholds)])
        return {"first_wins": is_max[:, 0] & ~is_max[:, 1], "exceeds": exceeds}

    module = tf.Module()
    module.rank = rank
    tf.saved_model.save(module, str(tmp_path), signatures={"rank": rank.get_concrete_function()})
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path), signature_keys=["rank"])
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=converter.convert()).get_signature_runner("rank")
    differences = exact[:, 0] + exact[:, 1] - exact[:, 2] - exact[:, 3]
    for outputs in (rank(tf.constant(values)), runner(pairs=values)):
        assert np.asarray(outputs["first_wins"]).tolist() == [True] * len(NEAR_TIES)
        assert np.asarray(outputs["exceeds"]).tolist() == (differences > thresholds).tolist()
