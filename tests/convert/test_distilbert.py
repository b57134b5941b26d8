"""DistilBERT, the fifth family: `from_hf` on `DistilBertModel`, `DistilBertForMaskedLM` and the four
task heads equals `transformers` (PyTorch CPU) with fully random weights, and `to_hf` writes them
back as folders `transformers` loads with no missing or unexpected weights."""

import keras
import numpy as np
import pytest
import torch
import transformers

import kerasbert
from tests.helpers import (assert_pretraining_outputs_match, hf_config, random_inputs,
                           run_hf_model, save_hf_model)

TOLERANCE = 1e-5
LABELS = {0: "neg", 1: "neutral", 2: "pos"}


def pair_inputs(config, batch=3, seq=12, seed=0):
    """Right-padded inputs whose second half of each row is segment 1 (DistilBERT ignores it)."""
    inputs = random_inputs(config, batch=batch, seq=seq, seed=seed)
    lengths = inputs["padding_mask"].sum(1)
    for row, length in enumerate(lengths):
        inputs["segment_ids"][row, length // 2:length] = 1
    return inputs


def choice_inputs(config, choices=3, batch=2, seq=9):
    rows = pair_inputs(config, batch=batch * choices, seq=seq, seed=4)
    return {name: value.reshape(batch, choices, seq) for name, value in rows.items()}


ENCODER_CASES = {
    "learned-positions": {},
    "sinusoidal-positions": dict(sinusoidal_pos_embds=True),
    "odd-shape-relu": dict(hidden_size=36, num_attention_heads=3, num_hidden_layers=3,
                           hidden_act="relu", intermediate_size=50),
}


@pytest.mark.parametrize("case", sorted(ENCODER_CASES))
def test_encoder_matches_transformers(case, tmp_path):
    reference = save_hf_model("DistilBertModel", hf_config("distilbert", **ENCODER_CASES[case]),
                              tmp_path)
    encoder = kerasbert.convert.from_hf(tmp_path)
    config = encoder.config
    assert config.family == "distilbert" and config.type_vocab_size == 0
    assert not config.use_pooler and "pooled_output" not in encoder.output
    assert config.sinusoidal_positions == (case == "sinusoidal-positions")
    for seed, (batch, seq) in enumerate([(3, 12), (2, 7), (1, 1)]):
        inputs = pair_inputs(config, batch=batch, seq=seq, seed=seed)
        expected = run_hf_model(reference, inputs).last_hidden_state.numpy()
        np.testing.assert_allclose(encoder(inputs)["sequence_output"], expected, rtol=0,
                                   atol=TOLERANCE)


def test_segment_ids_are_accepted_and_ignored():
    encoder = kerasbert.models.build_encoder(
        kerasbert.zoo.get_config(
            "distilbert_base_uncased", vocab_size=100, hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2))
    inputs = pair_inputs(encoder.config)
    assert inputs["segment_ids"].max() == 1
    zeros = dict(inputs, segment_ids=np.zeros_like(inputs["segment_ids"]))
    np.testing.assert_array_equal(encoder(inputs)["sequence_output"],
                                  encoder(zeros)["sequence_output"])
    assert not any("segment" in weight.path for weight in encoder.weights)


def test_hidden_states_match_transformers(tmp_path):
    reference = save_hf_model("DistilBertModel", hf_config("distilbert", num_hidden_layers=3),
                              tmp_path)
    imported = kerasbert.convert.from_hf(tmp_path)
    encoder = kerasbert.models.build_encoder(imported.config, output_hidden_states=True)
    encoder.set_weights(imported.get_weights())
    inputs = pair_inputs(encoder.config, batch=2, seq=9)
    expected = run_hf_model(reference, inputs, output_hidden_states=True).hidden_states
    ours = encoder(inputs)["hidden_states"]
    assert len(ours) == len(expected) == 4
    for mine, theirs in zip(ours, expected):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=0, atol=TOLERANCE)


def test_sinusoidal_table_is_transformers_and_is_not_trained(tmp_path):
    reference = save_hf_model("DistilBertModel", hf_config("distilbert", sinusoidal_pos_embds=True),
                              tmp_path)
    # A fresh encoder (no checkpoint) starts from the same fixed table transformers builds.
    encoder = kerasbert.models.build_encoder(kerasbert.convert.from_hf(tmp_path).config)
    table = encoder.embeddings.position_embedding.embeddings
    np.testing.assert_allclose(table.numpy(),
                               reference.embeddings.position_embeddings.weight.detach().numpy(),
                               rtol=0, atol=1e-6)
    assert all(weight.path != table.path for weight in encoder.trainable_weights)


def test_masked_lm_matches_transformers(tmp_path):
    reference = save_hf_model("DistilBertForMaskedLM", hf_config("distilbert"), tmp_path)
    model = kerasbert.convert.from_hf(tmp_path)
    assert isinstance(model, kerasbert.models.PretrainingModel) and model.heads == ("mlm",)
    assert_pretraining_outputs_match(model, reference, {"logits": "mlm_logits"})


def _import(model_class, config, directory):
    reference = save_hf_model(model_class, config, directory)
    return reference, kerasbert.convert.from_hf(directory)


def test_sequence_classification_reads_the_first_token_through_pre_classifier_and_relu(tmp_path):
    reference, model = _import(
        "DistilBertForSequenceClassification",
        hf_config("distilbert", id2label=LABELS, label2id={v: k for k, v in LABELS.items()},
                  seq_classif_dropout=0.25), tmp_path)
    assert model.task == "sequence_classification" and model.id2label == LABELS
    assert model.dropout == 0.25
    inputs = pair_inputs(model.encoder.config)
    np.testing.assert_allclose(model(inputs)["logits"], run_hf_model(reference, inputs).logits,
                               rtol=0, atol=TOLERANCE)


def test_regression(tmp_path):
    reference, model = _import("DistilBertForSequenceClassification",
                               hf_config("distilbert", num_labels=1), tmp_path)
    assert model.is_regression
    inputs = pair_inputs(model.encoder.config)
    np.testing.assert_allclose(model(inputs)["logits"], run_hf_model(reference, inputs).logits,
                               rtol=0, atol=TOLERANCE)


def test_token_classification(tmp_path):
    reference, model = _import(
        "DistilBertForTokenClassification",
        hf_config("distilbert", id2label=LABELS, label2id={v: k for k, v in LABELS.items()},
                  hidden_dropout_prob=0.15), tmp_path)
    assert model.id2label == LABELS and model.dropout == 0.15
    inputs = pair_inputs(model.encoder.config)
    real = inputs["padding_mask"] == 1
    np.testing.assert_allclose(np.asarray(model(inputs)["logits"])[real],
                               run_hf_model(reference, inputs).logits.numpy()[real],
                               rtol=0, atol=TOLERANCE)


def test_question_answering(tmp_path):
    reference, model = _import("DistilBertForQuestionAnswering",
                               hf_config("distilbert", qa_dropout=0.3), tmp_path)
    assert model.task == "question_answering" and model.dropout == 0.3
    inputs = pair_inputs(model.encoder.config)
    real = inputs["padding_mask"] == 1
    outputs, expected = model(inputs), run_hf_model(reference, inputs)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(np.asarray(outputs[name])[real],
                                   getattr(expected, name).numpy()[real], rtol=0, atol=TOLERANCE)


def test_multiple_choice(tmp_path):
    reference, model = _import("DistilBertForMultipleChoice", hf_config("distilbert"), tmp_path)
    inputs = choice_inputs(model.encoder.config)
    logits = model(inputs)["logits"]
    assert tuple(logits.shape) == (2, 3)
    np.testing.assert_allclose(logits, run_hf_model(reference, inputs).logits, rtol=0,
                               atol=TOLERANCE)


# === to_hf: back to transformers ===

ROUND_TRIPS = {
    "DistilBertModel": {},
    "DistilBertForMaskedLM": {},
    "DistilBertForSequenceClassification": dict(id2label=LABELS,
                                                label2id={v: k for k, v in LABELS.items()},
                                                seq_classif_dropout=0.3),
    "DistilBertForTokenClassification": dict(id2label=LABELS,
                                             label2id={v: k for k, v in LABELS.items()}),
    "DistilBertForQuestionAnswering": dict(qa_dropout=0.2),
    "DistilBertForMultipleChoice": dict(sinusoidal_pos_embds=True),
}


@pytest.mark.parametrize("architecture", sorted(ROUND_TRIPS))
def test_to_hf_gives_the_same_transformers_model(architecture, tmp_path):
    reference = save_hf_model(architecture, hf_config("distilbert", **ROUND_TRIPS[architecture]),
                              tmp_path / "original")
    model = kerasbert.convert.from_hf(tmp_path / "original")
    kerasbert.convert.to_hf(model, tmp_path / "written")
    reloaded, info = getattr(transformers, architecture).from_pretrained(
        tmp_path / "written", output_loading_info=True)
    reloaded.eval()
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    original_state, written_state = reference.state_dict(), reloaded.state_dict()
    assert sorted(written_state) == sorted(original_state)
    for name, value in original_state.items():
        assert np.array_equal(written_state[name].numpy(), value.numpy()), name
    for field in ("dim", "n_layers", "n_heads", "hidden_dim", "activation", "sinusoidal_pos_embds",
                  "max_position_embeddings", "seq_classif_dropout", "qa_dropout", "dropout"):
        assert getattr(reloaded.config, field) == getattr(reference.config, field), field
    assert reloaded.config.id2label == reference.config.id2label
    config = model.encoder.config if hasattr(model, "encoder") else model.config
    inputs = (choice_inputs(config) if architecture.endswith("MultipleChoice")
              else pair_inputs(config))
    expected, actual = run_hf_model(reference, inputs), run_hf_model(reloaded, inputs)
    for name in ("last_hidden_state", "logits", "start_logits", "end_logits"):
        if name in expected:
            np.testing.assert_allclose(actual[name].numpy(), expected[name].numpy(), rtol=0,
                                       atol=1e-6, err_msg=name)


def test_to_hf_writes_a_distilbert_tokenizer(tmp_path):
    tokenizer = kerasbert.zoo.build_tokenizer("distilbert_base_uncased",
                                              kerasbert.data.demo.vocabulary_dir("wordpiece"))
    encoder = kerasbert.zoo.build("distilbert_base_uncased", num_layers=1, hidden_size=32,
                                  num_heads=2, intermediate_size=64,
                                  vocab_size=tokenizer.vocabulary_size())
    kerasbert.convert.to_hf(encoder, tmp_path / "written", tokenizer=tokenizer)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "written")
    texts_a, texts_b = ["The cat sat on the mat."], ["A dog barked twice."]
    expected = theirs(texts_a, texts_b, max_length=24, padding="max_length", truncation=True)
    assert "token_type_ids" not in expected
    for ours in (tokenizer, kerasbert.tokenizers.from_hf(tmp_path / "written")):
        packed = ours(texts_a, texts_b, max_length=24)
        assert packed["token_ids"].numpy().tolist() == expected["input_ids"]
        assert packed["padding_mask"].numpy().tolist() == expected["attention_mask"]
        assert packed["segment_ids"].numpy().max() == 0


def test_to_hf_refuses_a_layer_norm_epsilon_transformers_fixes(tmp_path):
    encoder = kerasbert.zoo.build("distilbert_base_uncased", num_layers=1, hidden_size=32,
                                  num_heads=2, intermediate_size=64, vocab_size=100,
                                  layer_norm_epsilon=1e-6)
    with pytest.raises(kerasbert.convert.UnsupportedModelError, match="1e-12"):
        kerasbert.convert.to_hf(encoder, tmp_path / "written")
    assert not (tmp_path / "written").exists()


def test_config_rejects_segments_and_pooler_for_distilbert():
    config = kerasbert.zoo.get_config("distilbert_base_uncased")
    with pytest.raises(ValueError, match="type_vocab_size must be 0"):
        config.replace(type_vocab_size=2)
    with pytest.raises(ValueError, match="use_pooler must be False"):
        config.replace(use_pooler=True)
    with pytest.raises(ValueError, match="only DistilBERT"):
        kerasbert.zoo.get_config("bert_base_uncased").replace(type_vocab_size=0)
    with pytest.raises(ValueError, match="sinusoidal_positions"):
        kerasbert.zoo.get_config("bert_base_uncased").replace(sinusoidal_positions=True)


def test_keras_round_trip_keeps_the_fixed_sinusoidal_table(tmp_path):
    config = kerasbert.zoo.get_config(
        "distilbert_base_uncased", vocab_size=100, hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2,
        max_positions=40, sinusoidal_positions=True)
    model = kerasbert.models.build_task_model(config, "sequence_classification", num_labels=3)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    inputs = pair_inputs(config)
    np.testing.assert_allclose(loaded(inputs)["logits"], model(inputs)["logits"], rtol=0, atol=1e-6)
    assert len(loaded.trainable_weights) == len(model.trainable_weights)
    assert loaded.encoder.embeddings.position_embedding.trainable is False


def test_training_dropout_sits_where_transformers_puts_it(tmp_path):
    """DistilBERT drops out after the feed-forward network but not after attention (BERT drops
    out after both). With the feed-forward output zeroed, a block in training mode is then
    deterministic: ours must equal transformers' block in `train()` mode."""
    reference = save_hf_model("DistilBertModel",
                              hf_config("distilbert", hidden_dropout_prob=0.5), tmp_path)
    with torch.no_grad():
        reference.transformer.layer[0].ffn.lin2.weight.zero_()
        reference.transformer.layer[0].ffn.lin2.bias.zero_()
    reference.save_pretrained(tmp_path)
    ours = kerasbert.convert.from_hf(tmp_path).get_layer("transformer_layer_0")
    hidden = np.random.default_rng(0).normal(size=(2, 7, 32)).astype("float32")
    mask = np.ones((2, 7), "int32")  # padding is tested above; the block's own mask format varies
    reference.train()
    with torch.no_grad():
        expected = reference.transformer.layer[0](torch.tensor(hidden),
                                                  attn_mask=torch.tensor(mask))
    expected = (expected[0] if isinstance(expected, tuple) else expected).numpy()
    for _ in range(3):  # several dropout draws: none may touch the attention output
        np.testing.assert_allclose(ours(hidden, mask, training=True), expected, rtol=0,
                                   atol=TOLERANCE)


def test_span_head_drops_out_before_its_dense_layer():
    """transformers' DistilBertForQuestionAnswering applies `qa_dropout` to the sequence output
    (BERT's span head has no dropout): with the encoder's dropout off, training-mode logits vary
    only where the head's dropout is."""
    def span_logits(family, training):
        keras.utils.set_random_seed(0)
        config = kerasbert.zoo.get_config(
            {"bert": "bert_tiny_uncased", "distilbert": "distilbert_base_uncased"}[family],
            vocab_size=100, hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2,
            dropout=0.0, attention_dropout=0.0)
        model = kerasbert.models.build_task_model(config, "question_answering", dropout=0.5)
        inputs = random_inputs(config, batch=2, seq=9)
        return model(inputs, training=training)["start_logits"]

    np.testing.assert_array_equal(span_logits("bert", True), span_logits("bert", False))
    assert np.abs(span_logits("distilbert", True) - span_logits("distilbert", False)).max() > 1e-3
