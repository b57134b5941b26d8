"""`from_hf` on `*ForSequenceClassification` / `*ForTokenClassification` / `*ForQuestionAnswering` /
`*ForMultipleChoice` checkpoints: every family x head equal to `transformers` (PyTorch CPU)."""

import numpy as np
import pytest

import kerasbert
from tests.helpers import hf_config, random_inputs, run_hf_model, save_hf_model

TOLERANCE = 1e-5
FAMILIES = ("bert", "roberta", "albert", "electra", "distilbert", "modernbert")
STEMS = {"bert": "Bert", "roberta": "Roberta", "albert": "Albert", "electra": "Electra",
         "distilbert": "DistilBert", "modernbert": "ModernBert"}
LABELS = {0: "O", 1: "B-PER", 2: "I-PER"}


def choice_inputs(config, choices=3, batch=2, seq=9):
    """`[batch, choices, seq]` inputs: each choice its own padded pair."""
    rows = random_inputs(config, batch=batch * choices, seq=seq, seed=4)
    return {name: value.reshape(batch, choices, seq) for name, value in rows.items()}


def import_reference(model_class, config, directory):
    reference = save_hf_model(model_class, config, directory)
    return reference, kerasbert.convert.from_hf(directory)


@pytest.mark.parametrize("family", FAMILIES)
def test_sequence_classification(family, tmp_path):
    config = hf_config(family, id2label={0: "neg", 1: "neutral", 2: "pos"},
                       label2id={"neg": 0, "neutral": 1, "pos": 2})
    reference, model = import_reference(f"{STEMS[family]}ForSequenceClassification", config,
                                        tmp_path)
    assert isinstance(model, kerasbert.models.TaskModel)
    assert model.task == "sequence_classification" and model.id2label == {0: "neg", 1: "neutral",
                                                                            2: "pos"}
    inputs = random_inputs(model.encoder.config)
    np.testing.assert_allclose(model(inputs)["logits"],
                               run_hf_model(reference, inputs).logits.numpy(),
                               rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("family", ("bert", "roberta", "distilbert", "modernbert"))
def test_regression(family, tmp_path):
    reference, model = import_reference(f"{STEMS[family]}ForSequenceClassification",
                                        hf_config(family, num_labels=1), tmp_path)
    assert model.is_regression
    inputs = random_inputs(model.encoder.config)
    logits = model(inputs)["logits"]
    assert tuple(logits.shape) == (3, 1)
    np.testing.assert_allclose(logits, run_hf_model(reference, inputs).logits.numpy(),
                               rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("family", FAMILIES)
def test_token_classification(family, tmp_path):
    config = hf_config(family, id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    reference, model = import_reference(f"{STEMS[family]}ForTokenClassification", config, tmp_path)
    assert model.id2label == LABELS and not model.encoder.config.use_pooler
    inputs = random_inputs(model.encoder.config)
    real = inputs["padding_mask"] == 1
    np.testing.assert_allclose(np.asarray(model(inputs)["logits"])[real],
                               run_hf_model(reference, inputs).logits.numpy()[real],
                               rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("family", FAMILIES)
def test_question_answering(family, tmp_path):
    reference, model = import_reference(f"{STEMS[family]}ForQuestionAnswering", hf_config(family),
                                        tmp_path)
    assert model.task == "question_answering" and model.id2label is None
    inputs = random_inputs(model.encoder.config)
    real = inputs["padding_mask"] == 1
    outputs, expected = model(inputs), run_hf_model(reference, inputs)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(np.asarray(outputs[name])[real],
                                   getattr(expected, name).numpy()[real], rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("family", FAMILIES)
def test_multiple_choice(family, tmp_path):
    reference, model = import_reference(f"{STEMS[family]}ForMultipleChoice", hf_config(family),
                                        tmp_path)
    inputs = choice_inputs(model.encoder.config)
    logits = model(inputs)["logits"]
    assert tuple(logits.shape) == (2, 3)
    np.testing.assert_allclose(logits, run_hf_model(reference, inputs).logits.numpy(),
                               rtol=0, atol=TOLERANCE)


# (family, transformers class, the config key that sets the head's dropout, its value)
HEAD_DROPOUTS = [
    ("albert", "AlbertForSequenceClassification", "classifier_dropout_prob", 0.25),
    ("bert", "BertForTokenClassification", "classifier_dropout", 0.3),
    ("electra", "ElectraForMultipleChoice", "summary_last_dropout", 0.2),
    ("distilbert", "DistilBertForSequenceClassification", "seq_classif_dropout", 0.25),
    ("distilbert", "DistilBertForTokenClassification", "hidden_dropout_prob", 0.15),
    ("distilbert", "DistilBertForQuestionAnswering", "qa_dropout", 0.3),
    ("modernbert", "ModernBertForTokenClassification", "classifier_dropout", 0.2),
]


# ModernBERT's sequence-level heads pool by `classifier_pooling`: the first token or the mean of
# the tokens, over sequences reaching past the local window of 16.
@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("model_class", ["ModernBertForSequenceClassification",
                                         "ModernBertForMultipleChoice"])
def test_pooling_comes_from_the_checkpoint_config(model_class, pooling, tmp_path):
    reference, model = import_reference(model_class, hf_config(
        "modernbert", classifier_pooling=pooling), tmp_path)
    assert model.pooling == {"cls": "first_token", "mean": "mean"}[pooling]
    config = model.encoder.config
    inputs = (choice_inputs(config, seq=45) if model.task == "multiple_choice"
              else random_inputs(config, seq=45))
    np.testing.assert_allclose(model(inputs)["logits"],
                               run_hf_model(reference, inputs).logits.numpy(),
                               rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("family,model_class,key,dropout", HEAD_DROPOUTS,
                         ids=[case[1] for case in HEAD_DROPOUTS])
def test_head_dropout_comes_from_the_checkpoint_config(family, model_class, key, dropout,
                                                       tmp_path):
    save_hf_model(model_class, hf_config(family, **{key: dropout}), tmp_path)
    assert kerasbert.convert.from_hf(tmp_path).dropout == dropout


def test_a_head_checkpoint_without_its_head_weights_is_refused(tmp_path):
    import safetensors.torch

    save_hf_model("BertForSequenceClassification", hf_config("bert"), tmp_path)
    path = tmp_path / "model.safetensors"
    state = safetensors.torch.load_file(path)
    del state["classifier.bias"]
    safetensors.torch.save_file(state, path, metadata={"format": "pt"})
    with pytest.raises(kerasbert.convert.WeightMismatchError, match="classifier.bias"):
        kerasbert.convert.from_hf(tmp_path)


def test_an_unread_pooler_in_a_span_checkpoint_is_dropped(tmp_path):
    """Older `BertForQuestionAnswering` files may still store a pooler that the head never reads."""
    import safetensors.torch

    reference = save_hf_model("BertForQuestionAnswering", hf_config("bert"), tmp_path)
    path = tmp_path / "model.safetensors"
    state = safetensors.torch.load_file(path)
    state["bert.pooler.dense.weight"] = state["qa_outputs.weight"].new_zeros((32, 32))
    state["bert.pooler.dense.bias"] = state["qa_outputs.weight"].new_zeros((32,))
    safetensors.torch.save_file(state, path, metadata={"format": "pt"})
    model = kerasbert.convert.from_hf(tmp_path)
    assert not model.encoder.config.use_pooler
    inputs = random_inputs(model.encoder.config)
    real = inputs["padding_mask"] == 1
    np.testing.assert_allclose(np.asarray(model(inputs)["start_logits"])[real],
                               run_hf_model(reference, inputs).start_logits.numpy()[real],
                               rtol=0, atol=TOLERANCE)
