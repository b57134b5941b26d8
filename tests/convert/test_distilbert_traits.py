"""What only DistilBERT does: no segment embeddings (segment ids are accepted and ignored, the
tokenizer writes none) and no pooler, its config keys, fixed sinusoidal positions, and dropout
where transformers puts it (after the feed-forward network but not attention; before the span
head). Its parity with `transformers` is in the shared batteries: test_hf_parity.py,
test_pretraining_parity.py, test_task_parity.py and test_to_hf.py, one row per family."""

import keras
import numpy as np
import pytest
import torch
import transformers

import kerasbert
from tests.helpers import hf_config, random_inputs, run_hf_model, save_hf_model

TOLERANCE = 1e-5


def pair_inputs(config, batch=3, seq=12, seed=0):
    """Right-padded inputs whose second half of each row is segment 1 (DistilBERT ignores it)."""
    inputs = random_inputs(config, batch=batch, seq=seq, seed=seed)
    lengths = inputs["padding_mask"].sum(1)
    for row, length in enumerate(lengths):
        inputs["segment_ids"][row, length // 2:length] = 1
    return inputs


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


@pytest.mark.parametrize("sinusoidal", [False, True])
def test_from_hf_reads_no_segments_no_pooler_and_the_kind_of_positions(sinusoidal, tmp_path):
    """DistilBERT's config keys: no token types, no pooler, `sinusoidal_pos_embds`; segment 1 ids
    given to ours change nothing (transformers' model takes none)."""
    reference = save_hf_model("DistilBertModel",
                              hf_config("distilbert", sinusoidal_pos_embds=sinusoidal), tmp_path)
    encoder = kerasbert.convert.from_hf(tmp_path)
    config = encoder.config
    assert config.type_vocab_size == 0 and not config.use_pooler
    assert config.sinusoidal_positions == sinusoidal and "pooled_output" not in encoder.output
    inputs = pair_inputs(config)
    np.testing.assert_allclose(encoder(inputs)["sequence_output"],
                               run_hf_model(reference, inputs).last_hidden_state.numpy(), rtol=0,
                               atol=TOLERANCE)


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
