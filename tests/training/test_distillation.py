"""Pretraining distillation: the losses against PyTorch's, students initialized from their
teachers (BERT, RoBERTa, ALBERT groups, ELECTRA with another embedding size), and the distiller
training every family's student with the teacher frozen, on one device and mirrored."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch
import torch.nn.functional as F

import kerasbert
from kerasbert.models import ElectraPretrainer, PretrainingModel, build_encoder, generator_config
from kerasbert.training.distillation import (PretrainingDistiller, binary_soft_target_cross_entropy,
                                             copy_encoder_weights, default_layer_map,
                                             hidden_cosine_loss, load_teacher, masked_lm_teacher,
                                             soft_target_cross_entropy, student_encoder,
                                             student_pretraining_model, student_task_model)
from kerasbert.training.distribute import get_strategy
from kerasbert.training.loop import model_variables
from kerasbert.training.pretrained_sources import PRETRAINED_MODEL_FILE, pretraining_description
from tests.helpers import TINY_CONFIGS, hf_config, hf_outputs, random_inputs, save_hf_model

# One worker builds the shared teachers once and runs every test of the module (~50 s).
pytestmark = pytest.mark.slow

TEACHER_LAYERS, SEQ, PREDICTIONS = 4, 16, 4
# 4-layer teachers (ALBERT: 2 groups of 2 layers, each applied once). Weights 10x the usual
# initial scale give a teacher peaked MLM distributions, as a trained one has.
TEACHER_CONFIGS = {family: config.replace(num_layers=2 if family == "albert" else TEACHER_LAYERS,
                                          initializer_range=0.2)
                   for family, config in TINY_CONFIGS.items()}
TEACHER_HEADS = {"bert": ("mlm", "nsp"), "roberta": ("mlm",), "albert": ("mlm", "sop"),
                 "modernbert": ("mlm",)}


def _batch(config, batch=4, seed=0):
    """A masked-LM batch: encoder inputs, distinct positions inside the real tokens, random
    targets."""
    rng = np.random.default_rng(seed)
    inputs = random_inputs(config, batch=batch, seq=SEQ, seed=seed)
    positions = np.stack([rng.choice(length, PREDICTIONS, replace=False)
                          for length in inputs["padding_mask"].sum(1)]).astype("int32")
    return {**inputs, "masked_lm_positions": positions,
            "masked_lm_ids": rng.integers(5, config.vocab_size, (batch, PREDICTIONS)).astype(
                "int32"),
            "masked_lm_weights": np.ones((batch, PREDICTIONS), "float32")}


def _values(model):
    return [np.array(weight) for weight in model.weights]


@pytest.fixture(scope="module")
def electra_hf_dir(tmp_path_factory):
    """A 4-layer `transformers` ElectraForMaskedLM (ELECTRA's generator) and its folder."""
    directory = tmp_path_factory.mktemp("electra_generator")
    model = save_hf_model("ElectraForMaskedLM", hf_config(
        "electra", num_hidden_layers=TEACHER_LAYERS), directory)
    return directory, model


@pytest.fixture(scope="module")
def teachers(electra_hf_dir):
    keras.utils.set_random_seed(0)
    built = {family: PretrainingModel(build_encoder(TEACHER_CONFIGS[family]), heads)
             for family, heads in TEACHER_HEADS.items()}
    built["electra"], _ = load_teacher(electra_hf_dir[0])
    return built


# --- losses, against PyTorch ------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.5])
def test_soft_target_cross_entropy_matches_torch(temperature):
    rng = np.random.default_rng(1)
    teacher = rng.normal(0, 3, (3, 5, 120)).astype("float32")
    student = rng.normal(0, 3, (3, 5, 120)).astype("float32")
    ours = np.asarray(soft_target_cross_entropy(teacher, student, temperature))

    teacher_t, student_t = torch.tensor(teacher), torch.tensor(student, requires_grad=True)
    targets = F.softmax(teacher_t / temperature, -1)
    # Cross-entropy with probability targets (classes on axis 1, as torch wants them).
    expected = temperature ** 2 * F.cross_entropy(
        (student_t / temperature).permute(0, 2, 1), targets.permute(0, 2, 1), reduction="none")
    assert ours.shape == (3, 5)
    np.testing.assert_allclose(ours, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    # DistilBERT's KL form differs by the teacher's entropy only.
    kl = F.kl_div(F.log_softmax(student_t / temperature, -1), targets, reduction="none").sum(-1)
    entropy = -(targets * torch.log(targets)).sum(-1)
    np.testing.assert_allclose(ours, (temperature ** 2 * (kl + entropy)).detach().numpy(),
                               rtol=1e-5, atol=1e-4)
    # The gradient with respect to the student is the same too.
    expected.sum().backward()
    student_tf = tf.constant(student)
    with tf.GradientTape() as tape:
        tape.watch(student_tf)
        total = tf.reduce_sum(soft_target_cross_entropy(teacher, student_tf, temperature))
    np.testing.assert_allclose(tape.gradient(total, student_tf), student_t.grad.numpy(),
                               atol=1e-6)


def test_soft_target_cross_entropy_sums_over_the_given_axis():
    rng = np.random.default_rng(2)
    teacher, student = rng.normal(size=(2, 7, 3)), rng.normal(size=(2, 7, 3))
    expected = 4.0 * F.cross_entropy(torch.tensor(student) / 2.0,
                                     F.softmax(torch.tensor(teacher) / 2.0, 1), reduction="none")
    np.testing.assert_allclose(soft_target_cross_entropy(teacher, student, 2.0, axis=1),
                               expected.numpy(), rtol=1e-5)


def test_binary_soft_target_cross_entropy_matches_torch():
    rng = np.random.default_rng(3)
    teacher, student = rng.normal(0, 4, (4, 9)), rng.normal(0, 4, (4, 9))
    expected = 9.0 * F.binary_cross_entropy_with_logits(
        torch.tensor(student) / 3.0, torch.sigmoid(torch.tensor(teacher) / 3.0),
        reduction="none")
    np.testing.assert_allclose(binary_soft_target_cross_entropy(teacher, student, 3.0),
                               expected.numpy(), rtol=1e-5, atol=1e-6)


def test_hidden_cosine_loss_matches_torch_cosine_embedding_loss():
    rng = np.random.default_rng(4)
    teacher = rng.normal(size=(3, 11, 32)).astype("float32")
    student = rng.normal(size=(3, 11, 32)).astype("float32")
    mask = (np.arange(11)[None] < np.array([[11], [6], [2]])).astype("int32")
    # As transformers' research distiller: the unmasked rows, target +1.
    selected = torch.tensor(mask, dtype=torch.bool)
    rows_t, rows_s = torch.tensor(teacher)[selected], torch.tensor(student)[selected]
    expected = torch.nn.CosineEmbeddingLoss(reduction="mean")(rows_s, rows_t,
                                                              torch.ones(len(rows_t)))
    np.testing.assert_allclose(float(hidden_cosine_loss(teacher, student, mask)),
                               expected.item(), rtol=1e-5)


def test_losses_reject_what_they_cannot_compute():
    with pytest.raises(ValueError, match="temperature must be positive, got 0"):
        soft_target_cross_entropy(np.zeros((1, 3)), np.zeros((1, 3)), 0)
    with pytest.raises(ValueError, match="teacher's 32 and the student's 16"):
        hidden_cosine_loss(np.zeros((1, 2, 32)), np.zeros((1, 2, 16)), np.ones((1, 2)))


# --- students -----------------------------------------------------------------------------------

def test_default_layer_map_is_distilberts_for_12_to_6():
    # transformers' examples/research_projects/distillation/scripts/extract_distilbert.py
    assert default_layer_map(12, 6) == (0, 2, 4, 7, 9, 11)
    assert default_layer_map(4, 2) == (0, 3) and default_layer_map(4, 4) == (0, 1, 2, 3)
    with pytest.raises(ValueError, match="student of 5 layers .* teacher of 4"):
        default_layer_map(4, 5)


@pytest.mark.parametrize("layer_map", [None, [2, 1]])
def test_student_copies_the_mapped_layers_embeddings_and_head(teachers, layer_map):
    teacher = teachers["bert"]
    student = student_pretraining_model(teacher, layer_map=layer_map)
    taken = layer_map or default_layer_map(TEACHER_LAYERS, 2)
    assert student.encoder.config.num_layers == 2 and student.encoder.config.hidden_size == 32
    for index, teacher_index in enumerate(taken):
        for ours, theirs in zip(student.encoder.transformer_layers[index].weights,
                                teacher.encoder.transformer_layers[teacher_index].weights):
            np.testing.assert_array_equal(ours, theirs)
    for ours, theirs in zip(
            student.encoder.embeddings.weights + student.head_layers["mlm"].weights,
            teacher.encoder.embeddings.weights + teacher.head_layers["mlm"].weights):
        assert ours is not theirs
        np.testing.assert_array_equal(ours, theirs)
    # The MLM head reads no pooler: the student has none (fine-tuning adds one).
    assert student.encoder.pooler is None


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra", "modernbert"])
def test_student_with_every_layer_is_the_teacher(teachers, family):
    teacher = teachers[family]
    layers = TEACHER_CONFIGS[family].num_layers
    blocks = TEACHER_CONFIGS["albert"].num_hidden_groups if family == "albert" else layers
    student = student_pretraining_model(teacher, layers, list(range(blocks)))
    assert student.encoder.config == teacher.encoder.config.replace(use_pooler=False)
    batch = _batch(teacher.encoder.config)
    inputs = {name: batch[name] for name in student.input}
    np.testing.assert_array_equal(student(inputs)["mlm_logits"], teacher(inputs)["mlm_logits"])


def test_albert_student_copies_whole_groups(teachers):
    # 4 applications of 2 groups of 2 layers -> 2 applications: both groups, each applied once.
    teacher = build_encoder(TINY_CONFIGS["albert"].replace(num_layers=4))
    assert teacher.config.layer_schedule == (0, 1, 0, 1, 2, 3, 2, 3)
    student = student_encoder(teacher)
    assert (student.config.num_hidden_groups, student.config.inner_group_num) == (2, 2)
    assert student.config.layer_schedule == (0, 1, 2, 3)
    for ours, theirs in zip(student.weights, teacher.weights):
        np.testing.assert_array_equal(ours, theirs)
    # One application: one group, by default the teacher's last one (its layers 2 and 3).
    student = student_encoder(teacher, num_layers=1)
    assert student.config.num_hidden_groups == 1 and student.config.layer_schedule == (0, 1)
    copied = copy_encoder_weights(teacher, student)
    assert copied["transformer_layer_0"] == "transformer_layer_2"
    assert copied["transformer_layer_1"] == "transformer_layer_3"
    np.testing.assert_array_equal(student.transformer_layers[1].weights[0],
                                  teacher.transformer_layers[3].weights[0])
    with pytest.raises(ValueError, match="layer map index 2 is out of range: the teacher has "
                                         "2 groups"):
        student_encoder(teacher, layer_map=[0, 2])


@pytest.mark.parametrize("family, embedding_size, layers", [
    ("electra", 48, {"transformer_layer_0": "transformer_layer_0",
                     "transformer_layer_1": "transformer_layer_3"}),
    # ALBERT: the student applies one group, the teacher's last (its layers 2 and 3).
    ("albert", 16, {"transformer_layer_0": "transformer_layer_2",
                    "transformer_layer_1": "transformer_layer_3"}),
])
def test_student_with_another_embedding_size(teachers, family, embedding_size, layers):
    teacher = teachers[family]
    assert teacher.encoder.config.embedding_size == embedding_size
    student = student_pretraining_model(teacher, embedding_size=8)
    assert student.encoder.embeddings.token_embedding.embeddings.shape == (120, 8)
    # Embeddings of another width stay random; the layers (hidden size 32) are copied.
    assert copy_encoder_weights(teacher.encoder, student.encoder) == layers
    for target, source in layers.items():
        for ours, theirs in zip(student.encoder.get_layer(target).weights,
                                teacher.encoder.get_layer(source).weights):
            np.testing.assert_array_equal(ours, theirs)


def test_task_student_takes_the_teachers_head():
    keras.utils.set_random_seed(1)
    teacher = kerasbert.models.build_task_model(TEACHER_CONFIGS["roberta"],
                                                "sequence_classification", num_labels=3,
                                                id2label=["a", "b", "c"])
    student = student_task_model(teacher, TEACHER_LAYERS, range(TEACHER_LAYERS))
    assert student.id2label == teacher.id2label
    inputs = random_inputs(TEACHER_CONFIGS["roberta"], seq=SEQ)
    np.testing.assert_array_equal(student(inputs)["logits"], teacher(inputs)["logits"])


def test_student_errors_name_the_problem(teachers):
    with pytest.raises(ValueError, match="layer map index 7 is out of range: the teacher has 4 "
                                         r"layers \(0..3\)"):
        student_pretraining_model(teachers["bert"], layer_map=[0, 7])
    with pytest.raises(ValueError, match=r"layer map \[0\] has 1 entries, but the student has 2"):
        student_pretraining_model(teachers["bert"], num_layers=2, layer_map=[0])
    rtd_only = PretrainingModel(build_encoder(TEACHER_CONFIGS["electra"]), ("rtd",))
    with pytest.raises(ValueError,
                       match=r"\(PretrainingModel with heads \['rtd'\]\) has no MLM head"):
        masked_lm_teacher(rtd_only)
    with pytest.raises(ValueError, match=r"The teacher \(Encoder\) has no MLM head"):
        masked_lm_teacher(teachers["bert"].encoder)


# --- teachers -----------------------------------------------------------------------------------

def test_huggingface_electra_generator_teaches_transformers_logits(electra_hf_dir):
    directory, reference = electra_hf_dir
    teacher, tokenizer = load_teacher(directory)
    assert tokenizer is None and teacher.heads == ("mlm",)
    batch = _batch(teacher.encoder.config)
    expected = np.take_along_axis(hf_outputs(reference, batch).logits.numpy(),
                                  batch["masked_lm_positions"][..., None], axis=1)
    logits = teacher({name: batch[name] for name in teacher.input})["mlm_logits"]
    np.testing.assert_allclose(logits, expected, atol=1e-5)


def test_electra_pretrainers_generator_teaches():
    config = TEACHER_CONFIGS["electra"]
    pretrainer = ElectraPretrainer(config, generator_config(config, 0.5))
    teacher = masked_lm_teacher(pretrainer)
    assert teacher.encoder.config.hidden_size == 16
    batch = _batch(config)
    expected = pretrainer(batch, training=False)["mlm_logits"]
    np.testing.assert_allclose(teacher({name: batch[name] for name in teacher.input})[
        "mlm_logits"], expected, atol=1e-6)


def test_teachers_load_from_keras_files_and_pretraining_runs(teachers, tmp_path):
    teacher = teachers["albert"]
    teacher.save(tmp_path / "teacher.keras")
    run = tmp_path / "run"
    run.mkdir()
    (run / PRETRAINED_MODEL_FILE).write_text(json.dumps(pretraining_description(
        teacher.encoder.config, teacher.heads)))
    # What kerasbert-pretrain checkpoints: the model's variables by path.
    tf.train.Checkpoint(model_variables=model_variables(teacher)).save(str(run / "ckpt"))
    batch = _batch(teacher.encoder.config)
    inputs = {name: batch[name] for name in teacher.input}
    for path in (tmp_path / "teacher.keras", run):
        loaded, _ = load_teacher(path)
        np.testing.assert_array_equal(loaded(inputs)["mlm_logits"], teacher(inputs)["mlm_logits"])
    with pytest.raises(ValueError, match="not a teacher model"):
        load_teacher(tmp_path / "nothing")
    teacher.encoder.save(tmp_path / "encoder.keras")
    with pytest.raises(ValueError, match=r"encoder.keras: The teacher \(Encoder\) has no MLM "):
        load_teacher(tmp_path / "encoder.keras")


# --- the distiller ------------------------------------------------------------------------------

def _soft_loss_gap(distiller, batch):
    """The soft loss less its minimum, T^2 x the teacher's entropy: T^2 x KL(teacher||student)."""
    outputs = distiller(batch, training=False)
    teacher_entropy = soft_target_cross_entropy(outputs["teacher_mlm_logits"],
                                                outputs["teacher_mlm_logits"], 2.0)
    return float(distiller.distillation_losses(batch, outputs)["soft_loss"]) - float(
        np.mean(teacher_entropy))


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra"])
def test_distiller_trains_the_student_and_leaves_the_teacher(teachers, family):
    teacher = teachers[family]
    keras.utils.set_random_seed(2)
    student = student_pretraining_model(teacher)
    distiller = PretrainingDistiller(teacher, student)
    batch = _batch(teacher.encoder.config)
    teacher_before, frozen_before = _values(teacher), _values(distiller.teacher)
    before = _soft_loss_gap(distiller, batch)
    distiller.compile(optimizer=keras.optimizers.SGD(0.05), steps_per_execution=10)
    history = distiller.fit(tf.data.Dataset.from_tensors(batch).repeat(), steps_per_epoch=10,
                            epochs=1, verbose=0, shuffle=False)
    after = _soft_loss_gap(distiller, batch)
    assert after < 0.5 * before, (family, before, after)
    assert {"soft_loss", "mlm_loss", "cosine_loss", "mlm_accuracy"} <= set(history.history)
    # Only the student's variables get gradients (and so optimizer slots).
    assert {id(v) for v in distiller.trainable_variables} == {
        id(v) for v in student.trainable_variables}
    assert not any(v.path.startswith("teacher/") for v in distiller.trainable_variables)
    for ours, theirs in zip(_values(distiller.teacher) + _values(teacher),
                            frozen_before + teacher_before):
        np.testing.assert_array_equal(ours, theirs)


def test_distiller_without_cosine_needs_no_equal_hidden_size(teachers):
    teacher = teachers["bert"]
    student = student_pretraining_model(teacher, hidden_size=16, num_heads=2,
                                        intermediate_size=32)
    with pytest.raises(ValueError, match="teacher's hidden_size is 32 and the student's 16; "
                                         r"turn it off with cosine_weight=0"):
        PretrainingDistiller(teacher, student)
    distiller = PretrainingDistiller(teacher, student, cosine_weight=0.0)
    batch = _batch(teacher.encoder.config)
    losses = distiller.distillation_losses(batch, distiller(batch))
    assert sorted(losses) == ["mlm_loss", "soft_loss"]
    other_vocabulary = student_pretraining_model(teacher, vocab_size=100)
    with pytest.raises(ValueError, match="Mismatched vocabularies: the teacher's vocab_size is "
                                         "120, the student's 100"):
        PretrainingDistiller(teacher, other_vocabulary)


def test_distiller_config_round_trips(teachers):
    distiller = PretrainingDistiller(teachers["roberta"],
                                     student_pretraining_model(teachers["roberta"]),
                                     temperature=3.0, soft_weight=1.0, mlm_weight=0.5)
    restored = PretrainingDistiller.from_config(distiller.get_config())
    assert restored.get_config() == distiller.get_config()


def test_distiller_under_mirrored_strategy_steps_as_one_device():
    keras.utils.set_random_seed(4)
    # A 2-layer teacher of a 1-layer student: two replicas trace the step twice.
    config = TEACHER_CONFIGS["bert"].replace(num_layers=2, dropout=0.0, attention_dropout=0.0)
    teacher = PretrainingModel(build_encoder(config), ("mlm",))
    batch = _batch(config, batch=4, seed=5)
    # Each replica averages over its own predictions and tokens: give both halves as many.
    batch["padding_mask"][:] = batch["padding_mask"][[0, 1, 0, 1]]
    learning_rate = 0.5

    # One SGD step on one device, by hand.
    distiller = PretrainingDistiller(teacher, student_pretraining_model(teacher))
    with tf.GradientTape() as tape:
        loss = distiller.compute_loss(batch, None, distiller(batch, training=True))
    gradients = tape.gradient(loss, distiller.trainable_variables)
    expected = [np.array(variable) - learning_rate * np.array(tf.convert_to_tensor(gradient))
                for variable, gradient in zip(distiller.trainable_variables, gradients)]

    with get_strategy("mirrored", devices=["/cpu:0", "/cpu:1"]).scope():
        mirrored = PretrainingDistiller(teacher, student_pretraining_model(teacher))
        mirrored.compile(optimizer=keras.optimizers.SGD(learning_rate))
    mirrored.fit(tf.data.Dataset.from_tensors(batch), epochs=1, verbose=0, shuffle=False)
    assert len(mirrored.trainable_variables) == len(expected)
    moved = 0.0
    for variable, before, want in zip(mirrored.trainable_variables,
                                      distiller.trainable_variables, expected):
        np.testing.assert_allclose(variable, want, atol=2e-6, err_msg=variable.path)
        moved = max(moved, float(np.abs(want - np.array(before)).max()))
    assert moved > 1e-3  # the step changed the student
