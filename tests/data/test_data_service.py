"""The tf.data service on 127.0.0.1: a dispatcher and two workers, each its own
`kerasbert-data-service` process, feed `kerasbert-pretrain` and `kerasbert-finetune`; the
served batches match the in-process pipeline's schema and statistics; training survives a
SIGKILLed worker and a SIGKILLed dispatcher restarted on its journal; the servers stop on
SIGTERM."""

import gzip
import os
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import kerasbert.data.demo
import kerasbert.zoo
from kerasbert.data.pretraining import PretrainingDataConfig, pretraining_dataset
from kerasbert.data.service import (PARALLEL_EPOCHS, distribute, free_port, freshly_seeded,
                                    service_address, start_worker, wait_for_dispatcher)

pytestmark = pytest.mark.slow

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
VOCAB_DIR = kerasbert.data.demo.vocabulary_dir("wordpiece")
VOCAB = os.path.join(VOCAB_DIR, "vocab.txt")
CORPUS = kerasbert.data.demo.pretraining_corpus_files()[0]
BATCH, SEQ, PREDICTIONS = 8, 64, 8
TINY = ["--model=bert_tiny_uncased", "--config_overrides=num_layers=1,hidden_size=32,num_heads=2,"
        "intermediate_size=64,max_positions=64", f"--batch_size={BATCH}",
        f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
        "--learning_rate=1e-3", "--steps_per_loop=5", f"--text_files={CORPUS}",
        f"--vocab_file={VOCAB}"]


def _serving(process):
    """`process` (a `kerasbert-data-service`) once it prints that it serves."""
    deadline = time.time() + 240
    while time.time() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        line = process.stdout.readline() if ready else ""
        if "serving" in line:
            return process
        if process.poll() is not None:
            raise AssertionError(f"{process.args} exited with {process.returncode}")
    raise AssertionError(f"{process.args} did not serve within 240 s")


class Service:
    """A dispatcher and two workers, and every process started for them (started together:
    the workers wait for the dispatcher)."""

    def __init__(self, root):
        self.port = free_port()
        self.work_dir = str(root / "journal")
        self.address = f"grpc://127.0.0.1:{self.port}"
        self.processes = []
        self.dispatcher = self.start_dispatcher(wait=False)
        self.workers = [self.start_worker(wait=False) for _ in range(2)]
        for process in self.processes:
            _serving(process)

    def start_dispatcher(self, wait=True):
        return self._started(wait, "--mode=dispatcher", f"--port={self.port}",
                             f"--work_dir={self.work_dir}")

    def start_worker(self, wait=True):
        return self._started(wait, "--mode=worker", f"--dispatcher=127.0.0.1:{self.port}",
                             "--worker_address=127.0.0.1:%port%")

    def _started(self, wait, *flags):
        process = subprocess.Popen([sys.executable, "-m", "kerasbert.cli.data_service", *flags],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                   env=ENV)
        self.processes.append(process)
        return _serving(process) if wait else process

    def journaled_jobs(self):
        """How many times the dispatcher's journal names a kerasbert job (`run_job_name`)."""
        journal = os.path.join(self.work_dir, "tf_data_dispatcher_journal")
        return sum(open(os.path.join(journal, name), "rb").read().count(b"kerasbert-")
                   for name in os.listdir(journal))

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            process.stdout.close()


@pytest.fixture
def service(tmp_path):
    running = Service(tmp_path)
    yield running
    running.stop()


def test_one_service_feeds_pretraining_and_finetuning_and_survives_faults(service, tmp_path):
    """One test, so that one dispatcher and two workers serve every check (pytest-xdist would
    give each of its workers its own module fixture); the faults come last."""
    started = time.time()
    for check, *arguments in [(_check_schema_and_statistics, service),
                              (_check_finetuning, service, tmp_path / "finetune"),
                              (_check_pretraining_survives_faults, service, tmp_path / "pretrain")]:
        check(*arguments)
        print(f"{check.__name__}: {time.time() - started:.0f} s")
        started = time.time()
    # SIGTERM stops a server cleanly (exit status 0).
    for process in service.processes:
        if process.poll() is None:
            process.terminate()
            assert process.wait(timeout=60) == 0, process.args


def _pretrain_command(model_dir, address, steps):
    return [sys.executable, "-m", "kerasbert.cli.pretrain", f"--model_dir={model_dir}", *TINY,
            f"--train_steps={steps}", "--checkpoint_interval=10",
            f"--tf_data_service={address}"]


def _statistics(batches):
    """Masked fraction of the real tokens, NSP "random next" fraction, distinct batches."""
    masked = sum(float(batch["masked_lm_weights"].numpy().sum()) for batch in batches)
    tokens = sum(float(batch["padding_mask"].numpy().sum()) for batch in batches)
    labels = np.concatenate([batch["next_sentence_labels"].numpy() for batch in batches])
    distinct = {batch["token_ids"].numpy().tobytes() for batch in batches}
    return masked / tokens, float(labels.mean()), len(distinct)


def _check_schema_and_statistics(service):
    tokenizer = kerasbert.zoo.build_tokenizer("bert_tiny_uncased", VOCAB_DIR)

    def batches(seed):
        return pretraining_dataset([CORPUS], tokenizer, PretrainingDataConfig(
            "nsp", SEQ, BATCH, max_predictions_per_seq=PREDICTIONS), seed=seed, epochs=None)

    local = batches(0)
    served = distribute(freshly_seeded(batches), service.address, PARALLEL_EPOCHS)
    assert served.element_spec == local.element_spec
    assert sorted(local.element_spec) == ["masked_lm_ids", "masked_lm_positions",
                                          "masked_lm_weights", "next_sentence_labels",
                                          "padding_mask", "segment_ids", "token_ids"]
    count = 40
    served_batches = list(served.take(count))
    expected = {name: (spec.dtype, spec.shape.as_list()) for name, spec in
                local.element_spec.items()}
    for batch in served_batches:
        assert {name: (value.dtype, value.shape.as_list()) for name, value in
                batch.items()} == expected
    local_masked, local_nsp, _ = _statistics(list(local.take(2 * count)))
    served_masked, served_nsp, distinct = _statistics(served_batches)
    # Two workers each draw their own seed: no batch arrives twice.
    assert distinct == count
    # ~15% of the tokens masked (fewer where max_predictions_per_seq caps long instances).
    assert 0.09 < local_masked < 0.16
    assert abs(served_masked - local_masked) < 0.01, (served_masked, local_masked)
    # NSP: about half the second segments are random (more where a document has one segment),
    # alike both ways (640 and 320 labels: the difference's sd is ~0.034; the service's seeds
    # are random).
    assert abs(local_nsp - 0.5) < 0.1, local_nsp
    assert abs(served_nsp - local_nsp) < 0.12, (served_nsp, local_nsp)


def _wait_for_checkpoint(model_dir, number, process):
    state = model_dir / "checkpoint"
    deadline = time.time() + 300
    while time.time() < deadline:
        if state.exists() and f"ckpt-{number}\"" in state.read_text():
            return
        assert process.poll() is None, f"the run ended before ckpt-{number}"
        time.sleep(0.05)
    raise AssertionError(f"no ckpt-{number} within 300 s")


def _killed(process):
    process.send_signal(signal.SIGKILL)
    process.wait()


def _check_pretraining_survives_faults(service, tmp_path):
    """Worker A killed: B goes on feeding. Then the dispatcher and B killed: the trainer
    starves until the dispatcher, restarted on its journal, gives its job to a new worker C
    (only a recovered dispatcher can: the trainer never knew C)."""
    tmp_path.mkdir()
    model_dir = tmp_path / "run"
    steps = 100
    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        run = subprocess.Popen(_pretrain_command(model_dir, service.address, steps),
                               stdout=stdout, stderr=stderr, env=ENV)
    try:
        _wait_for_checkpoint(model_dir, 10, run)
        _killed(service.workers[0])
        _wait_for_checkpoint(model_dir, 20, run)
        _killed(service.dispatcher)
        _killed(service.workers[1])
        assert run.poll() is None and not (model_dir / f"ckpt-{steps}.index").exists()
        service.dispatcher = service.start_dispatcher()  # same port, same journal
        service.workers.append(service.start_worker())
        run.wait(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    output, errors = ((tmp_path / name).read_text() for name in ("stdout", "stderr"))
    assert run.returncode == 0, errors[-3000:]
    assert "Done:" in output and f"step {steps}" in output
    assert (model_dir / f"ckpt-{steps}.index").exists()


def _check_finetuning(service, tmp_path):
    tmp_path.mkdir()
    encoder = kerasbert.zoo.build("bert_tiny_uncased", vocab_size=len(open(VOCAB).readlines()),
                                  num_layers=1, hidden_size=32, num_heads=2,
                                  intermediate_size=64)
    encoder.save(tmp_path / "encoder.keras")
    files = kerasbert.data.demo.classification_files()
    jobs_before = service.journaled_jobs()
    with gzip.open(files["dev"], "rt", encoding="utf-8") as source, \
            gzip.open(tmp_path / "dev.tsv.gz", "wt", encoding="utf-8") as dev:
        dev.writelines(line for _, line in zip(range(33), source))  # header and 32 examples
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.cli.finetune", "--task=wordnet_gloss",
         f"--train_file={files['train']}", f"--dev_file={tmp_path / 'dev.tsv.gz'}",
         f"--init_from={tmp_path / 'encoder.keras'}", f"--vocab_file={VOCAB}",
         f"--model_dir={tmp_path / 'run'}", "--max_seq_length=32", "--train_batch_size=16",
         "--eval_batch_size=64", "--num_train_epochs=1", "--max_train_examples=64",
         f"--tf_data_service={service.address}"],
        capture_output=True, text=True, env=ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 batches of 16 per epoch, 4 steps" in result.stdout
    assert (tmp_path / "run" / "eval_results.json").exists()
    assert (tmp_path / "run" / "ckpt-4.index").exists()
    assert service.journaled_jobs() > jobs_before  # the training set came through the service


def test_bad_addresses_and_flags_are_named():
    with pytest.raises(ValueError, match="--tf_data_service 'localhost' is not grpc://HOST:PORT"):
        service_address("localhost")
    with pytest.raises(ValueError, match="--dispatcher 'host:99999' is not grpc://HOST:PORT"):
        start_worker("host:99999")
    result = subprocess.run([sys.executable, "-m", "kerasbert.cli.data_service", "--mode=worker"],
                            capture_output=True, text=True, env=ENV, timeout=600)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "kerasbert-data-service: error: --mode=worker needs --dispatcher=HOST:PORT")
    # Nothing listens on a port just found free: a named error, not a wait forever.
    address = f"grpc://127.0.0.1:{free_port()}"
    with pytest.raises(OSError, match=f"{address}: no tf.data service dispatcher answers"):
        wait_for_dispatcher(address, timeout=1)
