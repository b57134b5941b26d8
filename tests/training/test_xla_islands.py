"""XLA islands in CPU bfloat16 training steps (kerasbert.xla_islands): where they are made,
that the optimizer's update and the feed-forward activation run inside them, and that they
compute what the code outside them computes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.layers import TransformerLayer
from kerasbert.layers.activations import gelu_exact
from kerasbert.training import AdamW, Lamb
from kerasbert.training.distribute import get_strategy
from kerasbert.xla_islands import makes_islands


def in_xla():
    return tf.__internal__.get_enclosing_xla_context() is not None


@pytest.fixture
def bfloat16_policy():
    keras.config.set_dtype_policy("mixed_bfloat16")
    yield
    keras.config.set_dtype_policy("float32")


def test_islands_only_in_a_traced_step_outside_xla_on_one_device():
    seen = {}

    def record(name, compute_dtype="bfloat16"):
        seen[name] = makes_islands(compute_dtype)
        return tf.constant(0.0)

    record("eager")
    tf.function(lambda: record("traced"))()
    tf.function(lambda: record("float32", "float32"))()
    tf.function(lambda: record("inside xla"), jit_compile=True)()
    get_strategy("one_device").run(tf.function(lambda: record("one device")))
    mirrored = get_strategy("mirrored", devices=["/cpu:0"])
    tf.function(lambda: mirrored.run(lambda: record("mirrored replica")))()
    assert seen == {"eager": False, "traced": True, "float32": False, "inside xla": False,
                    "one device": True, "mirrored replica": False}


@pytest.mark.parametrize("optimizer_class", [AdamW, Lamb])
def test_a_traced_update_runs_as_one_xla_computation(optimizer_class, bfloat16_policy):
    """Under mixed_bfloat16, every variable's update of a step traced without XLA runs inside
    one XLA computation, and the weights come out as an eager update (no island) leaves them;
    under float32 the traced update runs outside XLA."""
    def weights_after(traced):
        weights = [keras.Variable(np.full((3, 4), 1.0, "float32"), name="kernel"),
                   keras.Variable(np.full((4,), 0.5, "float32"), name="bias")]
        optimizer = optimizer_class(learning_rate=0.1, weight_decay=0.1, global_clipnorm=0.5)
        inside = []
        original = optimizer.update_step

        def update_step(gradient, variable, learning_rate):
            inside.append(in_xla())
            return original(gradient, variable, learning_rate)

        optimizer.update_step = update_step
        gradients = [tf.constant(np.arange(12, dtype="float32").reshape(3, 4)),
                     tf.constant([1.0, -2.0, 3.0, -4.0])]
        step = (tf.function(lambda: optimizer.apply(gradients, weights)) if traced
                else lambda: optimizer.apply(gradients, weights))
        for _ in range(3):
            step()
        return [weight.numpy() for weight in weights], inside, int(optimizer.iterations.numpy())

    island, island_inside, island_steps = weights_after(traced=True)
    eager, eager_inside, eager_steps = weights_after(traced=False)
    assert island_inside and all(island_inside)
    assert eager_inside and not any(eager_inside)
    assert island_steps == eager_steps == 3
    assert np.max(np.abs(eager[0] - 1.0)) > 0.1  # the steps moved the weights
    for got, want in zip(island, eager):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    keras.config.set_dtype_policy("float32")
    _, float32_inside, _ = weights_after(traced=True)
    assert float32_inside and not any(float32_inside)


def test_feed_forward_activation_runs_in_an_island_while_training(bfloat16_policy):
    """A bfloat16 transformer layer traced for training outside XLA computes its activation
    inside an XLA computation; the output equals the same layer's without islands (dropout 0)
    to bfloat16's precision."""
    keras.utils.set_random_seed(0)
    layer = TransformerLayer(num_heads=2, hidden_size=8, intermediate_size=16, dropout=0.0,
                             attention_dropout=0.0)
    inputs = tf.constant(np.random.default_rng(0).standard_normal((2, 5, 8)), "float32")
    mask = tf.constant([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
    inside = []

    def activation(x):
        inside.append(in_xla())
        return gelu_exact(x)

    layer.activation = activation
    trained = tf.function(lambda: layer(inputs, mask, training=True))()
    assert inside == [True]
    plain = layer(inputs, mask, training=True)  # eager: no island
    assert inside == [True, False]
    np.testing.assert_allclose(np.asarray(trained, "float32"), np.asarray(plain, "float32"),
                               rtol=0, atol=1e-2)
