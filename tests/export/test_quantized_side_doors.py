"""The quantized rule has no side doors (issue 39): each test builds the case that slipped
through before and checks that it is judged, or refused before anything is built.

- A labelled set does not switch the flip count off: a 45-label classifier whose quantized
  outputs pick another label on every input keeps its near-chance task score, and is refused by
  its agreement on the eval file's own inputs.
- The rule comes from what an output is: a classifier with as many labels as the sequence
  length is judged by its argmax per example, not by a per-token sign.
- Regression keeps its scale: doubled STS-B-like scores are refused.
- Too few judging inputs, judging inputs equal to calibration inputs, a quantized variant with
  no tokenizer to make real judging text, and a variant no requested format makes: each an
  error naming the flag, with nothing written.
"""

import gzip
import types

import numpy as np
import pytest

import kerasbert
from kerasbert.data import demo
from kerasbert.export import ExportError, export
from kerasbert.export.cases import CaseMaker, MIN_JUDGING_INPUTS, text_sets
from kerasbert.export.compare import agreement, passes
from kerasbert.export.exporter import _ArtifactVerifier, _judged_on
from kerasbert.export.labelled import LabelledSet
from kerasbert.export.output_kinds import is_token_aligned, output_kinds
from kerasbert.export.signatures import serving_function

MAX_SEQ_LENGTH = 32


def tiny_config(tokenizer, **overrides):
    return kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        vocab_size=tokenizer.vocabulary_size(), max_positions=MAX_SEQ_LENGTH, num_layers=1,
        hidden_size=32, num_heads=2, intermediate_size=64, **overrides)


def test_a_labelled_set_still_counts_every_flip(demo_tokenizer):
    labels = demo.classification_labels()
    assert len(labels) == 45
    model = kerasbert.models.build_task_model(tiny_config(demo_tokenizer),
                                              "sequence_classification",
                                              num_labels=len(labels), id2label=labels)
    labelled = LabelledSet("wordnet_gloss", demo.classification_files()["dev"], model,
                           demo_tokenizer, MAX_SEQ_LENGTH, max_examples=256)
    serve = serving_function(model)
    labelled.reference = [{name: np.asarray(value) for name, value in serve(batch).items()}
                          for batch in labelled.batches]
    labelled.float_evaluation = labelled.score(labelled.reference)
    # Every input's logits moved one label along: every argmax changes, and a model at chance
    # stays at chance.
    produced = {(f"eval{index}", "serving_default"): {"logits": np.roll(outputs["logits"], 1, -1)}
                for index, outputs in enumerate(labelled.reference)}
    references = {f"eval{index}": outputs for index, outputs in enumerate(labelled.reference)}
    built = types.SimpleNamespace(model=model, labelled=labelled, agreement_batches=[],
                                  judged_on=_judged_on(None, labelled, []))
    verifier = _ArtifactVerifier(built)
    entry = {}
    checks, passed = verifier._quantized_checks("model_dynamic_int8.tflite", entry, produced,
                                                references)
    assert not passed
    assert entry["agreement"]["logits"]["flips"] == 256
    assert entry["agreement"]["logits"]["value"] == 0.0
    assert entry["judged_on"]["inputs"] == 256 and entry["decided_by"] == (
        "agreement_and_task_metric")
    assert "task_metric" in entry  # both reported
    assert "argmax_agreement 0.0000 on 256 judging inputs (256 of 256 flipped" in (
        verifier.failures[0])


def test_a_classifier_as_wide_as_the_sequence_is_judged_per_example(demo_tokenizer):
    model = kerasbert.models.build_task_model(tiny_config(demo_tokenizer),
                                              "sequence_classification",
                                              num_labels=MAX_SEQ_LENGTH)
    kinds = output_kinds(model)
    assert kinds == {"logits": "example_logits"}
    logits = np.random.default_rng(0).normal(size=(8, MAX_SEQ_LENGTH))
    assert not is_token_aligned(kinds, "logits", logits, MAX_SEQ_LENGTH)
    mask = np.ones((8, MAX_SEQ_LENGTH), "int32")
    moved = np.roll(logits, 1, -1)  # every argmax moves; signs are the same multiset per row
    result = agreement(kinds["logits"], logits, moved, mask)
    assert result["flips"] == int(np.sum(np.argmax(logits, -1) != np.argmax(moved, -1))) == 8
    assert not passes(result)


def test_regression_keeps_its_scale(demo_tokenizer):
    model = kerasbert.models.build_task_model(tiny_config(demo_tokenizer),
                                              "sequence_classification", num_labels=1)
    assert output_kinds(model) == {"logits": "regression"}
    scores = np.random.default_rng(0).uniform(0, 5, size=(300, 1))
    mask = np.ones((300, MAX_SEQ_LENGTH), "int32")
    doubled = agreement("regression", scores, 2 * scores, mask)
    assert doubled["metric"] == "max_error_over_spread" and doubled["value"] > 0.9
    assert not passes(doubled)
    close = agreement("regression", scores, scores + 0.01, mask)
    assert close["value"] == pytest.approx(0.01 / (scores.max() - scores.min()), abs=1e-6)
    assert passes(close)


def write_lines(path, count, start=0):
    with gzip.open(demo.pretraining_corpus_files()[1], "rt", encoding="utf-8") as file:
        texts = [line.strip() for line in file if len(line.split()) > 3][start:start + count]
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return texts


def test_too_few_judging_inputs_are_refused_before_anything_is_written(demo_tokenizer, tmp_path):
    encoder = kerasbert.models.Encoder(tiny_config(demo_tokenizer))
    calibration = tmp_path / "calibration.txt"
    write_lines(calibration, 65)  # 64 calibrate, one would judge
    with pytest.raises(ExportError, match=r"1 judging inputs left .* at least 200: give more "
                                          r"lines in --calibration_data"):
        export(encoder, tmp_path / "out", formats=("tflite",), quantize=("int8",),
               calibration_data=str(calibration), tokenizer=demo_tokenizer,
               max_seq_length=MAX_SEQ_LENGTH)
    assert not (tmp_path / "out").exists()


def test_judging_inputs_never_equal_a_calibration_input(demo_tokenizer, tmp_path):
    """Texts that differ as strings but pack to the same ids (case and spacing, for an uncased
    vocabulary) are left out of the judging inputs."""
    encoder = kerasbert.models.Encoder(tiny_config(demo_tokenizer))
    calibration = tmp_path / "calibration.txt"
    texts = write_lines(calibration, 64 + MIN_JUDGING_INPUTS + 20)
    with calibration.open("a", encoding="utf-8") as file:
        file.write("\n".join("  " + text.upper() for text in texts[:20]) + "\n")
    sets = text_sets([str(calibration)], calibrate=True)
    maker = CaseMaker(encoder, demo_tokenizer, MAX_SEQ_LENGTH, sets)
    batches = maker.judging_inputs()
    judged = np.concatenate([batch["token_ids"] for batch in batches])
    calibrated = {row.tobytes() for row in np.concatenate(
        [inputs["token_ids"] for inputs in maker.calibration_inputs()])}
    assert len(judged) == MIN_JUDGING_INPUTS + 20
    assert not any(row.tobytes() in calibrated for row in judged)


@pytest.mark.parametrize("task, shape", [
    ("question_answering", "question and context pairs"),
    ("sequence_classification", "single texts and text pairs, alternating"),
    ("token_classification", "single texts")])
def test_judging_inputs_are_shaped_like_the_task_s(task, shape, demo_tokenizer):
    model = kerasbert.models.build_task_model(tiny_config(demo_tokenizer), task)
    maker = CaseMaker(model, demo_tokenizer, MAX_SEQ_LENGTH)
    assert maker.judging_shape() == shape
    segments = np.concatenate([batch["segment_ids"] for batch in maker.judging_inputs()])
    has_pair = segments.max(axis=-1) == 1
    assert len(segments) >= MIN_JUDGING_INPUTS
    if task == "question_answering":
        assert has_pair.all()
    elif task == "sequence_classification":
        assert has_pair[1::2].all() and not has_pair[0::2].any()
    else:
        assert not has_pair.any()


def test_no_quantized_variant_without_a_tokenizer(demo_tokenizer, tmp_path):
    encoder = kerasbert.models.Encoder(tiny_config(demo_tokenizer))
    with pytest.raises(ExportError, match="quantized variants are judged on real text .* "
                                          "pass --tokenizer"):
        export(encoder, tmp_path / "out", formats=("tflite",), quantize=("dynamic_int8",),
               max_seq_length=MAX_SEQ_LENGTH)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("formats, variant", [
    (("onnx",), "float16"), (("onnx",), "int8"), (("saved_model",), "dynamic_int8")])
def test_a_variant_no_format_makes_is_an_error(formats, variant, demo_tokenizer, tmp_path):
    encoder = kerasbert.models.Encoder(tiny_config(demo_tokenizer))
    write_lines(tmp_path / "calibration.txt", 400)
    with pytest.raises(ExportError, match=rf"--quantize={variant}: no format in "
                                          rf"--formats={formats[0]} makes that variant"):
        export(encoder, tmp_path / "out", formats=formats, quantize=("none", variant),
               calibration_data=str(tmp_path / "calibration.txt"), tokenizer=demo_tokenizer,
               max_seq_length=MAX_SEQ_LENGTH)
    assert not (tmp_path / "out").exists()
