"""Pick a `tf.distribute` strategy by name, for the training binaries and for users' scripts.

The training binaries map their flags straight onto `get_strategy`:

    --strategy one_device|mirrored|multi_worker_mirrored|tpu   -> strategy
    --num_gpus N                                                -> num_gpus
    --tpu NAME|grpc://HOST:PORT|local                           -> tpu

Build the model and compile it inside `strategy.scope()`, and feed `model.fit`
a dataset made by `distribute_dataset`, so that every worker reads its own part
of the data. `strategy_summary` gives one line for the logs.

Multi-worker training: every worker runs the same script with its own
`TF_CONFIG`, and must call `get_strategy` before any other TensorFlow op
(collective ops are configured at start-up). On CPU workers
`communication="auto"` and `"ring"` both work (tested with two workers on
127.0.0.1); `"nccl"` needs GPUs. The returned strategy also makes Keras 3's
`model.fit` work across workers (see `_MultiWorkerMirroredStrategy`).
"""

import json
import os
import socket
from urllib.parse import urlparse

import tensorflow as tf

from kerasbert.choices import STRATEGIES

_COMMUNICATIONS = {
    "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
    "ring": tf.distribute.experimental.CommunicationImplementation.RING,
    "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
}

_TF_CONFIG_SHAPE = ('{"cluster": {"worker": ["host0:port", "host1:port"]}, '
                    '"task": {"type": "worker", "index": 0}}')

# A TPU worker that does not answer makes `tf.config.experimental_connect_to_cluster`
# wait forever; its address is probed first with this timeout.
_TPU_PROBE_TIMEOUT_SECONDS = 30.0


def get_strategy(strategy="one_device", *, num_gpus=0, tpu=None, devices=None,
                 communication="auto"):
    """A `tf.distribute.Strategy` from its name (one of `STRATEGIES`).

    - `"one_device"`: `GPU:0` if `num_gpus > 0`, else `CPU:0`.
    - `"mirrored"`: one replica per device of `devices` if given, else per GPU
      for the first `num_gpus` GPUs, else per logical CPU device (so it also
      runs on a CPU-only machine split into logical devices).
    - `"multi_worker_mirrored"`: the cluster comes from the `TF_CONFIG`
      environment variable; `communication` (`"auto"`, `"ring"` or `"nccl"`)
      picks the collective implementation.
    - `"tpu"`: `tpu` is a TPU name, a `grpc://host:port` address or `"local"`
      (a TPU VM); the TPU system is connected and initialised here.

    Options that the chosen strategy does not use (`devices` other than for
    `"mirrored"`, `tpu` other than for `"tpu"`) are an error, not silently ignored.

    >>> strategy = get_strategy("one_device")
    >>> type(strategy).__name__, strategy.num_replicas_in_sync
    ('OneDeviceStrategy', 1)
    >>> get_strategy("mirrored", devices=["CPU:0"]).num_replicas_in_sync
    1
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}; expected one of {STRATEGIES}.")
    if communication not in _COMMUNICATIONS:
        raise ValueError(f"Unknown communication {communication!r}; expected one of "
                         f"{tuple(_COMMUNICATIONS)}.")
    if devices is not None and strategy != "mirrored":
        raise ValueError(f"devices={devices!r} only applies to strategy 'mirrored', "
                         f"not {strategy!r}.")
    if tpu is not None and strategy != "tpu":
        raise ValueError(f"tpu={tpu!r} (--tpu) only applies to strategy 'tpu', not {strategy!r}.")
    if strategy != "tpu":
        # Collective ops must be configured before the runtime starts, so a
        # multi-worker strategy counts the physical GPUs, which does not start it.
        _check_num_gpus(num_gpus, logical=strategy != "multi_worker_mirrored")
    if strategy == "one_device":
        return tf.distribute.OneDeviceStrategy("/device:GPU:0" if num_gpus else "/device:CPU:0")
    if strategy == "mirrored":
        return _mirrored_strategy(_mirrored_devices(devices, num_gpus))
    if strategy == "multi_worker_mirrored":
        _check_tf_config()
        return _MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=_COMMUNICATIONS[communication]))
    return _tpu_strategy(tpu)


def distribute_dataset(strategy, dataset_fn):
    """Each worker's own dataset, from `dataset_fn(input_context)`, distributed over `strategy`.

    `dataset_fn` receives a `tf.distribute.InputContext` and returns the
    dataset of this worker (`input_context.input_pipeline_id` of
    `input_context.num_input_pipelines`), batched with the per-replica batch
    size `input_context.get_per_replica_batch_size(global_batch_size)`. The
    pretraining pipeline takes the context directly and does both::

        distribute_dataset(strategy, lambda context: kerasbert.data.pretraining_dataset(
            files, tokenizer, kerasbert.data.PretrainingDataConfig(batch_size=global_batch_size),
            input_context=context))

    The result goes to `model.fit` (with `steps_per_epoch` if it repeats).

    >>> strategy = get_strategy("one_device")
    >>> def dataset_fn(context):
    ...     batch = context.get_per_replica_batch_size(4)
    ...     return tf.data.Dataset.range(8).shard(
    ...         context.num_input_pipelines, context.input_pipeline_id).batch(batch)
    >>> [batch.numpy().tolist() for batch in distribute_dataset(strategy, dataset_fn)]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    if isinstance(dataset_fn, tf.data.Dataset) or not callable(dataset_fn):
        raise TypeError(f"dataset_fn must be a function input_context -> tf.data.Dataset, "
                        f"got {type(dataset_fn).__name__}; a ready-made dataset goes to "
                        "strategy.experimental_distribute_dataset instead.")
    return strategy.distribute_datasets_from_function(dataset_fn)


def strategy_summary(strategy):
    """One log line: the strategy's kind, its number of replicas, its devices and workers.

    >>> strategy_summary(get_strategy("mirrored", devices=["CPU:0"]))
    'MirroredStrategy: 1 replica, 1 worker, devices CPU:0'
    """
    replicas = strategy.num_replicas_in_sync
    parts = [f"{replicas} replica{'s' if replicas != 1 else ''}", _workers_text(strategy)]
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy has no devices of its own
        devices = ()
    if devices:
        parts.append("devices " + ", ".join(_short_device_name(device) for device in devices))
    kind = type(strategy).__name__
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        kind = "MultiWorkerMirroredStrategy"  # not its class's name, CollectiveAllReduceStrategy
    return f"{kind}: " + ", ".join(parts)


def _check_num_gpus(num_gpus, logical):
    """`num_gpus` is a non-negative int no larger than the number of (logical) GPUs present."""
    if not isinstance(num_gpus, int) or num_gpus < 0:
        raise ValueError(f"num_gpus (--num_gpus) must be a non-negative integer, got {num_gpus!r}.")
    list_devices = tf.config.list_logical_devices if logical else tf.config.list_physical_devices
    available = len(list_devices("GPU"))
    if num_gpus > available:
        raise ValueError(f"num_gpus={num_gpus} (--num_gpus) but this machine has "
                         f"{available} GPU{'s' if available != 1 else ''}.")


def _mirrored_devices(devices, num_gpus):
    """The device names a `MirroredStrategy` mirrors over."""
    if devices is None:
        if num_gpus:
            return [f"/device:GPU:{index}" for index in range(num_gpus)]
        return [device.name for device in tf.config.list_logical_devices("CPU")]
    if isinstance(devices, str) or not devices:
        raise ValueError(f"devices must be a non-empty list of device names, got {devices!r}.")
    local = {(device.device_type, int(device.name.rsplit(":", 1)[1]))
             for device in tf.config.list_logical_devices()}
    for device in devices:
        spec = tf.DeviceSpec.from_string(device)
        is_local = spec.job in (None, "localhost")
        if is_local and ((spec.device_type or "").upper(), spec.device_index or 0) not in local:
            raise ValueError(f"Device {device!r} in devices does not exist here; local devices: "
                             f"{sorted(f'{kind}:{index}' for kind, index in local)}.")
    return list(devices)


def _check_tf_config():
    """`TF_CONFIG` is set and describes a cluster and this process's task in it."""
    text = os.environ.get("TF_CONFIG")
    if not text:
        raise ValueError("Strategy 'multi_worker_mirrored' needs the TF_CONFIG environment "
                         f"variable, e.g. TF_CONFIG='{_TF_CONFIG_SHAPE}' (one entry per "
                         "worker; each worker sets its own index).")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}); expected the shape "
                         f"{_TF_CONFIG_SHAPE}.") from error
    if not isinstance(config, dict) or "cluster" not in config or "task" not in config:
        raise ValueError(f"TF_CONFIG={text!r} lacks 'cluster' or 'task'; expected the shape "
                         f"{_TF_CONFIG_SHAPE}.")


# Every MirroredStrategy numbers its collective ops from the same key, so a second strategy over
# the same devices in one process (a notebook, a test suite) can collide with the first one's
# cached collectives ("Shape mismatch in the collective instance 100"). TensorFlow's own tests
# give each strategy its own key range through this class attribute; so do we.
_COLLECTIVE_KEY_RANGE = 100_000
_mirrored_strategies = 0


def _mirrored_strategy(devices):
    global _mirrored_strategies
    _mirrored_strategies += 1
    default = tf.distribute.MirroredStrategy._collective_key_base
    tf.distribute.MirroredStrategy._collective_key_base = (
        _mirrored_strategies * _COLLECTIVE_KEY_RANGE)
    try:
        return tf.distribute.MirroredStrategy(devices=devices)
    finally:
        tf.distribute.MirroredStrategy._collective_key_base = default


class _MultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
    """`tf.distribute.MultiWorkerMirroredStrategy` with the `reduce` that Keras 3's `fit` expects.

    Keras 3 (up to at least 3.15) calls `strategy.reduce` in two ways that
    `MirroredStrategy` accepts but the multi-worker strategy rejects
    (keras-team/keras#20585): on a whole `(x, y)` batch (to build the model
    before training), and with `axis=0` on scalar per-replica values (the
    logged metrics). Here a structure is reduced tensor by tensor, and a scalar
    is reduced across replicas, as `MirroredStrategy` does.
    """

    def reduce(self, reduce_op, value, axis=None):
        reduce_one = super().reduce

        def reduce_part(part):
            scalar = all(getattr(local, "shape", tf.TensorShape([])).rank == 0
                         for local in self.experimental_local_results(part))
            return reduce_one(reduce_op, part, None if scalar else axis)

        return tf.nest.map_structure(reduce_part, value)


def _tpu_strategy(tpu):
    """Resolve the TPU cluster named by `tpu`, connect to it, initialise it: a `TPUStrategy`."""
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu not in ("", "local"):  # a TPU VM's own chips need no remote connection
            _probe_tpu_workers(resolver)
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except Exception as error:
        raise RuntimeError(f"Could not set up the TPU --tpu={tpu!r}: "
                           f"{type(error).__name__}: {error}") from error
    return tf.distribute.TPUStrategy(resolver)


def _probe_tpu_workers(resolver):
    """Fail fast if a TPU worker's gRPC address does not accept connections."""
    if not resolver.master().startswith("grpc://"):
        return
    for job in resolver.cluster_spec().jobs:
        for address in resolver.cluster_spec().job_tasks(job):
            parsed = urlparse("grpc://" + address)
            try:
                socket.create_connection((parsed.hostname, parsed.port),
                                         timeout=_TPU_PROBE_TIMEOUT_SECONDS).close()
            except OSError as error:
                raise ConnectionError(
                    f"TPU worker {address} is not reachable ({error}).") from error


def _workers_text(strategy):
    """'1 worker', or 'worker 0 of 2' for a multi-worker strategy."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    count = sum(len(spec.get(job, ())) for job in ("chief", "worker"))
    if count <= 1:
        return "1 worker"
    return f"{resolver.task_type} {resolver.task_id} of {count} workers"


def _short_device_name(device):
    """'CPU:0' for a local device; remote devices keep their job and task."""
    spec = tf.DeviceSpec.from_string(device)
    kind = f"{spec.device_type}:{spec.device_index}"
    if spec.job in (None, "localhost"):
        return kind
    return f"/job:{spec.job}/task:{spec.task}/{kind}"
