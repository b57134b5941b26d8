"""WarmupDecay values and serialization; create_optimizer's weight-decay exclusions on a real encoder,
global-norm clipping, gradient accumulation, and fit under float32, mixed precision and XLA."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import models, zoo
from kerasbert.models import INPUT_NAMES
from kerasbert.training.distribute import get_strategy
from kerasbert.training import NO_DECAY_PATTERNS, Adam, AdamW, Lamb, WarmupDecay, create_optimizer

SEQ_LENGTH, VOCAB_SIZE = 8, 64


@pytest.fixture(autouse=True)
def restore_dtype_policy():
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


def tiny_encoder(**build_args):
    config = zoo.get_config("bert_tiny_uncased").replace(num_layers=1, vocab_size=VOCAB_SIZE)
    return models.build_encoder(config, **build_args)


def encoder_inputs(batch_size, seed):
    token_ids = np.random.default_rng(seed).integers(1, VOCAB_SIZE, (batch_size, SEQ_LENGTH))
    token_ids = token_ids.astype("int32")
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
            "padding_mask": np.ones_like(token_ids)}


# --- WarmupDecay ---------------------------------------------------------------------------

# peak 2.0, warmup 4, decay 8, end 0.4: values worked out by hand.
HAND_VALUES = {
    1.0: {0: 0.0, 2: 1.0, 3: 1.5, 4: 2.0, 8: 1.2, 10: 0.8, 12: 0.4, 13: 0.4, 1000: 0.4},
    2.0: {0: 0.0, 2: 1.0, 4: 2.0, 8: 0.4 + 1.6 * 0.25, 10: 0.4 + 1.6 / 16, 12: 0.4, 1000: 0.4},
}


@pytest.mark.parametrize("power", sorted(HAND_VALUES))
def test_warmup_decay_values_at_key_steps(power):
    schedule = WarmupDecay(2.0, warmup_steps=4, decay_steps=8, end_learning_rate=0.4, power=power)
    for step, expected in HAND_VALUES[power].items():
        for step_tensor in (tf.constant(step, tf.int64), tf.constant(step, tf.float32), step):
            assert float(schedule(step_tensor)) == pytest.approx(expected, rel=1e-6, abs=1e-7), step


def test_warmup_decay_linear_is_piecewise_linear_interpolation():
    schedule = WarmupDecay(3e-4, warmup_steps=10, decay_steps=90, end_learning_rate=1e-6)
    steps = np.arange(0, 130)
    expected = np.interp(steps, [0, 10, 100], [0.0, 3e-4, 1e-6])
    np.testing.assert_allclose([float(schedule(s)) for s in steps], expected, rtol=1e-5, atol=1e-12)


def test_warmup_decay_without_warmup_or_decay():
    no_warmup = WarmupDecay(1.0, warmup_steps=0, decay_steps=4)
    assert [float(no_warmup(s)) for s in range(6)] == pytest.approx([1, 0.75, 0.5, 0.25, 0, 0])
    no_decay = WarmupDecay(1.0, warmup_steps=2, decay_steps=0, end_learning_rate=0.1)
    assert [float(no_decay(s)) for s in range(4)] == pytest.approx([0, 0.5, 0.1, 0.1])


def test_warmup_decay_in_tf_function_and_dataset_map_with_int64_steps():
    schedule = WarmupDecay(1.0, warmup_steps=4, decay_steps=4, power=2.0)
    expected = [0.0, 0.25, 0.5, 0.75, 1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0]
    graph = tf.function(schedule, input_signature=[tf.TensorSpec([], tf.int64)])
    assert [float(graph(tf.constant(s, tf.int64))) for s in range(10)] == pytest.approx(expected)
    mapped = tf.data.Dataset.range(10).map(schedule)  # Dataset.range yields int64
    assert [float(v) for v in mapped] == pytest.approx(expected)


def test_warmup_decay_config_round_trip():
    schedule = WarmupDecay(5e-4, warmup_steps=7, decay_steps=93, end_learning_rate=1e-6, power=0.5)
    config = schedule.get_config()
    assert config == {"peak_learning_rate": 5e-4, "warmup_steps": 7, "decay_steps": 93,
                      "end_learning_rate": 1e-6, "power": 0.5}
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert type(restored) is WarmupDecay and restored.get_config() == config


@pytest.mark.parametrize("argument, value", [
    ("peak_learning_rate", 0.0), ("warmup_steps", -1), ("warmup_steps", 2.5),
    ("decay_steps", -3), ("end_learning_rate", -1e-5), ("power", 0.0)])
def test_warmup_decay_rejects_bad_arguments(argument, value):
    arguments = {"peak_learning_rate": 1e-3, "warmup_steps": 1, "decay_steps": 10} | {argument: value}
    with pytest.raises(ValueError, match=argument):
        WarmupDecay(**arguments)


@pytest.mark.filterwarnings("ignore:Skipping variable loading for optimizer")
@pytest.mark.parametrize("name, cls", [("adamw", AdamW), ("lamb", Lamb)])
def test_schedule_and_exclusions_survive_a_keras_file(tmp_path, name, cls):
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(1, bias_initializer="ones")(inputs))
    model.compile(optimizer=create_optimizer(name, 0.1, num_train_steps=50, power=2.0,
                                             weight_decay=0.1),
                  loss="mse")
    model.save(tmp_path / "model.keras")  # unbuilt optimizer: no momentum to blur the check below
    restored = keras.models.load_model(tmp_path / "model.keras")
    optimizer = restored.optimizer
    assert type(optimizer) is cls and type(optimizer._learning_rate) is WarmupDecay
    assert optimizer._learning_rate.get_config() == model.optimizer._learning_rate.get_config()
    assert optimizer.no_decay_patterns == NO_DECAY_PATTERNS
    kernel, bias = (v.numpy() for v in restored.trainable_variables)
    optimizer.apply([np.zeros_like(kernel), np.zeros_like(bias)], restored.trainable_variables)
    np.testing.assert_array_equal(restored.trainable_variables[1].numpy(), bias)
    assert np.all(np.abs(restored.trainable_variables[0].numpy()) < np.abs(kernel))


# --- create_optimizer ----------------------------------------------------------------------

def test_create_optimizer_rejects_unknown_name_and_bad_steps():
    with pytest.raises(ValueError, match=r"'Adamw'.*'adamw', 'lamb', 'adam'"):
        create_optimizer("Adamw", num_train_steps=10)
    with pytest.raises(ValueError, match="num_train_steps"):
        create_optimizer(num_train_steps=0)
    with pytest.raises(ValueError, match="num_warmup_steps"):
        create_optimizer(num_train_steps=10, num_warmup_steps=11)


def test_create_optimizer_arguments_reach_the_keras_optimizer():
    optimizer = create_optimizer("lamb", 2e-3, num_train_steps=30, num_warmup_steps=10,
                                 weight_decay=0.02, beta_1=0.8, beta_2=0.95, epsilon=1e-7,
                                 global_clipnorm=0.5, gradient_accumulation_steps=3)
    assert isinstance(optimizer, keras.optimizers.Lamb)
    assert (optimizer.weight_decay, optimizer.beta_1, optimizer.beta_2, optimizer.epsilon,
            optimizer.global_clipnorm, optimizer.gradient_accumulation_steps) == (
        0.02, 0.8, 0.95, 1e-7, 0.5, 3)
    assert optimizer._learning_rate.get_config() == {
        "peak_learning_rate": 2e-3, "warmup_steps": 10, "decay_steps": 20,
        "end_learning_rate": 0.0, "power": 1.0}
    adam = create_optimizer("adam", num_train_steps=10)
    assert type(adam) is Adam and adam.weight_decay is None


def is_layer_norm_or_bias(path):
    """Written from the variable paths of a kerasbert encoder, independently of NO_DECAY_PATTERNS."""
    layer, variable = path.split("/")[-2:]
    return variable == "bias" or (layer.endswith("layer_norm") and variable in ("gamma", "beta"))


def zero_gradient_step(model, optimizer, inputs):
    with tf.GradientTape() as tape:
        outputs = model(inputs)
        loss = 0.0 * sum(tf.reduce_sum(output) for output in outputs.values())
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply(gradients, model.trainable_variables)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_weight_decay_skips_layer_norm_and_bias_of_a_real_encoder(name):
    learning_rate, weight_decay = 0.1, 0.05
    model = tiny_encoder()
    before = {v.path: v.numpy() for v in model.trainable_variables}
    assert sum(map(is_layer_norm_or_bias, before)) == 3 * 2 + 6 + 1  # 3 LayerNorms, 6 Dense biases, pooler
    optimizer = create_optimizer(name, learning_rate, num_train_steps=10, weight_decay=weight_decay)
    zero_gradient_step(model, optimizer, encoder_inputs(2, seed=0))
    for variable in model.trainable_variables:
        old = before[variable.path].astype("float64")
        expected = old if is_layer_norm_or_bias(variable.path) else old - learning_rate * weight_decay * old
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, atol=0, err_msg=variable.path)
    assert {"embeddings", "kernel"} <= {v.path.split("/")[-1] for v in model.trainable_variables
                                        if not is_layer_norm_or_bias(v.path)}


@pytest.mark.slow
def test_weight_decay_exclusions_hold_for_every_replica_of_a_mirrored_model():
    strategy = get_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
    learning_rate, weight_decay = 0.1, 0.05
    with strategy.scope():
        model = tiny_encoder()
        optimizer = create_optimizer("adamw", learning_rate, num_train_steps=10,
                                     weight_decay=weight_decay)
        optimizer.build(model.trainable_variables)  # as fit does: slots created in the scope
    before = {v.path: v.numpy() for v in model.trainable_variables}
    inputs = encoder_inputs(4, seed=1)
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(inputs))

    @tf.function
    def train_step(batch):
        strategy.run(zero_gradient_step, args=(model, optimizer, batch))

    train_step(next(iter(dataset)))
    for variable in model.trainable_variables:
        old = before[variable.path].astype("float64")
        expected = old if is_layer_norm_or_bias(variable.path) else old - learning_rate * weight_decay * old
        first_copy, second_copy = variable.value.values  # named ".../bias:0", ".../bias/replica_1:0"
        assert "replica_1" in second_copy.name
        for replica_copy in (first_copy, second_copy):
            np.testing.assert_allclose(replica_copy.numpy(), expected, rtol=1e-6, err_msg=replica_copy.name)


# --- the fused Adam step ------------------------------------------------------------------

def keras_adamw(**kwargs):
    """Stock `keras.optimizers.AdamW` with the same exclusions as kerasbert's."""
    optimizer = keras.optimizers.AdamW(**kwargs)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_PATTERNS))
    return optimizer


def real_gradients(steps=3):
    """Gradients of a real loss of a tiny encoder for `steps` different batches, at its
    initial weights; the token embedding's is an `IndexedSlices` with repeated token ids."""
    keras.utils.set_random_seed(7)
    model = tiny_encoder()
    steps_gradients = []
    for seed in range(steps):
        with tf.GradientTape() as tape:
            outputs = model(encoder_inputs(4, seed=10 + seed))
            loss = tf.reduce_mean(tf.square(outputs["sequence_output"] - 0.5)) + tf.reduce_mean(
                outputs["pooled_output"])
        steps_gradients.append(tape.gradient(loss, model.trainable_variables))
    return steps_gradients


def weights_after_steps(make_optimizer, strategy, jit_compile, steps_gradients, densify=False):
    """A tiny encoder's weights after one update per gradient set, every replica applying the
    same gradients (summed over replicas by the optimizer); `densify` turns `IndexedSlices`
    into dense tensors first."""
    keras.utils.set_random_seed(7)
    with strategy.scope():
        model = tiny_encoder()
        optimizer = make_optimizer()
        optimizer.build(model.trainable_variables)

    def step(parts):
        # A loss linear in the weights whose gradient is exactly the given one: sum(w * g), or
        # sum(gather(w, indices) * values) for an `IndexedSlices`, which the tape returns as such.
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.add_n([
                tf.reduce_sum(tf.gather(variable.value, part[1]) * part[0]) if len(part) == 3
                else tf.reduce_sum(variable.value * part[0])
                for variable, part in zip(variables, parts)])
        gradients = tape.gradient(loss, variables)
        if densify:
            gradients = [tf.convert_to_tensor(gradient) for gradient in gradients]
        optimizer.apply(gradients, variables)

    train_step = tf.function(lambda parts: strategy.run(step, args=(parts,)),
                             jit_compile=jit_compile)
    for gradients in steps_gradients:
        train_step([(g.values, g.indices, g.dense_shape) if isinstance(g, tf.IndexedSlices)
                    else (g,) for g in gradients])
    return {v.path: v.numpy() for v in model.trainable_variables}, int(optimizer.iterations.numpy())


@pytest.mark.parametrize("strategy_name, jit_compile", [
    ("default", False), ("default", True), ("mirrored", False)])
@pytest.mark.parametrize("ours, theirs", [
    (lambda: AdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6),
     lambda: keras_adamw(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6)),
    (lambda: Adam(learning_rate=0.01, beta_1=0.8, beta_2=0.99),
     lambda: keras.optimizers.Adam(learning_rate=0.01, beta_1=0.8, beta_2=0.99)),
], ids=["adamw", "adam"])
@pytest.mark.slow
def test_fused_adam_step_equals_keras_adam(ours, theirs, strategy_name, jit_compile):
    """Equal to Keras' step on the summed (dense) gradient. Keras' own step on an
    `IndexedSlices` with repeated indices differs: it squares each slice for the second
    moment instead of the summed gradient (see the next test)."""
    # get_strategy: plain MirroredStrategy objects made one after another in a process reuse
    # collective instance keys (see kerasbert.training.distribute).
    strategy = (get_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
                if strategy_name == "mirrored" else tf.distribute.get_strategy())
    steps_gradients = real_gradients()
    assert isinstance(steps_gradients[0][0], tf.IndexedSlices)
    fused, fused_steps = weights_after_steps(ours, strategy, jit_compile, steps_gradients)
    reference, reference_steps = weights_after_steps(theirs, strategy, jit_compile,
                                                     steps_gradients, densify=True)
    keras.utils.set_random_seed(7)
    initial = {v.path: v.numpy() for v in tiny_encoder().trainable_variables}
    assert fused_steps == reference_steps == 3
    for path, want in reference.items():
        if not path.endswith("key/bias"):  # its gradient is 0: softmax ignores a shift
            assert np.max(np.abs(want - initial[path])) > 1e-3, path
        # Float32 rounding only: a step of ~lr = 0.01 agrees to 1e-4 of itself.
        np.testing.assert_allclose(fused[path], want, rtol=0, atol=1e-6, err_msg=path)


def test_fused_adam_sums_repeated_rows_of_a_sparse_gradient():
    """Row 0 appears twice in the first `IndexedSlices`: Adam must see its summed gradient 2
    (first step -lr, as for any gradient), not two gradients of 1."""
    def train(optimizer, densify):
        weight = keras.Variable(np.ones((4, 2), "float32"))
        for indices in ([0, 0, 1], [2]):
            gradient = tf.IndexedSlices(tf.ones([len(indices), 2]), tf.constant(indices),
                                        tf.constant([4, 2]))
            optimizer.apply([tf.convert_to_tensor(gradient) if densify else gradient], [weight])
        return weight.numpy()

    fused = train(Adam(learning_rate=0.1), densify=False)
    np.testing.assert_allclose(fused, train(keras.optimizers.Adam(learning_rate=0.1), True),
                               rtol=1e-5)
    # Rows 0 and 1 had gradients 2 then 0 and 1 then 0: Adam's steps do not depend on the
    # gradient's scale, so they end up equal.
    np.testing.assert_allclose(fused[0], fused[1], rtol=1e-5)


def test_amsgrad_keeps_keras_step():
    weight = keras.Variable(np.ones(2, "float32"))
    optimizer = Adam(learning_rate=0.1, amsgrad=True)
    for gradient in ([1.0, -2.0], [0.1, 0.1]):
        optimizer.apply([np.array(gradient, "float32")], [weight])
    reference_weight = keras.Variable(np.ones(2, "float32"))
    reference = keras.optimizers.Adam(learning_rate=0.1, amsgrad=True)
    for gradient in ([1.0, -2.0], [0.1, 0.1]):
        reference.apply([np.array(gradient, "float32")], [reference_weight])
    np.testing.assert_array_equal(weight.numpy(), reference_weight.numpy())


# --- clipping and accumulation -------------------------------------------------------------

def first_adam_step(weights, gradients, learning_rate, beta_2, epsilon):
    """Keras Adam's first update, written out: m = (1-b1) g, v = (1-b2) g^2,
    w -= lr sqrt(1-b2)/(1-b1) * m / (sqrt(v) + eps)."""
    return [w - learning_rate * np.sqrt(1 - beta_2) * g / (np.sqrt(1 - beta_2) * np.abs(g) + epsilon)
            for w, g in zip(weights, gradients)]


@pytest.mark.parametrize("global_clipnorm", [None, 1.0, 30.0])
def test_global_clipnorm_scales_all_gradients_by_one_factor(global_clipnorm):
    rng = np.random.default_rng(2)
    weights = [rng.normal(size=(3, 4)), rng.normal(size=(5,))]
    gradients = [rng.normal(size=(3, 4)) * 2, rng.normal(size=(5,)) * 3]
    global_norm = np.sqrt(sum(np.sum(g ** 2) for g in gradients))
    assert 1.0 < global_norm < 30.0
    scale = 1.0 if global_clipnorm is None else min(1.0, global_clipnorm / global_norm)
    # A large epsilon makes Adam's step depend on the gradient's size, so clipping shows.
    learning_rate, beta_2, epsilon = 0.1, 0.999, 1.0
    expected = first_adam_step(weights, [g * scale for g in gradients], learning_rate, beta_2, epsilon)
    unclipped = first_adam_step(weights, gradients, learning_rate, beta_2, epsilon)
    variables = [keras.Variable(w.astype("float32")) for w in weights]
    optimizer = create_optimizer("adam", learning_rate, num_train_steps=10, beta_2=beta_2,
                                 epsilon=epsilon, global_clipnorm=global_clipnorm)
    optimizer.apply([g.astype("float32") for g in gradients], variables)
    for variable, want, not_wanted in zip(variables, expected, unclipped):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-6)
        if global_clipnorm == 1.0:
            assert np.max(np.abs(variable.numpy() - not_wanted)) > 1e-3


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_two_accumulated_micro_batches_equal_one_step_on_the_whole_batch(name):
    inputs = np.random.default_rng(3).normal(size=(8, 5)).astype("float32")
    targets = (inputs @ np.arange(1.0, 6.0, dtype="float32"))[:, None]

    def train(batches, gradient_accumulation_steps):
        """The weights before training and after each batch."""
        keras.utils.set_random_seed(4)
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3, activation="tanh"),
                                  keras.layers.LayerNormalization(), keras.layers.Dense(1)])
        # Constant rate (end = peak): the schedule sees micro-steps, the reference sees one step.
        optimizer = create_optimizer(name, 0.05, num_train_steps=10, end_learning_rate=0.05,
                                     global_clipnorm=0.5,
                                     gradient_accumulation_steps=gradient_accumulation_steps)
        history = [[v.numpy() for v in model.trainable_variables]]
        for x, y in batches:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(keras.losses.mean_squared_error(y, model(x)))
            optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
            history.append([v.numpy() for v in model.trainable_variables])
        return history

    initial, after_first, accumulated = train(
        [(inputs[:4], targets[:4]), (inputs[4:], targets[4:])], gradient_accumulation_steps=2)
    reference = train([(inputs, targets)], gradient_accumulation_steps=None)[-1]
    for got, want in zip(after_first, initial):
        np.testing.assert_array_equal(got, want)  # first micro-batch: no update yet
    for got, want, start in zip(accumulated, reference, initial):
        assert np.max(np.abs(want - start)) > 1e-3
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- compile and fit -----------------------------------------------------------------------

def toy_dataset():
    """Label: is the first token id even. Learnable from the embeddings; a fixed 16-example set."""
    inputs = encoder_inputs(16, seed=5)
    labels = (inputs["token_ids"][:, 0] % 2 == 0).astype("float32")[:, None]
    return tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(8)


@pytest.mark.parametrize("policy, name, jit_compile, gradient_accumulation_steps", [
    ("float32", "adamw", False, None),
    ("mixed_float16", "adamw", False, None),
    ("mixed_bfloat16", "lamb", False, None),
    ("mixed_bfloat16", "adamw", False, None),
    ("mixed_bfloat16", "adam", False, None),
    ("float32", "adamw", True, 2),
])
@pytest.mark.slow
def test_compile_and_fit(policy, name, jit_compile, gradient_accumulation_steps):
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(6)
    encoder = tiny_encoder()
    inputs = {name_: keras.Input((SEQ_LENGTH,), dtype="int32", name=name_) for name_ in INPUT_NAMES}
    logits = keras.layers.Dense(1, dtype="float32")(encoder(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    epochs, steps_per_epoch = 8, 2
    # LAMB's steps are relative to each weight's norm: it takes a larger rate.
    optimizer = create_optimizer(name, {"adamw": 5e-3, "adam": 5e-3, "lamb": 3e-2}[name], num_train_steps=epochs * steps_per_epoch,
                                 num_warmup_steps=2,
                                 gradient_accumulation_steps=gradient_accumulation_steps)
    model.compile(optimizer=optimizer, loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  jit_compile=jit_compile)
    if policy == "mixed_float16":
        # compile wraps the optimizer itself (auto_scale_loss): loss scaling is active.
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        assert model.optimizer.inner_optimizer is optimizer
    else:
        assert model.optimizer is optimizer
    compute_dtype = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
    sample = next(iter(toy_dataset()))[0]
    assert encoder(sample)["sequence_output"].dtype == compute_dtype[policy]
    assert {variable.dtype for variable in model.trainable_variables} == {"float32"}
    losses = model.fit(toy_dataset(), epochs=epochs, shuffle=False, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)), losses
    assert losses[-1] < 0.5 * losses[0], losses
    updates = epochs * steps_per_epoch // (gradient_accumulation_steps or 1)
    if policy == "mixed_float16":  # a step whose scaled gradients overflow is skipped
        assert updates - 4 <= int(optimizer.iterations) <= updates
    else:
        assert int(optimizer.iterations) == updates
