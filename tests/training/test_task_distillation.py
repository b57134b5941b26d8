"""Task distillation (`TaskDistiller`, `kerasbert-finetune --teacher`): the loss of every head
against PyTorch on the same logits, a frozen teacher, `MirroredStrategy`, resuming, the command
line end to end, and the errors. The binaries run in this process (`tests.binaries.run_binary`),
except the run that is killed: `kerasbert-distill --task` in a process of its own (it hands the
run to `kerasbert-finetune` by replacing its process), rerun in this one as the
`kerasbert-finetune` run it is."""

import gzip
import hashlib
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch
import torch.nn.functional as F

import kerasbert
from kerasbert.data import demo
from kerasbert.models import IGNORED_LABEL
from kerasbert.training.distillation.task import TaskDistiller, check_teacher
from kerasbert.training.distribute import get_strategy
from kerasbert.training.finetune import load_task_teacher
from kerasbert.training.loop import train
from tests.binaries import run_binary
from tests.helpers import TINY_CONFIGS, hf_config, random_inputs, save_hf_model

pytestmark = pytest.mark.slow

NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0}
TEMPERATURE, ALPHA = 3.0, 0.3
# (task, num_labels, teacher family, student family): teachers and students of other families.
HEADS = [
    ("sequence_classification", 3, "roberta", "bert"),
    ("sequence_classification", 1, "bert", "electra"),  # regression
    ("token_classification", 4, "electra", "roberta"),
    ("question_answering", None, "albert", "bert"),
    ("multiple_choice", None, "bert", "albert"),
]


def tiny_task_model(family, task, num_labels, student=False):
    """A tiny task model without dropout; a `student` has fewer layers (ALBERT: 2 of 4)."""
    config = TINY_CONFIGS[family].replace(**NO_DROPOUT)
    if student:
        config = config.replace(num_layers=2 if family == "albert" else 1)
    return kerasbert.models.build_task_model(config, task, num_labels=num_labels)


def task_batch(task, num_labels, batch=4, seq=10, choices=3):
    """A batch dict of the task, on inputs every tiny config accepts (RoBERTa's: one segment)."""
    rng = np.random.default_rng(1)
    if task == "multiple_choice":
        flat = random_inputs(TINY_CONFIGS["roberta"], batch=batch * choices, seq=seq)
        inputs = {name: value.reshape(batch, choices, seq) for name, value in flat.items()}
        return {**inputs, "labels": rng.integers(0, choices, batch).astype("int32")}
    inputs = random_inputs(TINY_CONFIGS["roberta"], batch=batch, seq=seq)
    if task == "question_answering":
        return {**inputs, "start_positions": rng.integers(0, seq, batch).astype("int32"),
                "end_positions": rng.integers(0, seq, batch).astype("int32")}
    if task == "token_classification":
        labels = rng.integers(0, num_labels, (batch, seq)).astype("int32")
        labels[:, 0] = IGNORED_LABEL  # [CLS], as the data pipeline labels it
        labels[inputs["padding_mask"] == 0] = IGNORED_LABEL
        return {**inputs, "labels": labels}
    if num_labels == 1:
        return {**inputs, "labels": rng.normal(size=batch).astype("float32")}
    return {**inputs, "labels": rng.integers(0, num_labels, batch).astype("int32")}


def torch_losses(task, num_labels, teacher, student, batch, temperature):
    """(soft, hard) from PyTorch on the teacher's and the student's logits (numpy dicts)."""
    t = {name: torch.tensor(np.asarray(value)) for name, value in teacher.items()}
    s = {name: torch.tensor(np.asarray(value)) for name, value in student.items()}

    def soft_cross_entropy(teacher_logits, student_logits):  # mean over the rows
        return temperature ** 2 * F.cross_entropy(student_logits / temperature,
                                                  F.softmax(teacher_logits / temperature, -1))

    if task == "question_answering":
        start, end = (torch.tensor(batch[name]).long() for name in ("start_positions",
                                                                   "end_positions"))
        soft = (soft_cross_entropy(t["start_logits"], s["start_logits"]) +
                soft_cross_entropy(t["end_logits"], s["end_logits"])) / 2
        hard = (F.cross_entropy(s["start_logits"], start) + F.cross_entropy(s["end_logits"],
                                                                            end)) / 2
        return float(soft), float(hard)
    labels = torch.tensor(batch["labels"])
    if num_labels == 1:
        return (float(F.mse_loss(s["logits"], t["logits"])),
                float(F.mse_loss(s["logits"][:, 0], labels)))
    if task == "token_classification":
        student_logits = s["logits"].reshape(-1, num_labels)
        targets = F.softmax(t["logits"].reshape(-1, num_labels) / temperature, -1)
        per_token = temperature ** 2 * F.cross_entropy(student_logits / temperature, targets,
                                                       reduction="none")
        labelled = (labels.reshape(-1) != IGNORED_LABEL).float()
        return (float((per_token * labelled).sum() / labelled.sum()),
                float(F.cross_entropy(student_logits, labels.reshape(-1).long(),
                                      ignore_index=IGNORED_LABEL)))
    return (float(soft_cross_entropy(t["logits"], s["logits"])),
            float(F.cross_entropy(s["logits"], labels.long())))


@pytest.mark.parametrize("task, num_labels, teacher_family, student_family", HEADS)
def test_loss_equals_pytorch_on_the_same_logits(task, num_labels, teacher_family,
                                                student_family):
    teacher = tiny_task_model(teacher_family, task, num_labels)
    student = tiny_task_model(student_family, task, num_labels, student=True)
    distiller = TaskDistiller(teacher, student, temperature=TEMPERATURE, alpha=ALPHA)
    distiller.compile(optimizer="sgd")
    batch = task_batch(task, num_labels)
    inputs, labels, *weights = distiller.split_batch(batch)
    outputs = distiller(inputs)
    loss = distiller.compute_loss(inputs, labels, outputs, weights[0] if weights else None)
    soft, hard = torch_losses(task, num_labels, teacher(inputs), student(inputs), batch,
                              TEMPERATURE)
    assert float(distiller.soft_loss_tracker.result()) == pytest.approx(soft, rel=1e-5)
    assert float(distiller.hard_loss_tracker.result()) == pytest.approx(hard, rel=1e-5)
    assert float(loss) == pytest.approx(ALPHA * soft + (1 - ALPHA) * hard, rel=1e-5)
    # The distiller's outputs are the student's.
    for name, value in outputs.items():
        np.testing.assert_array_equal(value, student(inputs)[name])


def _distiller(strategy, initial):
    """A distiller of a 1-layer ELECTRA student and a 1-layer BERT teacher with `initial` weights,
    compiled with SGD, under `strategy`."""
    with strategy.scope():
        teacher = tiny_task_model("bert", "sequence_classification", 3, student=True)
        student = tiny_task_model("electra", "sequence_classification", 3, student=True)
        teacher.set_weights(initial["teacher"])
        student.set_weights(initial["student"])
        distiller = TaskDistiller(teacher, student, temperature=2.0, alpha=0.7)
        distiller.compile(optimizer=keras.optimizers.SGD(0.5))
    return distiller


def test_training_moves_only_the_student_alike_on_two_replicas_and_after_a_restart(tmp_path):
    """`kerasbert.training.loop.train` stopped at a checkpoint, restarted as a new process would
    be and continued under `MirroredStrategy` (two replicas, half of each batch each) ends with
    the student weights of an uninterrupted run on one device; the teacher never changes. (The
    checkpoint holds the student, its optimizer, the data position and the teacher's copy.)"""
    initial = {role: tiny_task_model(family, "sequence_classification", 3,
                                     student=True).get_weights()
               for role, family in (("teacher", "bert"), ("student", "electra"))}
    # Four different batches of 8, in turn: a resumed run must also resume the data position.
    batches = tf.data.Dataset.from_tensor_slices(
        task_batch("sequence_classification", 3, batch=32)).batch(8).repeat()
    logged = []

    def run_to(strategy, steps, model_dir):
        # As a new process: dropout seed states are named (and checkpointed) in creation order.
        keras.backend.clear_session()
        distiller = _distiller(strategy, initial)
        assert {id(weight) for weight in distiller.trainable_weights} == {
            id(weight) for weight in distiller.student.trainable_weights}
        assert all(weight.path.startswith("teacher/") for weight in distiller.teacher.weights)
        train(distiller, strategy, lambda context: batches, str(model_dir), steps,
              steps_per_loop=1, checkpoint_interval=2, progress=False, log=logged.append)
        for weight, start in zip(distiller.teacher.weights, initial["teacher"]):
            np.testing.assert_array_equal(weight.numpy(), start)
        return distiller.student

    one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored = get_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
    assert mirrored.num_replicas_in_sync == 2
    run_to(one_device, 2, tmp_path / "restarted")
    resumed = run_to(mirrored, 5, tmp_path / "restarted")
    assert logged == [f"Restored {tmp_path / 'restarted' / 'ckpt-2'} at step 2"]
    uninterrupted = run_to(one_device, 5, tmp_path / "uninterrupted")
    for ours, theirs in zip(resumed.weights, uninterrupted.weights):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=2e-6,
                                   err_msg=ours.path)
    # Every student weight moved, but the key biases: they add a constant to each query's
    # scores, which the softmax ignores (no gradient).
    for weight, start in zip(uninterrupted.weights, initial["student"]):
        assert weight.path.endswith("key/bias") or np.max(np.abs(weight.numpy() - start)) > 0, (
            weight.path)


def test_config_round_trip_and_argument_errors():
    teacher = tiny_task_model("bert", "sequence_classification", 3)
    student = tiny_task_model("bert", "sequence_classification", 3, student=True)
    distiller = TaskDistiller(teacher, student, temperature=4.0, alpha=0.25)
    restored = TaskDistiller.from_config(distiller.get_config())
    assert (restored.temperature, restored.alpha) == (4.0, 0.25)
    assert restored.student.get_config() == student.get_config()
    assert not restored.teacher.trainable and restored.teacher.num_labels == 3
    with pytest.raises(ValueError, match="teacher is a question_answering model but the "
                                         "student a sequence_classification"):
        TaskDistiller(tiny_task_model("bert", "question_answering", None), student)
    with pytest.raises(ValueError, match=r"teacher's labels \(2: LABEL_0, LABEL_1\) differ"):
        TaskDistiller(tiny_task_model("bert", "sequence_classification", 2), student)
    with pytest.raises(TypeError, match="teacher must be a kerasbert TaskModel"):
        TaskDistiller(teacher.encoder, student)
    with pytest.raises(ValueError, match="temperature must be a positive number, got 0"):
        TaskDistiller(teacher, student, temperature=0)
    with pytest.raises(ValueError, match=r"alpha .* must be in \[0, 1\], got 1.5"):
        TaskDistiller(teacher, student, alpha=1.5)


def test_teacher_sources_and_their_errors(tmp_path):
    """A Hugging Face task folder, a .keras file and a run directory load; anything else, and
    a teacher of another task or other labels, is a `ValueError` naming the path."""
    hf_dir = tmp_path / "hf"
    save_hf_model("BertForSequenceClassification",
                  hf_config("bert", num_labels=2, id2label={0: "no", 1: "yes"},
                            label2id={"no": 0, "yes": 1}), hf_dir)
    teacher = load_task_teacher(hf_dir)
    assert teacher.task == "sequence_classification" and teacher.id2label == {0: "no", 1: "yes"}
    check_teacher(teacher, "sequence_classification", ["no", "yes"], str(hf_dir), "rte")
    with pytest.raises(ValueError, match=rf"--teacher {hf_dir} predicts the labels \(2: no, "
                                         r"yes\), but mnli has \(3: a, b, c\)"):
        check_teacher(teacher, "sequence_classification", ["a", "b", "c"], str(hf_dir), "mnli")
    with pytest.raises(ValueError, match=rf"--teacher {hf_dir} is a sequence_classification "
                                         "model, but conll2003 needs a token_classification"):
        check_teacher(teacher, "token_classification", ["no", "yes"], str(hf_dir), "conll2003")
    # Regression: the one output's name does not matter; span and choice heads have no labels.
    check_teacher(tiny_task_model("bert", "sequence_classification", 1),
                  "sequence_classification", None, "t")
    check_teacher(tiny_task_model("bert", "question_answering", None), "question_answering",
                  None, "t")
    with pytest.raises(ValueError, match=r"predicts the labels \(3: LABEL_0, LABEL_1, LABEL_2\), "
                                         r"but stsb has \(none: regression\)"):
        check_teacher(tiny_task_model("bert", "sequence_classification", 3),
                      "sequence_classification", None, "t", "stsb")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    teacher.save(run_dir / "model.keras")
    assert load_task_teacher(run_dir).id2label == teacher.id2label
    assert load_task_teacher(run_dir / "model.keras").id2label == teacher.id2label
    teacher.encoder.save(tmp_path / "encoder.keras")
    with pytest.raises(ValueError, match=r"encoder.keras: a Encoder, not a fine-tuned task"):
        load_task_teacher(tmp_path / "encoder.keras")
    with pytest.raises(ValueError, match=rf"--teacher {tmp_path}: not a .keras file"):
        load_task_teacher(tmp_path)


# === kerasbert-finetune --teacher on a slice of the shipped WordNet gloss set ===

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
VOCAB = os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt")
SIZES = {"train": 96, "dev": 64}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Training and dev gloss files under their official names, a teacher (2 layers, the 45
    gloss labels) as `.keras` and in a run directory, and a student encoder (1 layer)."""
    root = tmp_path_factory.mktemp("task_distillation")
    (root / "data").mkdir()
    for split, path in demo.classification_files().items():
        if split not in SIZES:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as file:
            rows = file.read().splitlines()[:SIZES[split] + 1]
        with gzip.open(root / "data" / os.path.basename(path), "wt", encoding="utf-8") as file:
            file.write("\n".join(rows) + "\n")
    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(
        vocab_size=len(open(VOCAB, encoding="utf-8").readlines()), num_layers=2, hidden_size=32,
        num_heads=2, intermediate_size=64, max_positions=32)
    labels = demo.classification_labels()
    teacher = kerasbert.models.build_task_model(config, "sequence_classification",
                                                num_labels=len(labels), id2label=labels)
    teacher.save(root / "teacher.keras")
    (root / "teacher_run").mkdir()
    teacher.save(root / "teacher_run" / "model.keras")
    kerasbert.models.build_encoder(config.replace(num_layers=1)).save(root / "student.keras")
    return root


def finetune_command(workspace, model_dir, *flags):
    """`kerasbert-finetune`'s flags."""
    return ["--task=wordnet_gloss", f"--data_dir={workspace / 'data'}", f"--vocab_file={VOCAB}",
            f"--model_dir={model_dir}", "--max_seq_length=32", "--train_batch_size=32",
            "--eval_batch_size=64", "--num_train_epochs=1", "--learning_rate=1e-3", *flags]


def run(flags):
    """`kerasbert-finetune` with `flags`, in this process."""
    return run_binary("finetune", *flags)


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def distill_command(workspace, model_dir):
    """The flags of `kerasbert-distill --task` (a fine-tuning run with a teacher, which is what
    `kerasbert-finetune` runs with the same flags): the teacher from a run directory, a student
    of 1 of its 2 layers, 2 epochs of 12 steps, a checkpoint every 2."""
    return finetune_command(
        workspace, model_dir, f"--teacher={workspace / 'teacher_run'}", "--student_layers=1",
        "--temperature=3", "--distill_alpha=0.8", "--num_train_epochs=2", "--train_batch_size=8",
        "--checkpoint_interval=2")


@pytest.fixture(scope="module")
def distilled(workspace, tmp_path_factory):
    """One uninterrupted `distill_command` run, shared by the tests of what it writes and of
    resuming: (its model directory, its completed process, the teacher file's digest before)."""
    before = digest(workspace / "teacher_run" / "model.keras")
    model_dir = tmp_path_factory.mktemp("distilled")
    return model_dir, run(distill_command(workspace, model_dir)), before


def test_cli_distils_into_a_student_of_teacher_layers(workspace, distilled):
    """A teacher from a run directory; a student of 1 of its 2 layers (the last), its
    embeddings and head; written as a fine-tuning run writes its model."""
    model_dir, result, before = distilled
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Distilled from the teacher" in result.stdout and "soft_loss" in result.stdout
    for name in ("eval_results.json", "eval_history.json", "dev_predictions.tsv", "model.keras",
                 "checkpoint"):
        assert (model_dir / name).is_file(), name
    student = keras.models.load_model(model_dir / "model.keras")
    teacher = keras.models.load_model(workspace / "teacher_run" / "model.keras")
    assert isinstance(student, kerasbert.models.TaskModel)
    assert student.encoder.config == teacher.encoder.config.replace(num_layers=1)
    assert student.id2label == teacher.id2label
    # 24 steps at up to 1e-3 from the teacher's weights stay within 0.02 of them (Adam moves a
    # weight by about the learning rate per step at most; measured 0.0101 with length-grouped
    # batches, under 0.01 before); two random initialisations are ~0.1 apart.
    for name in ("embeddings", "transformer_layer_0", "classifier"):
        for ours, theirs in zip(student.get_layer(name).weights,
                                teacher.get_layer(name if name != "transformer_layer_0" else
                                                  "transformer_layer_1").weights):
            assert np.max(np.abs(ours.numpy() - theirs.numpy())) < 0.02, ours.path
    assert digest(workspace / "teacher_run" / "model.keras") == before


def _checkpoint(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name, dtype in
            reader.get_variable_to_dtype_map().items() if dtype.is_floating or dtype.is_integer}


def test_kerasbert_distill_task_resumes_bit_for_bit(workspace, distilled, tmp_path):
    """`kerasbert-distill --task` killed (SIGKILL) in its first epoch and rerun ends with the
    uninterrupted run's (`distilled`) checkpoint and result files."""
    whole, finished, _ = distilled
    assert finished.returncode == 0, finished.stderr[-3000:]
    killed = tmp_path / "killed"
    process = subprocess.Popen(
        [sys.executable, "-m", "kerasbert.cli.distill", *distill_command(workspace, killed)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    while process.poll() is None and not (killed / "ckpt-4.index").exists():
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "eval_history.json").exists(), "killed after the first evaluation"
    result = run(distill_command(workspace, killed))
    assert result.returncode == 0 and "Restored" in result.stdout, result.stderr[-3000:]
    steps = 2 * SIZES["train"] // 8
    ours, theirs = (_checkpoint(folder / f"ckpt-{steps}") for folder in (killed, whole))
    assert ours.keys() == theirs.keys() and len(ours) > 50
    for name in theirs:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    for name in ("eval_history.json", "eval_results.json", "dev_predictions.tsv"):
        assert (killed / name).read_bytes() == (whole / name).read_bytes(), name


def test_cli_errors_are_one_line(workspace, tmp_path):
    labels = demo.classification_labels()
    wrong = kerasbert.models.build_task_model(
        keras.models.load_model(workspace / "teacher.keras").encoder, "sequence_classification",
        num_labels=len(labels), id2label=labels[1:] + labels[:1])
    wrong.save(tmp_path / "wrong.keras")
    result = run(finetune_command(workspace, tmp_path / "run", f"--teacher={tmp_path}/wrong.keras",
                                  f"--init_from={workspace / 'student.keras'}"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "kerasbert-finetune" in line]
    assert len(lines) == 1
    assert f"--teacher {tmp_path}/wrong.keras predicts the labels (45: {labels[1]}," in lines[0]
    assert f"but wordnet_gloss has (45: {labels[0]}," in lines[0]
