"""The strategy factory: every CPU-possible strategy, its errors, the TPU wiring, and that
distributed training (two logical CPUs; two worker processes) matches one device."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert.zoo
from kerasbert.training.distribute import (STRATEGIES, distribute_dataset, get_strategy,
                                           strategy_summary)
from tests.helpers import finish_processes

SUBPROCESS_TIMEOUT_SECONDS = 100


def _local_devices(strategy):
    return [tf.DeviceSpec.from_string(device).to_string().split("device:")[-1]
            for device in strategy.extended.worker_devices]


def _subprocess_env(**extra):
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **extra}


# --- choosing a strategy ---------------------------------------------------------------------

def test_strategy_names_are_the_binary_flag_values():
    assert STRATEGIES == ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def test_one_device_is_cpu0_without_gpus():
    strategy = get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.num_replicas_in_sync == 1
    assert _local_devices(strategy) == ["CPU:0"]


def test_mirrored_defaults_to_every_logical_cpu():
    strategy = get_strategy("mirrored")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert _local_devices(strategy) == ["CPU:0", "CPU:1"]  # tests/conftest.py splits the CPU
    assert strategy.num_replicas_in_sync == 2


def test_mirrored_uses_the_devices_given():
    assert _local_devices(get_strategy("mirrored", devices=["/cpu:1"])) == ["CPU:1"]


@pytest.mark.parametrize("name", ["mirored", "MIRRORED", "parameter_server", ""])
def test_unknown_strategy_is_named_with_the_choices(name):
    with pytest.raises(ValueError, match=f"Unknown strategy '{name}'.*multi_worker_mirrored"):
        get_strategy(name)


@pytest.mark.parametrize("name", ["one_device", "mirrored", "multi_worker_mirrored"])
def test_more_gpus_than_exist_says_how_many_exist(name):
    with pytest.raises(ValueError, match="num_gpus=1 .*has 0 GPUs"):
        get_strategy(name, num_gpus=1)


@pytest.mark.parametrize("num_gpus", [-1, 1.5, "2"])
def test_num_gpus_must_be_a_non_negative_int(num_gpus):
    with pytest.raises(ValueError, match="num_gpus .*non-negative integer"):
        get_strategy("mirrored", num_gpus=num_gpus)


def test_missing_device_is_named():
    with pytest.raises(ValueError, match=r"Device '/cpu:7' .*does not exist.*CPU:1"):
        get_strategy("mirrored", devices=["/cpu:0", "/cpu:7"])


@pytest.mark.parametrize("devices", ["/cpu:0", []])
def test_devices_must_be_a_non_empty_list(devices):
    with pytest.raises(ValueError, match="non-empty list of device names"):
        get_strategy("mirrored", devices=devices)


def test_options_of_other_strategies_are_rejected():
    with pytest.raises(ValueError, match="devices=.*only applies to strategy 'mirrored'"):
        get_strategy("one_device", devices=["/cpu:0"])
    with pytest.raises(ValueError, match="tpu='my-tpu' .*only applies to strategy 'tpu'"):
        get_strategy("mirrored", tpu="my-tpu")
    with pytest.raises(ValueError, match="Unknown communication 'mpi'.*'ring'"):
        get_strategy("multi_worker_mirrored", communication="mpi")


@pytest.mark.parametrize("tf_config, message", [
    (None, "needs the TF_CONFIG environment variable"),
    ("{cluster: }", "TF_CONFIG is not valid JSON"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}}', "lacks 'cluster' or 'task'"),
])
def test_multi_worker_needs_tf_config_and_shows_its_shape(monkeypatch, tf_config, message):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(ValueError, match=message) as raised:
        get_strategy("multi_worker_mirrored")
    assert '{"cluster": {"worker": [' in str(raised.value)
    assert '"task": {"type": "worker", "index": 0}' in str(raised.value)


# --- TPU ------------------------------------------------------------------------------------

class _FakeTpuWorld:
    """Stands in for the TPU resolver, connection, initialisation and strategy, recording calls."""

    def __init__(self, monkeypatch, master="", resolver_error=None):
        self.calls = []
        world = self

        class FakeResolver:
            def __init__(self, tpu=None):
                world.calls.append(("resolve", tpu))
                if resolver_error is not None:
                    raise resolver_error
                self.tpu = tpu

            def master(self):
                return master

            def cluster_spec(self):
                address = master.removeprefix("grpc://")
                return tf.train.ClusterSpec({"worker": [address]} if address else {})

        def record(name):
            def call(argument):
                world.calls.append((name, argument.tpu))
                return f"{name} result"
            return call

        monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", FakeResolver)
        monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", record("connect"))
        monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", record("initialize"))
        monkeypatch.setattr(tf.distribute, "TPUStrategy", record("strategy"))


def test_tpu_is_resolved_connected_initialised_then_wrapped(monkeypatch):
    with socket.socket() as listening:  # a reachable "TPU worker" for the address probe
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        world = _FakeTpuWorld(monkeypatch, master=f"grpc://127.0.0.1:{listening.getsockname()[1]}")
        assert get_strategy("tpu", tpu="my-tpu") == "strategy result"
    assert world.calls == [("resolve", "my-tpu"), ("connect", "my-tpu"),
                           ("initialize", "my-tpu"), ("strategy", "my-tpu")]


def test_local_tpu_is_not_connected_to(monkeypatch):
    world = _FakeTpuWorld(monkeypatch)
    get_strategy("tpu", tpu="local")
    assert world.calls == [("resolve", "local"), ("initialize", "local"), ("strategy", "local")]


def test_tpu_resolver_failure_names_the_tpu_flag_and_the_cause(monkeypatch):
    world = _FakeTpuWorld(monkeypatch, resolver_error=ValueError("no such TPU: nowhere"))
    with pytest.raises(RuntimeError, match=r"--tpu='nowhere': ValueError: no such TPU: nowhere"):
        get_strategy("tpu", tpu="nowhere")
    assert world.calls == [("resolve", "nowhere")]


@pytest.mark.slow
def test_tpu_without_a_tpu_fails_fast_and_clearly():
    """The real TensorFlow path, in a subprocess so that a hang fails the test instead of CI.
    A grpc address where nothing listens would make TensorFlow wait forever; the factory
    probes it first."""
    with socket.socket() as bound_not_listening:  # connecting to it is refused at once
        bound_not_listening.bind(("127.0.0.1", 0))
        address = f"grpc://127.0.0.1:{bound_not_listening.getsockname()[1]}"
        script = textwrap.dedent(f"""
            import json
            from kerasbert.training.distribute import get_strategy
            errors = {{}}
            for tpu in ("local", {address!r}):
                try:
                    get_strategy("tpu", tpu=tpu)
                except Exception as error:
                    errors[tpu] = [type(error).__name__, str(error)]
            print(json.dumps(errors))
        """)
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                env=_subprocess_env(), timeout=SUBPROCESS_TIMEOUT_SECONDS)
    assert result.returncode == 0, result.stderr[-3000:]
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    assert errors["local"][0] == "RuntimeError"
    assert "--tpu='local'" in errors["local"][1] and "TPUs not found" in errors["local"][1]
    assert errors[address][0] == "RuntimeError"
    assert f"--tpu='{address}'" in errors[address][1]
    assert "is not reachable" in errors[address][1] and "refused" in errors[address][1]


# --- datasets and summaries -----------------------------------------------------------------

def test_distribute_dataset_gives_each_replica_its_share():
    strategy = get_strategy("mirrored")
    contexts = []

    def dataset_fn(context):
        contexts.append(context)
        return tf.data.Dataset.range(8).batch(context.get_per_replica_batch_size(4))

    first_step = next(iter(distribute_dataset(strategy, dataset_fn)))
    (context,) = contexts
    assert (context.num_input_pipelines, context.input_pipeline_id) == (1, 0)
    assert context.num_replicas_in_sync == 2
    per_replica = [values.numpy().tolist()
                   for values in strategy.experimental_local_results(first_step)]
    assert per_replica == [[0, 1], [2, 3]]


@pytest.mark.parametrize("not_a_function", [tf.data.Dataset.range(3), [1, 2]])
def test_distribute_dataset_wants_a_function(not_a_function):
    with pytest.raises(TypeError, match="dataset_fn must be a function input_context"):
        distribute_dataset(get_strategy("one_device"), not_a_function)


def test_strategy_summary_lines():
    assert (strategy_summary(get_strategy("one_device"))
            == "OneDeviceStrategy: 1 replica, 1 worker, devices CPU:0")
    assert (strategy_summary(get_strategy("mirrored"))
            == "MirroredStrategy: 2 replicas, 1 worker, devices CPU:0, CPU:1")


# --- training equivalence -------------------------------------------------------------------

SEQUENCE_LENGTH, GLOBAL_BATCH, STEPS = 8, 4, 5


def _classifier():
    """A one-layer kerasbert encoder with a Dense head, no dropout, so training is deterministic."""
    encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1, vocab_size=50,
                                  max_positions=SEQUENCE_LENGTH, dropout=0.0, attention_dropout=0.0)
    pooled = encoder.outputs[0]
    logits = keras.layers.Dense(2, name="head")(pooled)
    model = keras.Model(encoder.inputs, logits)
    rng = np.random.default_rng(7)
    model.set_weights([rng.normal(0, 0.2, size=weight.shape).astype("float32")
                       for weight in model.get_weights()])
    model.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _classification_examples():
    rng = np.random.default_rng(3)
    count = GLOBAL_BATCH * STEPS
    features = {"token_ids": rng.integers(1, 50, size=(count, SEQUENCE_LENGTH)).astype("int32"),
                "segment_ids": np.zeros((count, SEQUENCE_LENGTH), "int32"),
                "padding_mask": np.ones((count, SEQUENCE_LENGTH), "int32")}
    return tf.data.Dataset.from_tensor_slices((features, rng.integers(0, 2, size=count)))


def _train(strategy, dataset):
    with strategy.scope():
        model = _classifier()
        initial = model.get_weights()
        history = model.fit(dataset, epochs=1, steps_per_epoch=STEPS, shuffle=False, verbose=0)
    return initial, history.history["loss"], model.get_weights()


@pytest.mark.slow
def test_mirrored_over_two_cpus_trains_like_one_device():
    initial, one_loss, one_weights = _train(get_strategy("one_device"),
                                            _classification_examples().batch(GLOBAL_BATCH))
    mirrored = get_strategy("mirrored")
    assert mirrored.num_replicas_in_sync == 2
    _, mirrored_loss, mirrored_weights = _train(mirrored, distribute_dataset(
        mirrored, lambda context: _classification_examples().batch(
            context.get_per_replica_batch_size(GLOBAL_BATCH))))
    np.testing.assert_allclose(mirrored_loss, one_loss, rtol=1e-5, atol=1e-5)
    moved = max(np.abs(after - before).max() for after, before in zip(one_weights, initial))
    assert moved > 1e-2, "training did not change the weights, so the comparison shows nothing"
    for mirrored_weight, one_weight in zip(mirrored_weights, one_weights):
        np.testing.assert_allclose(mirrored_weight, one_weight, rtol=1e-5, atol=1e-5)


WORKER_STEPS, WORKER_GLOBAL_BATCH = 4, 8

# The data (a fixed function of each element's id) and the model (fixed initial weights),
# shared by the workers and the single-process reference.
MODEL_CODE = textwrap.dedent("""
    import keras
    import numpy as np
    import tensorflow as tf

    def dataset_of_ids(ids):
        def example(element_id):
            x = tf.sin(tf.cast(element_id, tf.float32) * tf.constant([0.3, 0.7, 1.1]))
            return x, tf.reduce_sum(x, keepdims=True) ** 2
        return ids.map(example)

    def small_model():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                                  keras.layers.Dense(1)])
        rng = np.random.default_rng(0)
        model.set_weights([rng.normal(size=w.shape).astype("float32") for w in model.get_weights()])
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        return model
""")

# Each worker reads its shard of the element ids, records every id its pipeline produces
# (a set: Keras peeks at the first batch through a separate iterator), and trains.
# argv: output json, communication, steps, global batch.
WORKER_SCRIPT = textwrap.dedent("""
    import json, sys
    from kerasbert.training.distribute import distribute_dataset, get_strategy, strategy_summary
    strategy = get_strategy("multi_worker_mirrored", communication=sys.argv[2])  # first TF call
""") + MODEL_CODE + textwrap.dedent("""
    STEPS, GLOBAL_BATCH = int(sys.argv[3]), int(sys.argv[4])
    seen = set()

    def record(element_id):
        seen.add(int(element_id.numpy()))
        return element_id

    def dataset_fn(context):
        ids = tf.data.Dataset.range(STEPS * GLOBAL_BATCH).shard(
            context.num_input_pipelines, context.input_pipeline_id)
        ids = ids.map(lambda i: tf.ensure_shape(tf.py_function(record, [i], tf.int64), []))
        return dataset_of_ids(ids).batch(context.get_per_replica_batch_size(GLOBAL_BATCH))

    with strategy.scope():
        model = small_model()
    history = model.fit(distribute_dataset(strategy, dataset_fn), epochs=1,
                        steps_per_epoch=STEPS, shuffle=False, verbose=0)
    with open(sys.argv[1], "w") as file:
        json.dump({"summary": strategy_summary(strategy), "ids": sorted(seen),
                   "loss": history.history["loss"],
                   "weights": [weight.tolist() for weight in model.get_weights()]}, file)
""")


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run_workers(tmp_path, communication):
    (tmp_path / "worker.py").write_text(WORKER_SCRIPT)
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(2)]}
    workers = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        workers.append(subprocess.Popen(
            [sys.executable, str(tmp_path / "worker.py"), str(tmp_path / f"worker{index}.json"),
             communication, str(WORKER_STEPS), str(WORKER_GLOBAL_BATCH)],
            env=_subprocess_env(TF_CONFIG=tf_config), cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    finished = finish_processes(workers, SUBPROCESS_TIMEOUT_SECONDS)  # a hung collective fails
    for index, (status, output) in enumerate(finished):
        assert status == 0, f"worker {index} failed:\n{output[-4000:]}"
    return [json.loads((tmp_path / f"worker{index}.json").read_text()) for index in range(2)]


@pytest.mark.slow
def test_two_workers_read_disjoint_parts_and_train_like_one_process(tmp_path):
    results = _run_workers(tmp_path, communication="auto")

    assert [result["summary"] for result in results] == [
        f"MultiWorkerMirroredStrategy: 2 replicas, worker {index} of 2 workers, "
        f"devices /job:worker/task:{index}/CPU:0" for index in range(2)]
    ids = [set(result["ids"]) for result in results]
    assert ids[0] and ids[1] and not ids[0] & ids[1]
    assert ids[0] | ids[1] == set(range(WORKER_STEPS * WORKER_GLOBAL_BATCH))

    shared = {}
    exec(MODEL_CODE, shared)
    with get_strategy("one_device").scope():
        reference = shared["small_model"]()
        initial = reference.get_weights()
    # Global batch k holds ids [8k, 8k + 8): each worker's k-th batch is its shard's half of it.
    ids = tf.data.Dataset.range(WORKER_STEPS * WORKER_GLOBAL_BATCH)
    history = reference.fit(shared["dataset_of_ids"](ids).batch(WORKER_GLOBAL_BATCH),
                            epochs=1, shuffle=False, verbose=0)
    assert max(np.abs(after - before).max()
               for after, before in zip(reference.get_weights(), initial)) > 1e-2
    for result in results:
        np.testing.assert_allclose(result["loss"], history.history["loss"], rtol=1e-5)
        for worker_weight, reference_weight in zip(result["weights"], reference.get_weights()):
            np.testing.assert_allclose(worker_weight, reference_weight, rtol=1e-5, atol=1e-6)
    for weight_0, weight_1 in zip(results[0]["weights"], results[1]["weights"]):
        np.testing.assert_array_equal(weight_0, weight_1)
