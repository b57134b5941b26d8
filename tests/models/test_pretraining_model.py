"""`PretrainingModel`: pretraining batches straight into `compile` / `fit` / `evaluate`, with
losses equal to an independent computation, and clear errors for impossible head sets."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
import kerasbert.data.demo
from kerasbert.data import PretrainingDataConfig, pretraining_dataset
from kerasbert.models import PretrainingModel, build_pretraining_model
from tests.helpers import demo_wordpiece_tokenizer, first_pretraining_batch

MAX_LENGTH, PREDICTIONS = 32, 5


@pytest.fixture(scope="module")
def tokenizer():
    return demo_wordpiece_tokenizer()


@pytest.fixture(scope="module")
def batch(tokenizer):
    return first_pretraining_batch(tokenizer, "nsp", MAX_LENGTH, PREDICTIONS)


def _model(tokenizer, family="bert", heads=None):
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        family=family, vocab_size=tokenizer.vocabulary_size(), num_layers=1, hidden_size=32,
        num_heads=2, intermediate_size=64, max_positions=MAX_LENGTH)
    return build_pretraining_model(config, heads)


def _cross_entropy(logits, labels):
    logits = logits - logits.max(-1, keepdims=True)
    log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probabilities, labels[..., None], -1)[..., 0]


@pytest.mark.slow
def test_default_losses_equal_an_independent_computation(tokenizer, batch):
    model = _model(tokenizer)
    model.compile()
    results = model.evaluate(_as_dataset(batch),
                             return_dict=True, verbose=0)
    outputs = model.predict(batch, verbose=0)
    weights = batch["masked_lm_weights"]
    mlm = (_cross_entropy(outputs["mlm_logits"], batch["masked_lm_ids"]) * weights).sum() / (
        weights.sum())
    nsp = _cross_entropy(outputs["nsp_logits"], batch["next_sentence_labels"]).mean()
    np.testing.assert_allclose(results["mlm_logits_loss"], mlm, rtol=1e-5)
    np.testing.assert_allclose(results["nsp_logits_loss"], nsp, rtol=1e-5)
    np.testing.assert_allclose(results["loss"], mlm + nsp, rtol=1e-5)
    predicted = outputs["mlm_logits"].argmax(-1) == batch["masked_lm_ids"]
    np.testing.assert_allclose(results["mlm_logits_accuracy"],
                               (predicted * weights).sum() / weights.sum(), rtol=1e-5)
    np.testing.assert_allclose(
        results["nsp_logits_accuracy"],
        (outputs["nsp_logits"].argmax(-1) == batch["next_sentence_labels"]).mean(), rtol=1e-5)


def _as_dataset(batch):
    return tf.data.Dataset.from_tensors(batch)


@pytest.mark.slow
def test_fit_on_the_pipeline_logs_every_head(tokenizer):
    model = _model(tokenizer, family="albert", heads=("mlm", "sop"))
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    dataset = pretraining_dataset(kerasbert.data.demo.pretraining_corpus_files(), tokenizer,
                                  PretrainingDataConfig(
                                      objective="sop", batch_size=8, max_seq_length=MAX_LENGTH,
                                      max_predictions_per_seq=PREDICTIONS, shuffle_buffer=50),
                                  epochs=None)
    history = model.fit(dataset, steps_per_epoch=3, epochs=2, verbose=0).history
    assert set(history) == {"loss", "mlm_logits_loss", "mlm_logits_accuracy", "sop_logits_loss",
                            "sop_logits_accuracy"}
    assert all(np.isfinite(values).all() for values in history.values())


def test_head_sets_that_cannot_work_are_refused(tokenizer):
    encoder = kerasbert.zoo.build("electra_small_discriminator", num_layers=1)
    with pytest.raises(ValueError, match="pooler"):
        PretrainingModel(encoder, heads=("mlm", "nsp"))
    with pytest.raises(ValueError, match="heads must be"):
        PretrainingModel(encoder, heads=("mlm", "xyz"))
    with pytest.raises(TypeError, match="Encoder"):
        PretrainingModel(keras.Sequential([keras.layers.Dense(2)]), heads=("mlm",))


@pytest.mark.parametrize("family, heads", [
    ("bert", ("mlm", "nsp")), ("bert", ("mlm",)), ("bert", ("nsp",)), ("albert", ("mlm", "sop"))])
def test_last_layer_runs_only_where_heads_read_with_equal_logits_and_gradients(
        tokenizer, batch, family, heads):
    """The model computes its last layer at [CLS] and the masked positions only; logits and
    every weight's gradient equal those of the heads on the full encoder output."""
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        family=family, vocab_size=tokenizer.vocabulary_size(), num_layers=2, hidden_size=32,
        num_heads=2, intermediate_size=64, max_positions=MAX_LENGTH)
    model = build_pretraining_model(config, heads)
    inputs = {name: batch[name].copy() for name in model._input_names}
    # Padding in the first row, read positions only before it.
    inputs["padding_mask"][0, 20:] = inputs["token_ids"][0, 20:] = 0
    if "mlm" in heads:
        inputs["masked_lm_positions"][0] %= 20

    def full_encoder_outputs():
        encoded = model.encoder({name: inputs[name] for name in kerasbert.models.INPUT_NAMES})
        outputs = {}
        if "mlm" in heads:
            outputs["mlm_logits"] = model.head_layers["mlm"](encoded["sequence_output"],
                                                             inputs["masked_lm_positions"])
        for head in ("nsp", "sop"):
            if head in heads:
                outputs[f"{head}_logits"] = model.head_layers[head](encoded["pooled_output"])
        return outputs

    results = []
    for forward in (lambda: model(inputs), full_encoder_outputs):
        with tf.GradientTape() as tape:
            outputs = forward()
            loss = sum(tf.reduce_sum(tf.sin(logits)) for logits in outputs.values())
        gradients = tape.gradient(loss, model.trainable_variables)
        results.append(({name: value.numpy() for name, value in outputs.items()},
                        [None if gradient is None else tf.convert_to_tensor(gradient).numpy()
                         for gradient in gradients]))
    (outputs, gradients), (want_outputs, want_gradients) = results
    assert sorted(outputs) == sorted(f"{head}_logits" for head in heads)
    for name, want in want_outputs.items():
        np.testing.assert_allclose(outputs[name], want, atol=2e-5, err_msg=name)
    for variable, gradient, want in zip(model.trainable_variables, gradients, want_gradients):
        if want is None:  # the pooler of a model without a sentence head
            assert gradient is None and "pooler" in variable.path, variable.path
            continue
        np.testing.assert_allclose(gradient, want, rtol=1e-4, atol=2e-5, err_msg=variable.path)
