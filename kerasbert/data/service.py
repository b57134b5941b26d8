"""Input pipelines on the tf.data service: a dispatcher, workers, and the datasets a trainer
reads from them.

The trainer builds its pipeline as usual and hands it to `distribute`; the
service's workers (other processes, other hosts) run everything up to that point
and the trainer only receives finished batches over gRPC.

Processing modes, and why each pipeline gets the one it gets:

* Pretraining from text is an endless stream, shuffled and masked on the fly:
  there is no epoch to split, so `"parallel_epochs"` (`ShardingPolicy.OFF`):
  every worker runs the whole pipeline on its own. It needs no list of workers,
  no splits handed out by the dispatcher and no exactly-once bookkeeping, so
  workers can join, die or be restarted at any time (a killed worker loses only
  the batches it had buffered), and a dispatcher restarted on its journal gives
  the running job to whichever workers register. The one
  requirement, as TensorFlow's documentation says, is that workers must not all
  produce the same stream: `freshly_seeded` draws a new random seed each time a
  worker starts the pipeline, so the workers differ in instance pairing, masks and
  shuffle order. (`"distributed_epoch"` would hand out the files of one epoch at
  a time and drop a dead worker's files: it suits a finite pass, not a stream.)
* Pretraining TFRecords (already masked) and fine-tuning sets are finite files or
  example lists read pass after pass: `"distributed_epoch"` (`ShardingPolicy.DYNAMIC`)
  hands their files (TFRecords) or examples (fine-tuning) out to the workers, so
  each is read at most once per pass whatever the number of workers, with no
  seeds to keep apart (a killed worker's unfinished share of a pass is skipped).

Reading from the service gives up two things of the in-process pipeline: the
order of the batches is not reproducible (workers race), and the position in the
data is not checkpointed (tf.data cannot save a service iterator); a restarted
trainer starts a new job (`run_job_name`), never a stale one.

The workers run TensorFlow graphs containing tensorflow-text ops, so a worker
process must import `kerasbert.tokenizers` (as `kerasbert-data-service` does).
"""

import os
import re
import socket
import time
import uuid

import tensorflow as tf

from kerasbert import file_system

PARALLEL_EPOCHS = "parallel_epochs"
DISTRIBUTED_EPOCH = "distributed_epoch"

_ADDRESS = re.compile(r"^(?:grpc://)?(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d+)$")


def service_address(address, flag="--tf_data_service"):
    """`(host, port)` of a `grpc://HOST:PORT` (or `HOST:PORT`) address; a `ValueError` naming
    `flag` and the address otherwise.

    >>> service_address("grpc://127.0.0.1:5050")
    ('127.0.0.1', 5050)
    >>> service_address("localhost")
    Traceback (most recent call last):
    ...
    ValueError: --tf_data_service 'localhost' is not grpc://HOST:PORT (e.g. grpc://10.0.0.2:5050)
    """
    match = _ADDRESS.match(address.strip()) if isinstance(address, str) else None
    port = int(match.group("port")) if match else 0
    if not match or not 0 < port < 65536:
        raise ValueError(f"{flag} {address!r} is not grpc://HOST:PORT (e.g. grpc://10.0.0.2:5050)")
    return match.group("host").strip("[]"), port


def wait_for_dispatcher(address, timeout=30.0, flag="--tf_data_service"):
    """Return `grpc://HOST:PORT` once the dispatcher at `address` accepts connections; an
    `OSError` naming `flag` and the address if it does not within `timeout` seconds (reading
    from a dispatcher that is not there would wait forever).

    >>> wait_for_dispatcher("grpc://127.0.0.1:1", timeout=0.1)
    Traceback (most recent call last):
    ...
    OSError: --tf_data_service grpc://127.0.0.1:1: no tf.data service dispatcher answers ...
    """
    host, port = service_address(address, flag)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(2.0, timeout))):
                return f"grpc://[{host}]:{port}" if ":" in host else f"grpc://{host}:{port}"
        except OSError:
            if time.monotonic() >= deadline:
                raise OSError(f"{flag} {address}: no tf.data service dispatcher answers there "
                              f"(waited {timeout:g} s)") from None
            time.sleep(0.2)


def start_dispatcher(port, work_dir):
    """A fault-tolerant `tf.data.experimental.service.DispatchServer` on `port`, journaling
    its state in `work_dir` (restarted on the same `work_dir`, it recovers its jobs and
    workers). Stop it with `.stop()`.

    >>> import tempfile
    >>> dispatcher = start_dispatcher(0, tempfile.mkdtemp())
    >>> dispatcher.target.startswith("grpc://")
    True
    >>> dispatcher.stop()
    """
    if port < 0 or port > 65535:
        raise ValueError(f"--port {port} is not a port number (0-65535)")
    if not work_dir:
        raise ValueError("--work_dir is required: the dispatcher journals its state there to "
                         "survive restarts")
    file_system.makedirs(work_dir)
    return tf.data.experimental.service.DispatchServer(
        tf.data.experimental.service.DispatcherConfig(port=port, work_dir=work_dir,
                                                      fault_tolerant_mode=True))


def start_worker(dispatcher, port=0, worker_address=None, timeout=30.0):
    """A `tf.data.experimental.service.WorkerServer` registered with the dispatcher at
    `dispatcher` (`HOST:PORT`), serving on `port` (0: any free port) and telling the
    dispatcher the trainers reach it at `worker_address` (`HOST:PORT`, `%port%` standing for
    the port; TensorFlow's default `localhost:%port%` serves trainers on the same host only).
    Stop it with `.stop()`.

    >>> import tempfile
    >>> dispatcher = start_dispatcher(0, tempfile.mkdtemp())
    >>> worker = start_worker(dispatcher.target)
    >>> worker.stop(); dispatcher.stop()
    """
    host, dispatcher_port = service_address(dispatcher, "--dispatcher")
    wait_for_dispatcher(dispatcher, timeout, "--dispatcher")
    if port < 0 or port > 65535:
        raise ValueError(f"--port {port} is not a port number (0-65535)")
    config = {"worker_address": worker_address} if worker_address else {}
    if worker_address:
        service_address(worker_address.replace("%port%", "1"), "--worker_address")
    return tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(
            dispatcher_address=f"{host}:{dispatcher_port}", port=port, **config))


def free_port():
    """A TCP port free on this host right now (for servers that must announce their port).

    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def run_job_name():
    """A job name no other run shares (host, process, random part): a restarted trainer starts
    its own job instead of joining a stale one that has already ended.

    >>> run_job_name() != run_job_name()
    True
    """
    return f"kerasbert-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def distribute(dataset, service, processing_mode, job_name=None):
    """`dataset` run on the tf.data service at `service` (`grpc://HOST:PORT`, checked to
    answer): its elements are made by the service's workers and read here, in job `job_name`
    (default: a fresh `run_job_name()`).

    >>> import tempfile
    >>> dispatcher = start_dispatcher(0, tempfile.mkdtemp())
    >>> worker = start_worker(dispatcher.target)
    >>> served = distribute(tf.data.Dataset.range(3), dispatcher.target, DISTRIBUTED_EPOCH)
    >>> sorted(int(value) for value in served)
    [0, 1, 2]
    >>> worker.stop(); dispatcher.stop()
    """
    if processing_mode not in (PARALLEL_EPOCHS, DISTRIBUTED_EPOCH):
        raise ValueError(f"processing_mode must be {PARALLEL_EPOCHS!r} or {DISTRIBUTED_EPOCH!r}, "
                         f"got {processing_mode!r}")
    address = wait_for_dispatcher(service)
    return dataset.apply(tf.data.experimental.service.distribute(
        processing_mode=processing_mode, service=address, job_name=job_name or run_job_name()))


def freshly_seeded(make_dataset):
    """The elements of `make_dataset(seed)`, `seed` a scalar int64 tensor drawn at random
    (not from the global seed) each time the dataset is iterated: each tf.data service worker
    running it in `"parallel_epochs"` mode makes its own stream.

    >>> dataset = freshly_seeded(lambda seed: tf.data.Dataset.from_tensors(seed))
    >>> first, second = (int(next(iter(dataset))) for _ in range(2))
    >>> first != second
    True
    """
    def draw(_):
        # Seeds 0, 0 ask the kernel for a truly random seed (the public wrappers would derive
        # one from the global seed, making every worker's draw the same).
        return tf.raw_ops.RandomUniformInt(
            shape=tf.constant([], tf.int32), minval=tf.constant(0, tf.int64),
            maxval=tf.constant(2**62, tf.int64), seed=0, seed2=0)

    plain = tf.autograph.experimental.do_not_convert  # plain TensorFlow: no conversion needed
    return tf.data.Dataset.from_tensors(0).map(plain(draw)).flat_map(plain(make_dataset))


def serve(mode, port=0, work_dir=None, dispatcher=None, worker_address=None,
          dispatcher_timeout=60.0):
    """Run a tf.data service `mode` (`"dispatcher"` or `"worker"`, `start_dispatcher`'s and
    `start_worker`'s arguments) until SIGTERM or SIGINT, after printing one line once it
    serves. A `ValueError` names an argument of the other mode, or a worker's missing
    dispatcher."""
    import signal
    import threading

    import kerasbert.tokenizers  # noqa: F401  (registers the tensorflow-text ops workers run)

    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    if mode == "dispatcher":
        if dispatcher or worker_address:
            raise ValueError("--dispatcher and --worker_address are for --mode=worker")
        server = start_dispatcher(port, work_dir)
        print(f"kerasbert-data-service: dispatcher serving at {server.target} (journal in "
              f"{work_dir})", flush=True)
    else:
        if dispatcher is None:
            raise ValueError("--mode=worker needs --dispatcher=HOST:PORT")
        if work_dir:
            raise ValueError("--work_dir is for --mode=dispatcher")
        port = port or free_port()
        server = start_worker(dispatcher, port, worker_address, dispatcher_timeout)
        print(f"kerasbert-data-service: worker serving on port {port} for the dispatcher at "
              f"{dispatcher}", flush=True)
    stop.wait()
    server.stop()
