"""One battery of model checks run over every family's encoder (tiny configs)."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert.models import Encoder, InputDtypeError, build_encoder, inference_function
from kerasbert.training.distribute import get_strategy
from tests.helpers import TINY_CONFIGS, random_inputs

FAMILIES = sorted(TINY_CONFIGS)


@pytest.fixture(params=FAMILIES)
def config(request):
    return TINY_CONFIGS[request.param]


def _outputs_close(a, b, atol=1e-5):
    assert sorted(a) == sorted(b)
    for key in a:
        if key == "hidden_states":
            for x, y in zip(a[key], b[key]):
                np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=atol)
        else:
            np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), rtol=0, atol=atol)


def test_output_shapes_and_dtypes(config):
    encoder = build_encoder(config)
    inputs = random_inputs(config, batch=3, seq=10)
    outputs = encoder(inputs)
    assert outputs["sequence_output"].shape == (3, 10, config.hidden_size)
    assert outputs["sequence_output"].dtype == tf.float32
    if not config.use_pooler:  # ELECTRA and DistilBERT
        assert "pooled_output" not in outputs
    else:
        assert outputs["pooled_output"].shape == (3, config.hidden_size)
    assert isinstance(encoder, keras.Model)
    assert sorted(i.name for i in encoder.inputs) == ["padding_mask", "segment_ids", "token_ids"]


def test_hidden_states_option(config):
    encoder = build_encoder(config, output_hidden_states=True)
    outputs = encoder(random_inputs(config))
    assert len(outputs["hidden_states"]) == len(config.layer_schedule) + 1
    np.testing.assert_array_equal(outputs["hidden_states"][-1], outputs["sequence_output"])


def test_get_config_round_trip(config):
    encoder = build_encoder(config, output_hidden_states=True)
    clone = Encoder.from_config(encoder.get_config())
    assert clone.config == config and clone.output_hidden_states
    clone.set_weights(encoder.get_weights())
    inputs = random_inputs(config)
    _outputs_close(encoder(inputs), clone(inputs), atol=0)


def test_keras_file_round_trip(config, tmp_path):
    encoder = build_encoder(config)
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    reloaded = keras.models.load_model(path)  # no custom_objects needed
    assert isinstance(reloaded, Encoder) and reloaded.config == config
    inputs = random_inputs(config)
    _outputs_close(encoder(inputs), reloaded(inputs), atol=0)


def test_variable_batch_and_sequence_length(config):
    encoder = build_encoder(config)
    infer = inference_function(encoder, jit_compile=False)
    for batch, seq in [(1, 1), (2, 5), (4, 17), (3, config.max_sequence_length)]:
        inputs = random_inputs(config, batch=batch, seq=seq, seed=seq)
        eager = encoder(inputs)
        assert eager["sequence_output"].shape == (batch, seq, config.hidden_size)
        _outputs_close(eager, infer(inputs))


@pytest.mark.slow
def test_jit_compile_matches_eager(config):
    encoder = build_encoder(config)
    compiled = tf.function(lambda x: encoder(x, training=False), jit_compile=True)
    for seq in (6, 11):
        inputs = random_inputs(config, seq=seq)
        _outputs_close(encoder(inputs), compiled(inputs))
    _outputs_close(encoder(inputs), inference_function(encoder)(inputs))


@pytest.mark.slow
def test_predict_on_tf_data(config):
    encoder = build_encoder(config)
    inputs = random_inputs(config, batch=6, seq=9)
    dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(4)
    predicted = encoder.predict(dataset, verbose=0)
    _outputs_close(predicted, encoder(inputs))


def test_padding_does_not_change_token_outputs(config):
    encoder = build_encoder(config)
    inputs = random_inputs(config, batch=2, seq=8)
    extra = 5
    padded = {
        "token_ids": np.pad(inputs["token_ids"], ((0, 0), (0, extra)), constant_values=config.pad_token_id),
        "segment_ids": np.pad(inputs["segment_ids"], ((0, 0), (0, extra))),
        "padding_mask": np.pad(inputs["padding_mask"], ((0, 0), (0, extra))),
    }
    short, long = encoder(inputs), encoder(padded)
    keep = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(short["sequence_output"])[keep],
                               np.asarray(long["sequence_output"])[:, :8][keep], rtol=0, atol=1e-5)


def test_dropout_only_in_training(config):
    config = config.replace(dropout=0.3, attention_dropout=0.3)
    encoder = build_encoder(config)
    inputs = random_inputs(config)
    _outputs_close(encoder(inputs, training=False), encoder(inputs, training=False), atol=0)
    trained = encoder(inputs, training=True)["sequence_output"]
    assert not np.allclose(trained, encoder(inputs, training=False)["sequence_output"])


@pytest.mark.parametrize("policy,atol", [("mixed_float16", 0.05), ("mixed_bfloat16", 0.25)])
def test_mixed_precision(config, policy, atol, tmp_path):
    reference = build_encoder(config)
    mixed = build_encoder(config, dtype=policy)
    mixed.set_weights(reference.get_weights())
    assert all(w.dtype == "float32" for w in mixed.weights)
    inputs = random_inputs(config)
    outputs = mixed(inputs)
    assert outputs["sequence_output"].dtype == keras.DTypePolicy(policy).compute_dtype
    expected = reference(inputs)
    for key in expected:
        values = np.asarray(tf.cast(outputs[key], tf.float32))
        assert np.isfinite(values).all()
        np.testing.assert_allclose(values, expected[key], rtol=0, atol=atol)
    mixed.save(tmp_path / "mixed.keras")
    reloaded = keras.models.load_model(tmp_path / "mixed.keras")
    assert reloaded.dtype_policy.name == policy


def test_global_mixed_precision_policy(config):
    keras.config.set_dtype_policy("mixed_float16")
    try:
        encoder = build_encoder(config)
        assert encoder(random_inputs(config))["sequence_output"].dtype == tf.float16
    finally:
        keras.config.set_dtype_policy("float32")


@pytest.mark.slow
def test_fit_runs_and_learns(config):
    encoder = build_encoder(config.replace(dropout=0.0, attention_dropout=0.0))
    inputs = random_inputs(config, batch=8, seq=6)
    targets = {"sequence_output": np.full((8, 6, config.hidden_size), 0.5, "float32")}
    if config.use_pooler:
        targets["pooled_output"] = np.full((8, config.hidden_size), 0.5, "float32")
    encoder.compile(optimizer=keras.optimizers.Adam(1e-2), loss={key: "mse" for key in targets})
    history = encoder.fit(inputs, targets, epochs=5, batch_size=4, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


@pytest.mark.slow
def test_mirrored_strategy_matches_one_device(config):
    devices = tf.config.list_logical_devices("CPU")
    assert len(devices) >= 2, "conftest.py sets up two logical CPU devices"
    strategy = get_strategy("mirrored", devices=[d.name for d in devices[:2]])
    reference = build_encoder(config)
    with strategy.scope():
        encoder = build_encoder(config)
    encoder.set_weights(reference.get_weights())
    assert strategy.num_replicas_in_sync == 2
    inputs = random_inputs(config, batch=6, seq=7)
    dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(6)
    predicted = encoder.predict(dataset, verbose=0)
    _outputs_close(predicted, reference(inputs))

    @tf.function
    def replica_sum_of_squares(batch):
        sums = strategy.run(
            lambda x: tf.reduce_sum(tf.square(encoder(x, training=False)["sequence_output"])),
            args=(batch,))
        return strategy.reduce("SUM", sums, axis=None)

    batch = next(iter(strategy.experimental_distribute_dataset(dataset)))
    expected = tf.reduce_sum(tf.square(reference(inputs)["sequence_output"]))
    np.testing.assert_allclose(replica_sum_of_squares(batch), expected, rtol=1e-5)


class TestBadInput:
    def _inputs(self, config):
        return random_inputs(config, batch=2, seq=6)

    def test_wrong_names(self, config):
        encoder = build_encoder(config)
        inputs = self._inputs(config)
        inputs["input_ids"] = inputs.pop("token_ids")
        with pytest.raises(ValueError, match=r"missing \['token_ids'\], unexpected \['input_ids'\]"):
            encoder(inputs)

    def test_not_a_dict(self, config):
        with pytest.raises(ValueError, match="must be a dict"):
            build_encoder(config)(self._inputs(config)["token_ids"])

    def test_float_dtype(self, config):
        inputs = self._inputs(config)
        inputs["padding_mask"] = inputs["padding_mask"].astype("float32")
        with pytest.raises(InputDtypeError, match="padding_mask.*integer.*float32"):
            build_encoder(config)(inputs)

    def test_string_dtype(self, config):
        inputs = self._inputs(config)
        inputs["token_ids"] = tf.constant([["a"] * 6] * 2)
        with pytest.raises(TypeError, match="token_ids"):
            build_encoder(config)(inputs)

    def test_wrong_rank(self, config):
        inputs = self._inputs(config)
        inputs["segment_ids"] = inputs["segment_ids"][..., None]
        with pytest.raises(ValueError, match=r"segment_ids.*rank 2.*\(2, 6, 1\)"):
            build_encoder(config)(inputs)

    def test_shape_disagreement(self, config):
        inputs = self._inputs(config)
        inputs["padding_mask"] = inputs["padding_mask"][:, :4]
        with pytest.raises(ValueError, match="sequence length"):
            build_encoder(config)(inputs)

    def test_too_long(self, config):
        inputs = random_inputs(config, batch=1, seq=config.max_sequence_length + 1)
        with pytest.raises(ValueError, match=f"longer than the {config.max_sequence_length} positions"):
            build_encoder(config)(inputs)

    @pytest.mark.slow
    def test_too_long_in_a_graph(self, config):
        encoder = build_encoder(config)
        inputs = random_inputs(config, batch=1, seq=config.max_sequence_length + 1)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Sequence length exceeds"):
            inference_function(encoder)(inputs)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Sequence length exceeds"):
            inference_function(encoder, jit_compile=False)(inputs)


def test_exact_gelu_does_not_lower_to_erfc():
    """tf2onnx cannot convert `Erfc`; the exact GELU must be written with `Erf`."""
    encoder = build_encoder(TINY_CONFIGS["bert"])
    graph = inference_function(encoder, jit_compile=False).get_concrete_function().graph
    graph_def = graph.as_graph_def()
    op_types = {node.op for node in graph_def.node} | {
        node.op for function in graph_def.library.function for node in function.node_def}
    assert "Erf" in op_types
    assert "Erfc" not in op_types


@pytest.mark.slow
def test_keras_file_reloads_in_a_fresh_process(tmp_path):
    """A new process needs only `import kerasbert.models` (which registers the classes), no
    custom_objects."""
    encoder = build_encoder(TINY_CONFIGS["albert"])
    inputs = random_inputs(encoder.config)
    np.savez(tmp_path / "inputs.npz", **inputs)
    np.save(tmp_path / "expected.npy", encoder(inputs)["sequence_output"])
    encoder.save(tmp_path / "encoder.keras")
    code = (
        "import sys, numpy as np, keras, kerasbert.models\n"
        "model = keras.models.load_model(sys.argv[1] + '/encoder.keras')\n"
        "inputs = dict(np.load(sys.argv[1] + '/inputs.npz'))\n"
        "diff = np.abs(model(inputs)['sequence_output'] - np.load(sys.argv[1] + '/expected.npy')).max()\n"
        "print(type(model).__name__, diff)\n")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                            text=True, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    name, diff = result.stdout.split()
    assert name == "Encoder" and float(diff) == 0.0
