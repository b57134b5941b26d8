"""Pretraining batches into a trainer: the tf.data service (1 and 2 local workers) vs in-process.

The pipeline is `kerasbert-pretrain`'s from text: the shipped corpus
(`kerasbert.data.demo.pretraining_corpus_files()`), uncased shipped WordPiece
vocabulary, NSP instances, dynamic masking (0.15, `--max_predictions` at most),
`--batch_size` x `--seq_length`. The consumer only pulls batches (no model), so
the rate is what the input side can deliver:

- in-process: `pretraining_dataset(...)` iterated in this process (tf.data
  parallelism over every core it may use);
- service, N workers: a dispatcher and N workers, each its own
  `python -m kerasbert.cli.data_service` process on 127.0.0.1 (the
  `kerasbert-data-service` binary), worker i pinned to core i with `taskset`
  when there are enough cores; this process reads through
  `kerasbert.data.service.distribute` exactly as `kerasbert-pretrain
  --tf_data_service` does (`freshly_seeded`, `"parallel_epochs"`).

Each rate is batches/s over `--batches` batches after `--warmup` batches (start-up
and tracing excluded), wall clock. Ratios are against in-process.

Feeding an accelerator: one worker core delivers r batches/s of this shape, that
is r x batch sequences/s; accelerators training at Q sequences/s of this length
need ceil(Q / (r x batch)) worker cores (tokenizing, pairing and masking are the
whole cost; the trainer's own read of a served batch is a gRPC receive). The
printout applies this to a few Q; measure Q for your model and accelerators
(`benchmarks/pretrain_throughput.py` times training steps) and r on the real
cluster's CPUs: r scales with the CPU, the sequence length and the tokenizer.

Run from the repository root:

    python benchmarks/data_service.py                     # 200 batches of 32 x 128
    python benchmarks/data_service.py --batches 50        # quicker
    python benchmarks/data_service.py --smoke             # 1 worker, 2 tiny batches: runs?
"""

import argparse
import math
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import kerasbert.zoo  # noqa: E402
from kerasbert.data import demo  # noqa: E402
from kerasbert.data.pretraining import PretrainingDataConfig, pretraining_dataset  # noqa: E402
from kerasbert.data.service import PARALLEL_EPOCHS, distribute, freshly_seeded  # noqa: E402

from reporting import SMOKE_HELP, format_table, smoke_banner  # noqa: E402

ACCELERATOR_SEQUENCES_PER_SECOND = (1_000, 4_000, 16_000, 64_000)


def progress(message):
    print(message, file=sys.stderr, flush=True)


def service_process(flags, core=None):
    """A `kerasbert-data-service` process (pinned to `core` if given) and the line it printed
    once it served."""
    command = [sys.executable, "-m", "kerasbert.cli.data_service", *flags]
    if core is not None and shutil.which("taskset"):
        command = ["taskset", "-c", str(core), *command]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        line = process.stdout.readline() if select.select([process.stdout], [], [], 1.0)[0] \
            else ""
        if "serving" in line:
            return process, line
        if process.poll() is not None:
            raise SystemExit(f"{' '.join(command)} exited with status {process.returncode}")
    process.kill()
    raise SystemExit(f"{' '.join(command)} did not serve within 300 s")


def rate(dataset, batches, warmup):
    """Batches/s reading `batches` batches after `warmup` ones."""
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--max_predictions", type=int, default=20)
    parser.add_argument("--smoke", action="store_true",
                        help=SMOKE_HELP + " (the service with 1 worker only)")
    arguments = parser.parse_args()
    worker_counts = (1, 2)
    if arguments.smoke:
        print(smoke_banner())
        arguments.batches, arguments.warmup, arguments.batch_size = 2, 1, 4
        arguments.seq_length, arguments.max_predictions, worker_counts = 32, 4, (1,)
    tokenizer = kerasbert.zoo.build_tokenizer("bert_base_uncased",
                                              demo.vocabulary_dir("wordpiece"))
    corpus = demo.pretraining_corpus_files()

    def pipeline(seed):
        return pretraining_dataset(corpus, tokenizer, PretrainingDataConfig(
            "nsp", arguments.seq_length, arguments.batch_size,
            max_predictions_per_seq=arguments.max_predictions), seed=seed, epochs=None)

    cores = len(os.sched_getaffinity(0))
    progress("in-process ...")
    rates = {"in-process": rate(pipeline(0), arguments.batches, arguments.warmup)}
    work_dir = tempfile.mkdtemp(prefix="kerasbert-data-service-")
    processes = []
    try:
        for workers in worker_counts:
            progress(f"service, {workers} worker(s) ...")
            # Port 0: the dispatcher binds a free port itself and names it in its line (a port
            # found free here could be taken by another program before the dispatcher binds it).
            dispatcher, line = service_process(["--mode=dispatcher", "--port=0",
                                                f"--work_dir={work_dir}/{workers}"])
            processes.append(dispatcher)
            port = re.search(r"serving at grpc://[^:\s]+:(\d+)", line).group(1)
            for index in range(workers):
                processes.append(service_process(
                    ["--mode=worker", f"--dispatcher=127.0.0.1:{port}",
                     "--worker_address=127.0.0.1:%port%"],
                    core=index if workers <= cores else None)[0])
            served = distribute(freshly_seeded(pipeline), f"grpc://127.0.0.1:{port}",
                                PARALLEL_EPOCHS)
            rates[f"service, {workers} worker(s)"] = rate(served, arguments.batches,
                                                           arguments.warmup)
            for process in processes:
                process.kill()
                process.wait()
            processes.clear()
    finally:
        for process in processes:
            process.kill()
            process.wait()
        shutil.rmtree(work_dir, ignore_errors=True)

    shape = f"{arguments.batch_size} x {arguments.seq_length}"
    print(f"Pretraining batches ({shape}, NSP, dynamic masking) into a consumer, {cores} "
          f"core(s), {arguments.batches} batches after {arguments.warmup}:")
    baseline = rates["in-process"]
    print(format_table(["pipeline", "batches/s", "instances/s", "vs in-process"],
                       [[name, f"{value:.1f}", f"{value * arguments.batch_size:.0f}",
                         f"{value / baseline:.2f}x"] for name, value in rates.items()]))
    per_core = rates["service, 1 worker(s)"] * arguments.batch_size
    print(f"\nOne worker core delivers {per_core:.0f} sequences/s of length "
          f"{arguments.seq_length}. Worker cores needed to feed accelerators training at:")
    print(format_table(["sequences/s", "worker cores"],
                       [[f"{sequences:,}", str(math.ceil(sequences / per_core))]
                        for sequences in ACCELERATOR_SEQUENCES_PER_SECOND]))


if __name__ == "__main__":
    main()
