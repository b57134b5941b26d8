"""Training, fine-tuning, distillation, feature extraction and the main job with their outputs
on `ram://`, TensorFlow's in-memory file system, standing in for `gs://` and `s3://`.

The binaries run in this process (`tests.ram_runs.run_on_ram`, on a `ram://` folder emptied
before each run); what they wrote comes back as a local copy, and no run may leave a local
folder named `ram:` behind (a URL used as a local path). One tiny pretraining run feeds the others: its
copy is put back on `ram://` as their pretrained model or teacher. The text and task files stay
local (their readers are not part of what is tested here). Resuming from a `ram://` checkpoint,
the run record and the main job's run folder are checked in this process.
"""

import gzip
import json
import os
import sys
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import file_system
from kerasbert.data import demo
from kerasbert.demo_pipeline import runner
from kerasbert.demo_pipeline.curves import draw_curves
from kerasbert.demo_pipeline.stages import Stage
from kerasbert.training.finetune import run_outputs
from kerasbert.training.loop import train
from kerasbert.training.run_record import TRAINING_OUTPUTS, RunRecord, RunRecordError, matching
from tests.ram_runs import RAM_ROOT, run_on_ram

VOCAB = os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt")
TEXT = demo.pretraining_corpus_files()[0]
PRETRAIN_FLAGS = [
    "--model=bert_tiny_uncased", "--model_dir={ram}/pretrain", f"--text_files={TEXT}",
    f"--vocab_file={VOCAB}",
    "--config_overrides=num_layers=2,hidden_size=32,num_heads=2,intermediate_size=64,"
    "max_positions=64",
    "--batch_size=8", "--max_seq_length=64", "--max_predictions_per_seq=8",
    "--learning_rate=1e-3", "--steps_per_loop=2", "--checkpoint_interval=2", "--train_steps=4"]
# Rows of each split of the shipped gloss classification set in the tiny task folder.
GLOSS_ROWS = {"train": 64, "dev": 32, "test": 16}


def succeeded(run):
    """Assert that the run ended well and used no `ram://` path as a local one."""
    assert run.returncode == 0, run.stderr[-3000:]
    assert not run.local_ram_folder_made
    return run


def names(folder):
    return set(os.listdir(folder))


def read_json(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A tiny pretraining run whose `--model_dir` was `ram://.../pretrain` (its local copy)."""
    run = succeeded(run_on_ram("pretrain", PRETRAIN_FLAGS, tmp_path_factory.mktemp("pretrain")))
    return run.path("pretrain")


@pytest.fixture(scope="module")
def task_data(tmp_path_factory):
    """A `--data_dir` of the gloss classification task: a few rows of each split."""
    data_dir = tmp_path_factory.mktemp("gloss_data")
    for split, path in demo.classification_files().items():
        with gzip.open(path, "rt", encoding="utf-8") as source:
            rows = source.read().splitlines()[:GLOSS_ROWS[split] + 1]
        with gzip.open(data_dir / os.path.basename(path), "wt", encoding="utf-8") as target:
            target.write("\n".join(rows) + "\n")
    return data_dir


def finetune_flags(task_data, model_dir, *flags):
    return ["--task=wordnet_gloss", f"--data_dir={task_data}", f"--model_dir={model_dir}",
            "--max_seq_length=32", "--train_batch_size=16", "--eval_batch_size=32",
            "--num_train_epochs=1", "--learning_rate=1e-3", *flags]


@pytest.fixture(scope="module")
def finetuned(pretrained, task_data, tmp_path_factory):
    """Two seeds fine-tuned from the pretraining run, read from and written to `ram://`."""
    run = succeeded(run_on_ram(
        "finetune", finetune_flags(task_data, "{ram}/finetune", "--init_from={ram}/pretrained",
                                   "--num_seeds=2"),
        tmp_path_factory.mktemp("finetune"), inputs={"pretrained": pretrained}))
    return run.path("finetune")


@pytest.mark.slow
def test_pretraining_writes_its_checkpoints_description_and_record_to_ram(pretrained):
    assert {"checkpoint", "ckpt-2.index", "ckpt-4.index", "kerasbert_model.json",
            "kerasbert_run.json", "train"} <= names(pretrained)
    assert any(name.startswith("events.out.tfevents.")
               for name in os.listdir(os.path.join(pretrained, "train")))
    record = read_json(os.path.join(pretrained, "kerasbert_run.json"))
    assert record["program"] == "kerasbert-pretrain" and record["flags"]["train_steps"] == 4
    assert read_json(os.path.join(pretrained, "kerasbert_model.json"))["heads"] == ["mlm", "nsp"]


@pytest.mark.slow
def test_pretraining_continues_a_run_on_ram(pretrained, tmp_path):
    """Rerun on its own earlier files (put back on ram://): the record matches, and the last
    checkpoint is restored from ram://."""
    run = succeeded(run_on_ram("pretrain", PRETRAIN_FLAGS, tmp_path,
                               inputs={"pretrain": pretrained}))
    assert f"Restored {RAM_ROOT}/pretrain/ckpt-4 at step 4" in run.stdout, run.stdout[-2000:]
    (tmp_path / "changed").mkdir()
    changed = run_on_ram("pretrain", PRETRAIN_FLAGS + ["--learning_rate=5e-4"],
                         tmp_path / "changed", inputs={"pretrain": pretrained})
    assert changed.returncode != 0 and "--learning_rate: recorded 0.001, given 0.0005" in \
        changed.stderr, changed.stderr[-2000:]


@pytest.mark.slow
def test_finetuning_writes_results_predictions_and_models_to_ram(finetuned):
    top = names(finetuned)
    assert {"eval_results.json", "dev_predictions.tsv", "model.keras", "kerasbert_run.json",
            "seed_0", "seed_1"} <= top, top
    for seed_dir in ("seed_0", "seed_1"):
        written = names(os.path.join(finetuned, seed_dir))
        assert {"eval_results.json", "eval_history.json", "dev_predictions.tsv", "model.keras",
                "test_predictions.tsv", "checkpoint", "train", "eval", "epochs"} <= written, written
        assert os.listdir(os.path.join(finetuned, seed_dir, "eval"))
    results = read_json(os.path.join(finetuned, "eval_results.json"))
    assert set(results["seeds"]) == {"0", "1"} and "accuracy" in results["seeds_summary"]
    with open(os.path.join(finetuned, "dev_predictions.tsv"), encoding="utf-8") as file:
        lines = file.read().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == GLOSS_ROWS["dev"] + 1
    model = keras.models.load_model(os.path.join(finetuned, "model.keras"))
    assert model.task == "sequence_classification"


@pytest.mark.slow
def test_task_distillation_reads_its_teacher_from_ram(finetuned, task_data, tmp_path):
    run = succeeded(run_on_ram(
        "finetune", finetune_flags(task_data, "{ram}/student", "--teacher={ram}/teacher",
                                   "--student_layers=1", f"--vocab_file={VOCAB}"),
        tmp_path, inputs={"teacher": os.path.join(finetuned, "seed_0")}))
    student = run.path("student")
    assert {"eval_results.json", "dev_predictions.tsv", "model.keras"} <= names(student)
    assert keras.models.load_model(os.path.join(student, "model.keras")).encoder.config \
        .num_layers == 1


@pytest.mark.slow
def test_pretraining_distillation_reads_its_teacher_from_and_writes_its_student_to_ram(
        pretrained, tmp_path):
    run = succeeded(run_on_ram(
        "distill", ["--teacher={ram}/teacher", "--model_dir={ram}/distill",
                    f"--text_files={TEXT}", "--student_layers=1", "--max_seq_length=32",
                    "--max_predictions_per_seq=4", "--batch_size=4", "--train_steps=2",
                    "--steps_per_loop=1", "--checkpoint_interval=2"],
        tmp_path, inputs={"teacher": pretrained}))
    distilled = run.path("distill")
    assert {"student.keras", "kerasbert_model.json", "kerasbert_run.json", "checkpoint",
            "ckpt-2.index"} <= names(distilled)
    # The tokenizer is the teacher's, found in its kerasbert_model.json on ram://.
    assert read_json(os.path.join(distilled, "kerasbert_model.json"))["tokenizer"] == \
        read_json(os.path.join(pretrained, "kerasbert_model.json"))["tokenizer"]


@pytest.mark.slow
def test_feature_extraction_writes_its_json_lines_to_ram(pretrained, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("the quick brown fox\nwho wrote it ||| guido did\n", encoding="utf-8")
    run = succeeded(run_on_ram(
        "extract-features", [f"--model={pretrained}", f"--input_file={texts}",
                             "--output_file={ram}/features/features.jsonl", "--layers=-1"],
        tmp_path))
    with open(run.path("features", "features.jsonl"), encoding="utf-8") as file:
        records = [json.loads(line) for line in file]
    assert [record["linex_index"] for record in records] == [0, 1]


# In this process: resuming, the run record and the main job's folder on ram://.

@pytest.fixture
def ram_folder(monkeypatch, tmp_path):
    """A fresh `ram://` folder; the working folder is an empty local one, checked afterwards
    for a `ram:` folder."""
    monkeypatch.chdir(tmp_path)
    folder = f"ram://remote-paths-{uuid.uuid4().hex}"
    yield folder
    file_system.rmtree(folder)
    assert not os.path.exists(tmp_path / "ram:")


def tiny_training(model_dir, steps, messages):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensors((np.ones((4, 3), np.float32),
                                         np.ones((4, 1), np.float32))).repeat()
    return train(model, strategy, lambda context: data, model_dir, steps, steps_per_loop=1,
                 checkpoint_interval=2, progress=False, log=messages.append)


def test_training_resumes_from_a_checkpoint_on_ram(ram_folder):
    model_dir = file_system.join(ram_folder, "run")
    first, second = [], []
    tiny_training(model_dir, 2, first)
    assert not any(message.startswith("Restored") for message in first)
    assert {"checkpoint", "ckpt-2.index", "train"} <= set(file_system.listdir(model_dir))
    logs = tiny_training(model_dir, 4, second)
    assert f"Restored {model_dir}/ckpt-2 at step 2" in second, second
    assert logs["step"] == 4 and "ckpt-4.index" in file_system.listdir(model_dir)


def test_run_record_on_ram_refuses_other_values_and_overwrite_removes_the_run(ram_folder):
    model_dir = file_system.join(ram_folder, "run")
    outputs = matching(*TRAINING_OUTPUTS)
    record = RunRecord(model_dir, "kerasbert-pretrain", {"batch_size": 32}, outputs)
    record.check()
    record.start({"hidden_size": 32}, log=lambda message: None)
    for name in ("ckpt-2.index", "ckpt-2.data-00000-of-00001", "train/events.out.tfevents.1"):
        file_system.makedirs(file_system.dirname(file_system.join(model_dir, name)))
        with file_system.open_file(file_system.join(model_dir, name), "w") as file:
            file.write("x")
    with pytest.raises(RunRecordError, match="--batch_size: recorded 32, given 64"):
        RunRecord(model_dir, "kerasbert-pretrain", {"batch_size": 64}, outputs).check()
    messages = []
    removed = RunRecord(model_dir, "kerasbert-pretrain", {"batch_size": 64}, outputs,
                        overwrite=True).start({"hidden_size": 32}, log=messages.append)
    assert sorted(file_system.basename(path) for path in removed) == [
        "ckpt-2.data-00000-of-00001", "ckpt-2.index", "kerasbert_run.json", "train"]
    assert "(ckpt-2.data-00000-of-00001, ckpt-2.index, kerasbert_run.json, train)" in messages[0]
    assert file_system.listdir(model_dir) == ["kerasbert_run.json"]
    assert json.loads(file_system.read_text(file_system.join(model_dir, "kerasbert_run.json")))[
        "flags"] == {"batch_size": 64}


def test_run_outputs_lists_a_finetuning_run_on_ram(ram_folder):
    model_dir = file_system.join(ram_folder, "run")
    for name in ("notes.txt", "eval_history.json", "epochs/epoch_1/dev_predictions.tsv",
                 "dev_predictions.tsv", "seed_3/model.keras"):
        file_system.makedirs(file_system.dirname(file_system.join(model_dir, name)))
        with file_system.open_file(file_system.join(model_dir, name), "w") as file:
            file.write("x")
    assert run_outputs(model_dir) == [file_system.join(model_dir, name) for name in (
        "dev_predictions.tsv", "epochs", "eval_history.json", "seed_3")]


STAGE_SCRIPT = """import os, sys
print(open(sys.argv[1].split("=", 1)[1]).read().strip())
marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "failed-once")
if not os.path.exists(marker):
    open(marker, "w").close()
    print("kerasbert-greet: error: the first try fails", file=sys.stderr)
    sys.exit(1)
"""


def test_demo_pipeline_run_folder_on_ram(ram_folder, tmp_path, monkeypatch):
    """The main job's run folder on a remote file system: found again to continue, a stage run
    from its flagfile there (failing once, then continued), its log appended to, its curves
    drawn from the logs there. (The whole job cannot run on ram://: each stage is a process of
    its own.)"""
    runs = file_system.join(ram_folder, "runs")
    run_dir = runner.choose_run_dir(runs, quick=True)
    assert run_dir.startswith(runs + "/")
    file_system.makedirs(run_dir)
    runner.start_run(run_dir, quick=True)
    assert runner.choose_run_dir(runs, quick=True) == run_dir
    assert runner.read_run(run_dir)[0] is True

    script = tmp_path / "scripts" / "kerasbert-greet"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\n{STAGE_SCRIPT}")
    script.chmod(0o755)
    monkeypatch.setattr(runner, "console_script", lambda name: str(script.parent / name))
    stage = Stage("greet", "Greet", "kerasbert-greet", {"greeting": "hello"}, "greet", False,
                  lambda run_dir: ("said hello", {"said": "hello"}))
    with pytest.raises(runner.StageError, match="kerasbert-greet: error: the first try fails"):
        runner.run_stage(stage, run_dir)
    result = runner.run_stage(stage, run_dir)
    assert (result["metric"], result["values"]) == ("said hello", {"said": "hello"})
    assert runner.run_stage(stage, run_dir)["reused"]
    log = file_system.read_text(file_system.join(run_dir, runner.LOGS_DIR, "greet.log"))
    assert log.count("--greeting=hello\n") == 2 and log.count("the first try fails") == 1
    assert file_system.read_text(file_system.join(run_dir, runner.FLAGS_DIR, "greet.flags")) \
        == "--greeting=hello\n"

    for folder, tag in (("pretrain/train", "loss"), ("finetune_pretrained/eval", "accuracy")):
        with tf.summary.create_file_writer(file_system.join(run_dir, folder)).as_default():
            for step in (1, 2):
                tf.summary.write(tag, 1.0 / step, step=step)
    curves = draw_curves(run_dir, file_system.join(run_dir, runner.CURVES_FILE))
    assert file_system.read_bytes(curves).startswith(b"\x89PNG")
