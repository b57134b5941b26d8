"""kerasbert's Dropout: ThreeFry masks inside XLA at the exact rate; outside XLA, float32 draws at
the exact rate for 16-bit inputs and Keras' layer for float32."""

import keras
import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

import kerasbert
from kerasbert.layers import Dropout
from kerasbert.layers.dropout import scaled_keep_mask

RATE = 0.1


def xla(function):
    return tf.function(function, jit_compile=True)


def test_under_xla_the_mask_is_threefry_from_the_layer_seed():
    inputs = np.random.default_rng(0).normal(size=(1000, 500)).astype("float32")
    layer = Dropout(RATE, seed=11)
    outputs = xla(lambda x: layer(x, training=True))(inputs).numpy()
    # A SeedGenerator(11) starts at [11, 0] and hands out its state before counting on.
    expected = xla(lambda x: x * scaled_keep_mask(tf.shape(x), tf.constant([11, 0]), RATE,
                                                  tf.float32))(inputs).numpy()
    np.testing.assert_array_equal(outputs, expected)
    dropped = outputs == 0
    assert scipy.stats.binomtest(int(dropped.sum()), dropped.size, RATE).pvalue > 1e-4
    np.testing.assert_array_equal(outputs[~dropped],
                                  inputs[~dropped] * np.float32(1 / (1 - RATE)))
    keras_outputs = np.asarray(keras.layers.Dropout(RATE, seed=11)(inputs, training=True))
    assert (keras_outputs != outputs).any()


def test_under_xla_the_rate_is_exact_with_mixed_bfloat16():
    # Keras' own layer draws in bfloat16 here, on a grid of 1/128: its rate 0.1 drops 0.1014 of
    # these 2 million ones (binomial p-value 1e-11); the float32 draw keeps 0.1.
    layer = Dropout(RATE, seed=4, dtype="mixed_bfloat16")
    outputs = xla(lambda x: layer(x, training=True))(np.ones((2000, 1000), "float32")).numpy()
    assert str(outputs.dtype) == "bfloat16"
    dropped = int((outputs == 0).sum())
    assert scipy.stats.binomtest(dropped, outputs.size, RATE).pvalue > 1e-4


def test_under_xla_each_step_draws_a_new_mask():
    layer = Dropout(0.5, seed=5)
    step = xla(lambda x: layer(x, training=True))
    ones = np.ones((64, 64), "float32")
    first, second = step(ones).numpy(), step(ones).numpy()
    assert (first != second).any()


def test_under_xla_the_gradient_is_the_scaled_mask():
    layer = Dropout(0.3, seed=6)

    @xla
    def outputs_and_gradient(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = layer(inputs, training=True)
            total = tf.reduce_sum(outputs)
        return outputs, tape.gradient(total, inputs)

    outputs, gradient = (tensor.numpy() for tensor in outputs_and_gradient(
        tf.constant(np.random.default_rng(3).normal(size=(8, 32)).astype("float32"))))
    kept = outputs != 0
    assert kept.any() and not kept.all()
    np.testing.assert_array_equal(gradient[~kept], 0.0)
    np.testing.assert_array_equal(gradient[kept], np.float32(1 / (1 - 0.3)))


def test_without_xla_it_is_keras_layer_draw_for_draw():
    inputs = np.random.default_rng(2).normal(size=(4, 3, 16, 16)).astype("float32")
    ours, theirs = Dropout(RATE, seed=7), keras.layers.Dropout(RATE, seed=7)
    for call in (lambda layer: layer(inputs, training=True),
                 lambda layer: tf.function(lambda x: layer(x, training=True))(inputs)):
        for _ in range(2):
            np.testing.assert_array_equal(np.asarray(call(ours)), np.asarray(call(theirs)))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("traced", [False, True], ids=["eager", "graph"])
def test_without_xla_16_bit_inputs_drop_at_the_exact_rate_scaled_once(policy, traced):
    # Keras' own layer draws in the inputs' dtype: under mixed_bfloat16 its rate 0.1 drops 13/128
    # = 0.1016 of these 2 million inputs (binomial p-value 6e-15).
    inputs = np.random.default_rng(8).uniform(0.5, 2.0, size=(2000, 1000)).astype("float32")
    layer = Dropout(RATE, seed=12, dtype=policy)
    call = (lambda x: layer(x, training=True))
    outputs = np.asarray((tf.function(call) if traced else call)(inputs))
    assert str(outputs.dtype) == policy.removeprefix("mixed_")
    dropped = outputs == 0
    assert scipy.stats.binomtest(int(dropped.sum()), dropped.size, RATE).pvalue > 1e-4
    # Kept values: the 16-bit input times 1 / (1 - rate) in float32, rounded to 16 bits once.
    rounded_inputs = inputs.astype(outputs.dtype).astype("float32")
    expected = (rounded_inputs[~dropped] * np.float32(1 / (1 - RATE))).astype(outputs.dtype)
    np.testing.assert_array_equal(outputs[~dropped], expected)


def test_inference_passes_inputs_unchanged():
    inputs = np.random.default_rng(1).normal(size=(3, 7)).astype("float32")
    layer = Dropout(0.5, seed=0)
    np.testing.assert_array_equal(np.asarray(layer(inputs)), inputs)
    np.testing.assert_array_equal(xla(lambda x: layer(x, training=False))(inputs).numpy(), inputs)
    np.testing.assert_array_equal(xla(lambda x: Dropout(0.0)(x, training=True))(inputs).numpy(),
                                  inputs)


def test_config_round_trips():
    layer = Dropout(0.25, seed=9, name="drop")
    config = layer.get_config()
    assert "noise_shape" not in config
    assert Dropout.from_config(config).get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is Dropout and restored.get_config() == config


def test_models_use_it_for_every_dropout():
    config = kerasbert.zoo.get_config("bert_tiny_uncased")
    model = kerasbert.models.build_task_model(config, "sequence_classification", num_labels=2)
    dropouts = [layer for layer in model._flatten_layers()
                if isinstance(layer, keras.layers.Dropout)]
    assert dropouts and all(type(layer) is Dropout for layer in dropouts)
