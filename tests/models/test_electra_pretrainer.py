"""ELECTRA pretraining: shared embeddings, replacements sampled without gradient, labels and
losses equal to an independent computation, `fit` logs, `.keras` round trip."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
import kerasbert.data.demo
from kerasbert.data import PretrainingDataConfig, pretraining_dataset
from kerasbert.models.electra import ElectraPretrainer, generator_config
from tests.helpers import demo_wordpiece_tokenizer, first_pretraining_batch

MAX_LENGTH, PREDICTIONS = 32, 5


@pytest.fixture(scope="module")
def tokenizer():
    return demo_wordpiece_tokenizer()


@pytest.fixture(scope="module")
def batch(tokenizer):
    return first_pretraining_batch(tokenizer, "electra", MAX_LENGTH, PREDICTIONS)


def _model(tokenizer, seed=3):
    config = kerasbert.zoo.get_config("electra_small_discriminator").replace(
        vocab_size=tokenizer.vocabulary_size(), num_layers=1, hidden_size=32, num_heads=2,
        intermediate_size=64, embedding_size=16, max_positions=MAX_LENGTH)
    return ElectraPretrainer(config, generator_config(config, 0.5), seed=seed)


def _inputs(model, batch):
    return {name: batch[name] for name in model._input_names}


def test_generator_shares_the_discriminator_embeddings(tokenizer):
    model = _model(tokenizer)
    generator, discriminator = model.generator.embeddings, model.discriminator.embeddings
    for table in ("token_embedding", "position_embedding", "segment_embedding", "layer_norm"):
        assert getattr(generator, table) is getattr(discriminator, table)
    assert generator.projection is not discriminator.projection
    assert model.generator.config.hidden_size == 16 and model.discriminator.config.hidden_size == 32
    paths = [weight.path for weight in model.weights]
    assert len(paths) == len(set(paths))


@pytest.mark.slow
def test_called_on_a_whole_batch_it_leaves_out_what_is_not_an_input(tokenizer, batch):
    model = _model(tokenizer)
    assert "next_sentence_labels" in batch  # the pipeline's batch carries it for every objective
    whole = model(dict(batch), training=False)
    inputs_only = model(_inputs(model, batch), training=False)
    np.testing.assert_array_equal(whole["mlm_logits"], inputs_only["mlm_logits"])


def test_replacements_labels_and_losses(tokenizer, batch):
    model = _model(tokenizer)
    outputs = {name: np.asarray(value) for name, value in model(_inputs(model, batch)).items()}
    labels = outputs["rtd_labels"]
    # Only real masked positions can be replaced; a replaced token differs from the original.
    positions, weights = batch["masked_lm_positions"], batch["masked_lm_weights"]
    allowed = np.zeros_like(labels)
    for row in range(len(labels)):
        allowed[row, positions[row][weights[row] > 0]] = 1
    assert labels.sum() > 0 and not (labels * (1 - allowed)).any()
    # Losses: an independent numpy computation on the same outputs.
    logits = outputs["mlm_logits"].astype("float64")
    log_softmax = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                  keepdims=True)) - logits.max(-1, keepdims=True)
    mlm = -np.take_along_axis(log_softmax, batch["masked_lm_ids"][..., None], -1)[..., 0]
    mlm_loss = (mlm * weights).sum() / weights.sum()
    z, y, mask = outputs["rtd_logits"].astype("float64"), labels, batch["padding_mask"]
    bce = np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
    rtd_loss = (bce * mask).sum() / mask.sum()
    model.compile()
    total = model.compute_loss(x=_inputs(model, batch), y_pred=outputs)
    np.testing.assert_allclose(float(total), mlm_loss + 50 * rtd_loss, rtol=1e-5)


def test_no_gradient_flows_through_the_sample(tokenizer, batch):
    """The discriminator's loss reaches the shared embeddings but none of the generator's
    own weights: the sampled tokens are ids, not a differentiable path."""
    model = _model(tokenizer)
    inputs = {name: tf.constant(value) for name, value in _inputs(model, batch).items()}
    with tf.GradientTape(persistent=True) as tape:
        outputs = model(inputs)
        _, rtd_loss = model._pretraining_losses(inputs, outputs)
    own = [w for w in model.trainable_weights if w.path.startswith(("generator/", "mlm_head/"))]
    assert len(own) > 10
    gradients = tape.gradient(rtd_loss, [w.value for w in own])
    assert all(g is None or not np.any(tf.convert_to_tensor(g)) for g in gradients)
    shared = tape.gradient(rtd_loss, model.discriminator.token_embedding.embeddings.value)
    assert shared is not None


@pytest.mark.slow
def test_fit_logs_and_keras_round_trip(tokenizer, tmp_path):
    model = _model(tokenizer)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    dataset = pretraining_dataset(kerasbert.data.demo.pretraining_corpus_files(), tokenizer,
                                  PretrainingDataConfig(
                                      objective="electra", batch_size=8, max_seq_length=MAX_LENGTH,
                                      max_predictions_per_seq=PREDICTIONS, shuffle_buffer=50),
                                  epochs=None)
    history = model.fit(dataset, steps_per_epoch=3, epochs=1, verbose=0).history
    assert set(history) == {"loss", "mlm_loss", "mlm_accuracy", "rtd_loss", "rtd_accuracy",
                            "rtd_precision", "rtd_recall"}
    model.save(tmp_path / "electra.keras")
    reloaded = keras.saving.load_model(tmp_path / "electra.keras")
    assert reloaded.generator.embeddings.token_embedding is (
        reloaded.discriminator.embeddings.token_embedding)
    for mine, theirs in zip(model.weights, reloaded.weights):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    assert reloaded.optimizer is not None


def test_bad_arguments():
    config = kerasbert.zoo.get_config("electra_small_discriminator")
    with pytest.raises(ValueError, match="ratio"):
        generator_config(config, 0)
    with pytest.raises(ValueError, match="loss"):
        ElectraPretrainer(config.replace(num_layers=1), generator_config(
            config.replace(num_layers=1))).compile(loss="mse")
