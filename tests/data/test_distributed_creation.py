"""`kerasbert-create-pretraining-data --num_tasks=N --task_index=I`: disjoint shares whose union is the
single-process output, byte for byte; manifests written last; reruns of finished tasks change nothing."""

import gzip
import hashlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import filelock
import pytest
import tensorflow as tf

import kerasbert.data.demo
from tests.binaries import run_binary
from tests.helpers import run_shared_folder

pytestmark = pytest.mark.slow  # six processes of the binary at once, two runs in this one

VOCAB = os.path.join(kerasbert.data.demo.vocabulary_dir("wordpiece"), "vocab.txt")
NUM_SHARDS = 4
TASK_COUNTS = (1, 2, 3)


def _flags(corpus, output, *extra):
    return [f"--input_file={corpus}", f"--output_file={output}", f"--vocab_file={VOCAB}",
            "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1",
            "--random_seed=11", f"--num_shards={NUM_SHARDS}", *extra]


def _run_process(flags):
    """The binary in a process of its own: the tasks of a data set run at the same time."""
    result = subprocess.run([sys.executable, "-m", "kerasbert.cli.create_pretraining_data",
                             *flags], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _run(flags):
    """The binary in this process (`tests.binaries.run_binary`)."""
    result = run_binary("create_pretraining_data", *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _state(directory):
    """Every file in `directory`: its bytes' sha256 and its modification time."""
    return {name: (hashlib.sha256((directory / name).read_bytes()).hexdigest(),
                   (directory / name).stat().st_mtime_ns) for name in sorted(os.listdir(directory))}


def _shards(directory):
    return {name: digest for name, (digest, _) in _state(directory).items()
            if name.endswith(".tfrecord")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The shipped demo corpus (its first 150 lines per file, 4 files) made into 4 shards by one
    process (--num_tasks=1, the default) and by 2 and 3 tasks, all at once. Made once per test run:
    under pytest-xdist the first worker makes it in the run's shared folder, holding a lock."""
    shared = run_shared_folder(tmp_path_factory)
    root = shared / "distributed_creation"
    with filelock.FileLock(str(shared / "distributed_creation.lock")):
        if not (root / "stdout.json").exists():
            _make_runs(root)
    stdout = {tuple(int(part) for part in key.split("/")): text
              for key, text in json.loads((root / "stdout.json").read_text()).items()}
    return root, str(root / "corpus" / "part-*.txt"), stdout


def _make_runs(root):
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for index, path in enumerate(kerasbert.data.demo.pretraining_corpus_files()):
        with gzip.open(path, "rt", encoding="utf-8") as file:
            lines = file.read().split("\n")[:150]
        (corpus / f"part-{index}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    jobs = {f"{count}/{index}": _flags(str(corpus / "part-*.txt"),
                                       root / f"tasks-{count}" / "train.tfrecord",
                                       f"--num_tasks={count}", f"--task_index={index}")
            for count in TASK_COUNTS for index in range(count)}
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        stdout = dict(zip(jobs, pool.map(_run_process, jobs.values())))
    (root / "stdout.json").write_text(json.dumps(stdout))


@pytest.mark.parametrize("count", TASK_COUNTS[1:])
def test_union_of_tasks_equals_one_process_byte_for_byte(runs, count):
    root, _, _ = runs
    single = _shards(root / "tasks-1")
    assert len(single) == NUM_SHARDS
    assert _shards(root / f"tasks-{count}") == single
    # Once sorted, the records themselves are the same too.
    tasks_records = sorted(r for name in single for r in _raw(root / f"tasks-{count}" / name))
    assert tasks_records == sorted(r for name in single for r in _raw(root / "tasks-1" / name))


def _raw(path):
    return [record.numpy() for record in tf.data.TFRecordDataset(str(path))]


@pytest.mark.parametrize("count", TASK_COUNTS)
def test_tasks_read_disjoint_files_and_manifests_list_their_shards(runs, count):
    root, pattern, _ = runs
    directory = root / f"tasks-{count}"
    manifests = [json.loads((directory / f"train.tfrecord.task-{index:05d}-of-{count:05d}.manifest.json")
                            .read_text()) for index in range(count)] if count > 1 else []
    combined = json.loads((directory / "train.tfrecord.manifest.json").read_text())
    state = _state(directory)
    shard_names = [name for name in state if name.endswith(".tfrecord")]
    for index, manifest in enumerate(manifests):
        assert manifest["task_indices"] == [index] and manifest["num_tasks"] == count
        assert [shard["path"] for shard in manifest["shards"]] == shard_names[index::count]
    read_by_task = [{file for shard in manifest["shards"] for file in shard["input_files"]}
                    for manifest in manifests]
    for a in range(len(read_by_task)):
        for b in range(a + 1, len(read_by_task)):
            assert not read_by_task[a] & read_by_task[b]
    assert combined["complete"] and combined["num_tasks"] == count
    assert combined["task_indices"] == list(range(count))
    assert combined["random_seed"] == 11 and combined["flags"]["dupe_factor"] == 1
    assert combined["flags"]["input_file"] == [pattern] and "task_index" not in combined["flags"]
    assert combined["flags"]["num_shards"] == NUM_SHARDS
    assert [shard["path"] for shard in combined["shards"]] == shard_names
    total = 0
    for shard in combined["shards"]:
        path = directory / shard["path"]
        instances = len(_raw(path))
        assert shard["instances"] == instances > 0
        assert shard["bytes"] == path.stat().st_size and shard["sha256"] == state[shard["path"]][0]
        total += instances
    assert combined["instances"] == total
    # Written last: each task's after its shards, the data set's after every shard and task manifest.
    task_times = []
    for index in range(count if count > 1 else 0):
        task_times.append(state[f"train.tfrecord.task-{index:05d}-of-{count:05d}.manifest.json"][1])
        assert task_times[-1] >= max(state[name][1] for name in shard_names[index::count])
    last_shard = max(state[name][1] for name in shard_names)
    assert state["train.tfrecord.manifest.json"][1] >= max(task_times + [last_shard])
    assert not [name for name in state if name.startswith(".tmp")]


def test_every_task_writes_the_data_sets_manifest_last(runs):
    _, _, stdout = runs
    for index in range(3):
        assert "wrote" in stdout[3, index] and "train.tfrecord.manifest.json" in stdout[3, index]
    assert any("the data set is complete" in stdout[3, index] for index in range(3))
    assert "wrote" in stdout[1, 0]
    assert not [name for name in os.listdir(runs[0] / "tasks-1") if ".task-" in name]


def test_a_task_alone_writes_a_manifest_that_says_it_is_not_complete(runs, tmp_path):
    _, pattern, _ = runs
    _run(_flags(pattern, tmp_path / "train.tfrecord", "--num_tasks=2", "--task_index=1"))
    manifest = json.loads((tmp_path / "train.tfrecord.manifest.json").read_text())
    assert not manifest["complete"] and manifest["task_indices"] == [1]
    assert [shard["path"] for shard in manifest["shards"]] == [
        name for name in sorted(os.listdir(tmp_path)) if name.endswith(".tfrecord")]
    assert manifest["instances"] == sum(len(_raw(tmp_path / shard["path"]))
                                        for shard in manifest["shards"])


def test_rerun_of_a_finished_task_changes_nothing(runs):
    root, pattern, _ = runs
    directory = root / "tasks-3"
    before = _state(directory)
    stdout = _run(_flags(pattern, directory / "train.tfrecord", "--num_tasks=3", "--task_index=1"))
    assert "nothing to do" in stdout
    assert _state(directory) == before
