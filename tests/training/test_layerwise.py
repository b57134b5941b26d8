"""Layer-wise learning-rate decay: ELECTRA's factors for real kerasbert models, written out by hand
from its rule; per-variable rates in AdamW / Adam / LAMB against Keras' own optimizers run on each
group of variables at learning_rate x factor, eagerly, under XLA and under a MirroredStrategy."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import models, zoo
from kerasbert.training import NO_DECAY_PATTERNS, Adam, AdamW, Lamb, create_optimizer
from kerasbert.training.distribute import get_strategy
from kerasbert.training.layerwise import layerwise_lr_multipliers

VOCAB_SIZE, SEQ_LENGTH = 64, 8


def tiny(preset, **overrides):
    return zoo.get_config(preset).replace(num_layers=2, vocab_size=VOCAB_SIZE, dropout=0.0,
                                          attention_dropout=0.0, **overrides)


def tiny_electra_classifier():
    """ELECTRA with an embedding projection (16 -> 32) and its dense -> GELU -> dense head."""
    config = tiny("electra_small_discriminator", hidden_size=32, embedding_size=16, num_heads=2,
                  intermediate_size=64)
    return models.build_task_model(config, "sequence_classification", num_labels=3)


def first_path_parts(factors):
    return {path.split("/")[0] for path in factors}


def assert_factors(model, factors, by_first_path_part):
    assert set(factors) == {variable.path for variable in model.trainable_variables}
    assert first_path_parts(factors) == set(by_first_path_part)
    for path, factor in factors.items():
        assert factor == pytest.approx(by_first_path_part[path.split("/")[0]], rel=1e-12), path


# --- the factors -----------------------------------------------------------------------------

# ELECTRA's rule with decay 0.8 and L = 2 layers: factor = 0.8 ** (L + 2 - depth), depth 0 for the
# embeddings, i + 1 for layer i, L + 2 for the head (and here the pooler).
TWO_LAYER_FACTORS = {"embeddings": 0.4096, "transformer_layer_0": 0.512,
                     "transformer_layer_1": 0.64, "pooler": 1.0, "classifier": 1.0,
                     "classifier_dense": 1.0, "qa_outputs": 1.0}


def test_bert_two_layers_by_hand():
    model = models.build_task_model(tiny("bert_tiny_uncased"), "sequence_classification",
                                    num_labels=2)
    factors = layerwise_lr_multipliers(model, 0.8)
    assert_factors(model, factors, {part: TWO_LAYER_FACTORS[part] for part in (
        "embeddings", "transformer_layer_0", "transformer_layer_1", "pooler", "classifier")})
    assert len(factors) == 5 + 2 * 16 + 2 + 2


def test_electra_with_embedding_projection_by_hand():
    model = tiny_electra_classifier()
    factors = layerwise_lr_multipliers(model, 0.8)
    assert_factors(model, factors, {part: TWO_LAYER_FACTORS[part] for part in (
        "embeddings", "transformer_layer_0", "transformer_layer_1", "classifier_dense",
        "classifier")})
    assert factors["embeddings/projection/kernel"] == factors["embeddings/projection/bias"] \
        == pytest.approx(0.4096)


def test_encoder_alone_and_question_answering_head():
    encoder = models.build_encoder(tiny("bert_tiny_uncased"))
    assert_factors(encoder, layerwise_lr_multipliers(encoder, 0.8), {
        part: TWO_LAYER_FACTORS[part] for part in (
            "embeddings", "transformer_layer_0", "transformer_layer_1", "pooler")})
    model = models.build_task_model(encoder, "question_answering")  # copies it without pooler
    assert_factors(model, layerwise_lr_multipliers(model, 0.8), {
        part: TWO_LAYER_FACTORS[part] for part in (
            "embeddings", "transformer_layer_0", "transformer_layer_1", "qa_outputs")})


# ALBERT: a shared layer takes the depth of its last application (module docstring). Decay 0.8,
# L = number of applications; embeddings 0.8 ** (L + 2), layer n 0.8 ** (L + 1 - last use of n).
ALBERT_CASES = {
    # one group of one layer, applied 3 times (0, 0, 0): last use 2 -> 0.8 ** 2
    "one_shared_layer": ({"num_layers": 3, "num_hidden_groups": 1, "inner_group_num": 1},
                         (0, 0, 0), {"embeddings": 0.8 ** 5, "transformer_layer_0": 0.64}),
    # two groups over 4 applications (0, 0, 1, 1): layer 0 last used at 1, layer 1 at 3
    "two_groups": ({"num_layers": 4, "num_hidden_groups": 2, "inner_group_num": 1},
                   (0, 0, 1, 1), {"embeddings": 0.8 ** 6, "transformer_layer_0": 0.8 ** 4,
                                  "transformer_layer_1": 0.64}),
    # one group of two layers run twice (0, 1, 0, 1): 4 applications, last uses 2 and 3
    "group_of_two_layers": ({"num_layers": 2, "num_hidden_groups": 1, "inner_group_num": 2},
                            (0, 1, 0, 1), {"embeddings": 0.8 ** 6, "transformer_layer_0": 0.512,
                                           "transformer_layer_1": 0.64}),
}


@pytest.mark.parametrize("case", sorted(ALBERT_CASES))
def test_albert_shared_layer_takes_the_depth_of_its_last_application(case):
    sizes, schedule, expected = ALBERT_CASES[case]
    config = tiny("albert_base_v2", hidden_size=32, embedding_size=16, num_heads=2,
                  intermediate_size=64).replace(**sizes)
    assert config.layer_schedule == schedule
    model = models.build_task_model(config, "sequence_classification", num_labels=2)
    factors = layerwise_lr_multipliers(model, 0.8)
    assert_factors(model, factors, {**expected, "pooler": 1.0, "classifier": 1.0})
    assert "embeddings/projection/kernel" in factors


def test_decay_one_gives_factor_one_everywhere_and_frozen_variables_are_left_out():
    model = tiny_electra_classifier()
    assert set(layerwise_lr_multipliers(model, 1).values()) == {1.0}
    model.encoder.embeddings.trainable = False
    factors = layerwise_lr_multipliers(model, 0.8)
    assert "embeddings" not in first_path_parts(factors)
    assert factors["transformer_layer_0/attention/query/kernel"] == pytest.approx(0.512)


@pytest.fixture(scope="module")
def bert_encoder():
    return models.build_encoder(tiny("bert_tiny_uncased"))


@pytest.mark.parametrize("decay", [0, -0.5, 1.0001, float("nan"), True, "0.8", None])
def test_decay_outside_zero_one_is_an_error(decay, bert_encoder):
    with pytest.raises(ValueError, match=r"decay must be a number in \(0, 1\]"):
        layerwise_lr_multipliers(bert_encoder, decay)


def test_models_without_exactly_one_encoder_are_errors():
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)], name="plain")
    with pytest.raises(TypeError, match="'plain' holds none"):
        layerwise_lr_multipliers(plain, 0.8)
    config = zoo.get_config("electra_small_discriminator").replace(num_layers=1, vocab_size=50)
    pretrainer = models.ElectraPretrainer(config, models.generator_config(config))
    with pytest.raises(ValueError, match=r"holds 2 \('discriminator', 'generator'\)"):
        layerwise_lr_multipliers(pretrainer, 0.8)


# --- optimizers with per-variable rates ------------------------------------------------------

PEAK, NUM_STEPS, WEIGHT_DECAY, DECAY = 0.05, 4, 0.5, 0.5  # factors 1/16, 1/8, 1/4 and 1


def classifier_batch(seed):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, VOCAB_SIZE, (4, SEQ_LENGTH)).astype("int32")
    inputs = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
              "padding_mask": np.ones_like(token_ids)}
    return inputs, rng.integers(0, 3, 4).astype("int32")


@pytest.fixture(scope="module")
def gradient_steps():
    """Dense gradients of a real loss of the tiny ELECTRA classifier for two batches at its
    initial weights, `{path: array}` per step."""
    keras.utils.set_random_seed(7)
    model = tiny_electra_classifier()
    steps = []
    for seed in range(2):
        inputs, labels = classifier_batch(seed)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                labels, model(inputs)["logits"], from_logits=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        steps.append({variable.path: tf.convert_to_tensor(gradient).numpy()
                      for variable, gradient in zip(model.trainable_variables, gradients)})
    return steps


@pytest.fixture(scope="module")
def factors():
    return layerwise_lr_multipliers(tiny_electra_classifier(), DECAY)


def initial_weights():
    keras.utils.set_random_seed(7)
    return {v.path: v.numpy() for v in tiny_electra_classifier().trainable_variables}


def train(make_optimizer, gradient_steps, setup):
    """The tiny classifier's weights after one `optimizer.apply` per gradient set, as
    `{path: [one array per replica copy]}`. `setup`: "eager", "jit" (a `tf.function` with
    `jit_compile=True`) or "mirrored" (two replicas over the two logical CPUs, each applying
    half of the gradients, which the optimizer sums)."""
    strategy = (get_strategy("mirrored", devices=["/cpu:0", "/cpu:1"]) if setup == "mirrored"
                else tf.distribute.get_strategy())
    keras.utils.set_random_seed(7)
    with strategy.scope():
        model = tiny_electra_classifier()
        optimizer = make_optimizer()
        optimizer.build(model.trainable_variables)
    variables = model.trainable_variables

    def apply(gradients):
        optimizer.apply(gradients, variables)

    def apply_on_replica(gradients):
        # Copies made on the replica's device, as its own backward pass would leave them: the
        # all-reduce needs to know where each replica's gradients are.
        apply([tf.identity(gradient) for gradient in gradients])

    step = {"eager": apply, "jit": tf.function(apply, jit_compile=True),
            "mirrored": tf.function(lambda gradients: strategy.run(apply_on_replica,
                                                                   args=(gradients,)))}
    share = 1 / strategy.num_replicas_in_sync  # a power of two: the sum is exact
    for gradients in gradient_steps:
        step[setup]([tf.constant(share * gradients[variable.path]) for variable in variables])
    assert int(optimizer.iterations.numpy()) == len(gradient_steps)
    if setup == "mirrored":
        return {v.path: [copy.numpy() for copy in v.value.values] for v in variables}
    return {v.path: [v.numpy()] for v in variables}


def keras_optimizer(name, learning_rate):
    """Keras' own optimizer `name` with kerasbert's settings and weight-decay exclusions."""
    if name == "adam":
        return keras.optimizers.Adam(learning_rate, epsilon=1e-6)
    optimizer = {"adamw": keras.optimizers.AdamW, "lamb": keras.optimizers.Lamb}[name](
        learning_rate, weight_decay=WEIGHT_DECAY, epsilon=1e-6)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_PATTERNS))
    return optimizer


def keras_per_group(name, factors, gradient_steps):
    """The reference: one Keras optimizer per group of variables with equal factor, on
    Keras' own linear decay from `PEAK * factor` (what `create_optimizer` schedules, scaled)."""
    keras.utils.set_random_seed(7)
    variables = tiny_electra_classifier().trainable_variables
    for factor in sorted(set(factors.values())):
        group = [variable for variable in variables if factors[variable.path] == factor]
        optimizer = keras_optimizer(name, keras.optimizers.schedules.PolynomialDecay(
            PEAK * factor, decay_steps=NUM_STEPS, end_learning_rate=0.0))
        for gradients in gradient_steps:
            optimizer.apply([gradients[variable.path] for variable in group], group)
    return {variable.path: variable.numpy() for variable in variables}


class Memo(dict):
    """Results computed once per module, on first use."""

    def get_or_compute(self, key, compute):
        if key not in self:
            self[key] = compute()
        return self[key]


@pytest.fixture(scope="module")
def memo():
    return Memo()


def ours(name, factors):
    return lambda: create_optimizer(name, PEAK, num_train_steps=NUM_STEPS,
                                    weight_decay=WEIGHT_DECAY, epsilon=1e-6,
                                    global_clipnorm=None, lr_multipliers=factors)


# Adam's step is AdamW's without the decay: eagerly is enough for it. LAMB's many small
# operations make its XLA compilation and mirrored tracing slow.
@pytest.mark.slow
@pytest.mark.parametrize("name, setup", [
    ("adamw", "eager"), ("adamw", "jit"), ("adamw", "mirrored"), ("adam", "eager"),
    ("lamb", "eager"), pytest.param("lamb", "jit", marks=pytest.mark.slow),
    pytest.param("lamb", "mirrored", marks=pytest.mark.slow)])
def test_steps_equal_keras_run_per_group_at_learning_rate_times_factor(
        name, setup, factors, gradient_steps, memo):
    got = train(ours(name, factors), gradient_steps, setup)
    want = memo.get_or_compute(("keras", name),
                               lambda: keras_per_group(name, factors, gradient_steps))
    full_rate = memo.get_or_compute(("full rate", name),
                                    lambda: train(ours(name, None), gradient_steps, "eager"))
    initial = initial_weights()
    for path, copies in got.items():
        for copy in copies:
            np.testing.assert_allclose(copy, want[path], rtol=0, atol=1e-6, err_msg=path)
        # At initialisation attention is near uniform: the query and key weights get gradients
        # near Adam's epsilon (their biases none at all), so without decay they barely move.
        if not ("/query/" in path or "/key/" in path):
            assert np.max(np.abs(want[path] - initial[path])) > 1e-5, path
    for factor in set(factors.values()) - {1.0}:  # without the factors, each group is far off
        assert max(np.max(np.abs(full_rate[path][0] - want[path]))
                   for path in factors if factors[path] == factor) > 1e-3, factor


@pytest.mark.slow
@pytest.mark.parametrize("name, setup", [("adamw", "eager"), ("adamw", "mirrored"),
                                         ("lamb", "eager")])
def test_weight_decay_runs_at_each_variables_rate(name, setup, factors, gradient_steps):
    """With zero gradients Adam and LAMB do not move a weight; only the decay does, by
    lr x factor x weight_decay x w per step, as in ELECTRA's AdamW, and never LayerNorm or bias."""
    zero_steps = [{path: np.zeros_like(g) for path, g in gradient_steps[0].items()}] * 2
    got = train(ours(name, factors), zero_steps, setup)
    learning_rates = [PEAK, PEAK * (1 - 1 / NUM_STEPS)]
    for path, initial in initial_weights().items():
        layer, variable = path.split("/")[-2:]
        expected = initial.astype("float64")
        if not (variable == "bias" or layer.endswith("layer_norm")):
            for learning_rate in learning_rates:
                expected = expected - learning_rate * factors[path] * WEIGHT_DECAY * expected
            assert np.max(np.abs(expected - initial)) > 1e-5, path
        for copy in got[path]:
            np.testing.assert_allclose(copy, expected, rtol=1e-6, atol=1e-9, err_msg=path)


@pytest.mark.parametrize("name", ["adamw", "adam", "lamb"])
def test_factor_one_everywhere_equals_no_factors_exactly(name, factors, gradient_steps, memo):
    ones = train(ours(name, dict.fromkeys(factors, 1.0)), gradient_steps, "eager")
    none = memo.get_or_compute(("full rate", name),
                               lambda: train(ours(name, None), gradient_steps, "eager"))
    for path, copies in none.items():
        np.testing.assert_array_equal(ones[path][0], copies[0], err_msg=path)


# --- configuration and saving ----------------------------------------------------------------

@pytest.mark.parametrize("factor", [0, -1.0, float("inf"), float("nan"), True, "0.5"])
def test_bad_factors_are_errors(factor):
    with pytest.raises(ValueError, match=r"lr_multipliers\['a/kernel'\] must be a finite number"):
        AdamW(learning_rate=0.1, lr_multipliers={"a/kernel": factor})


def test_lr_multipliers_must_be_a_mapping_of_paths():
    with pytest.raises(ValueError, match="must map variable paths"):
        Adam(lr_multipliers=[("a/kernel", 0.5)])
    with pytest.raises(ValueError, match="keys must be variable paths"):
        Lamb(lr_multipliers={3: 0.5})


def test_a_path_that_names_no_trained_variable_is_an_error_at_build():
    weight = keras.Variable(np.ones(2, "float32"), name="weight")
    optimizer = create_optimizer("adamw", num_train_steps=10,
                                 lr_multipliers={weight.path: 0.5, "renamed/kernel": 0.5})
    with pytest.raises(ValueError, match=r"1 path\(s\) .* 1 variables .* 'renamed/kernel'"):
        optimizer.apply([np.ones(2, "float32")], [weight])


@pytest.mark.parametrize("cls", [AdamW, Adam, Lamb])
def test_factors_are_part_of_the_config(cls):
    optimizer = cls(learning_rate=0.1, lr_multipliers={"a/kernel": 0.25, "b/bias": 1})
    config = optimizer.get_config()
    assert config["lr_multipliers"] == {"a/kernel": 0.25, "b/bias": 1.0}
    assert cls.from_config(config).lr_multipliers == {"a/kernel": 0.25, "b/bias": 1.0}
    assert cls(learning_rate=0.1).get_config()["lr_multipliers"] is None


@pytest.mark.slow
def test_compiled_task_model_keeps_its_factors_through_a_keras_file(tmp_path):
    keras.utils.set_random_seed(3)
    model = tiny_electra_classifier()
    factors = layerwise_lr_multipliers(model, 0.8)
    model.compile(optimizer=create_optimizer("adamw", 1e-2, num_train_steps=10,
                                             lr_multipliers=factors), jit_compile=False)
    inputs, labels = classifier_batch(seed=4)
    batches = tf.data.Dataset.from_tensors({**inputs, "labels": labels})
    model.fit(batches, epochs=1, shuffle=False, verbose=0)
    model.save(tmp_path / "model.keras")
    restored = keras.models.load_model(tmp_path / "model.keras")
    assert type(restored.optimizer) is AdamW and restored.optimizer.lr_multipliers == factors
    assert int(restored.optimizer.iterations) == 1
    model.fit(batches, epochs=1, shuffle=False, verbose=0)
    restored.fit(batches, epochs=1, shuffle=False, verbose=0)
    for original, loaded in zip(model.trainable_variables, restored.trainable_variables):
        assert original.path == loaded.path
        np.testing.assert_allclose(loaded.numpy(), original.numpy(), rtol=0, atol=1e-6,
                                   err_msg=original.path)
