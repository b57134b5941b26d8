"""Fine-tuning models: one battery over every family x task, plus the losses `transformers` uses."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert.convert import encoder_config_from_hf
from kerasbert.models import TASK_MODEL_KINDS, TaskModel, build_task_model
from kerasbert.training.distribute import get_strategy
from tests.helpers import TINY_CONFIGS, hf_config, random_inputs, save_hf_model

FAMILIES = sorted(TINY_CONFIGS)
STEMS = {"bert": "Bert", "roberta": "Roberta", "albert": "Albert", "electra": "Electra",
         "distilbert": "DistilBert", "modernbert": "ModernBert"}
HF_CLASSES = {"sequence_classification": "ForSequenceClassification",
              "token_classification": "ForTokenClassification",
              "question_answering": "ForQuestionAnswering",
              "multiple_choice": "ForMultipleChoice"}
CHOICES = 3


def task_inputs(config, task, batch=4, seq=8, seed=0):
    if task != "multiple_choice":
        return random_inputs(config, batch=batch, seq=seq, seed=seed)
    rows = random_inputs(config, batch=batch * CHOICES, seq=seq, seed=seed)
    return {name: value.reshape(batch, CHOICES, seq) for name, value in rows.items()}


def task_batch(config, task, num_labels=3, batch=4, seq=8, seed=0):
    """A batch dict as kerasbert's task datasets give it."""
    rng = np.random.default_rng(seed + 1)
    inputs = task_inputs(config, task, batch, seq, seed)
    if task == "question_answering":
        start = rng.integers(1, 3, batch).astype("int32")
        return {**inputs, "start_positions": start, "end_positions": start + 1}
    if task == "token_classification":
        labels = rng.integers(0, num_labels, (batch, seq)).astype("int32")
        labels[:, 0] = -100
        labels[inputs["padding_mask"] == 0] = -100
        labels[:, 3] = -100  # a later sub-token
        return {**inputs, "labels": labels}
    classes = CHOICES if task == "multiple_choice" else num_labels
    return {**inputs, "labels": rng.integers(0, classes, batch).astype("int32")}


def build(family, task, **kwargs):
    num_labels = None if task in ("question_answering", "multiple_choice") else 3
    return build_task_model(TINY_CONFIGS[family], task, num_labels=num_labels, **kwargs)


def assert_outputs_equal(a, b, atol=0.0):
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), rtol=0, atol=atol)


@pytest.fixture(params=[(family, task) for family in FAMILIES for task in TASK_MODEL_KINDS],
                ids=lambda case: "-".join(case))
def case(request):
    return request.param


def test_contract_outputs_and_parameter_count_of_transformers(case):
    """Shapes as the contract says; as many weights as the `transformers` model of that config."""
    import transformers

    family, task = case
    hf = hf_config(family, num_labels=2 if task == "question_answering" else 3)
    model = build_task_model(encoder_config_from_hf(hf.to_dict()), task,
                             num_labels=None if task in ("question_answering",
                                                         "multiple_choice") else 3)
    reference = getattr(transformers, STEMS[family] + HF_CLASSES[task])(hf)
    assert model.count_params() == sum(p.numel() for p in reference.parameters())
    outputs = model(task_inputs(model.encoder.config, task, batch=2, seq=7))
    expected = {"sequence_classification": {"logits": (2, 3)},
                "token_classification": {"logits": (2, 7, 3)},
                "question_answering": {"start_logits": (2, 7), "end_logits": (2, 7)},
                "multiple_choice": {"logits": (2, CHOICES)}}[task]
    assert {name: tuple(value.shape) for name, value in outputs.items()} == expected
    assert all(value.dtype == tf.float32 for value in outputs.values())


def test_keras_file_and_config_round_trip(case, tmp_path):
    family, task = case
    model = build(family, task, id2label=None if task in ("question_answering",
                                                          "multiple_choice") else
                  ["O", "B-X", "I-X"], dropout=0.2)
    inputs = task_inputs(model.encoder.config, task)
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")  # no custom_objects
    assert isinstance(reloaded, TaskModel)
    assert (reloaded.task, reloaded.num_labels, reloaded.id2label, reloaded.dropout,
            reloaded.pooling) == (model.task, model.num_labels, model.id2label, 0.2,
                                  model.pooling)
    assert_outputs_equal(model(inputs), reloaded(inputs))
    clone = TaskModel.from_config(model.get_config())
    assert clone.get_config()["id2label"] == model.get_config()["id2label"]
    clone.set_weights(model.get_weights())
    assert_outputs_equal(model(inputs), clone(inputs))


@pytest.mark.slow
def test_a_compiled_model_reloads_in_a_process_that_imports_only_the_models(tmp_path):
    """kerasbert-finetune saves its model compiled: the file names kerasbert's AdamW and
    WarmupDecay, which `import kerasbert.models` must register (kerasbert's names load lazily)."""
    from kerasbert.training import create_optimizer

    model = build("bert", "sequence_classification")
    model.compile(optimizer=create_optimizer("adamw", 1e-3, num_train_steps=10),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.save(tmp_path / "model.keras")
    reload = ("import keras, kerasbert.models; "
              f"model = keras.models.load_model({str(tmp_path / 'model.keras')!r}); "
              "print(type(model.optimizer).__name__, type(model.optimizer._learning_rate).__name__)")
    result = subprocess.run([sys.executable, "-c", reload], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["AdamW", "WarmupDecay"]


@pytest.mark.slow
@pytest.mark.parametrize("family,task", [("bert", task) for task in TASK_MODEL_KINDS] + [
    ("roberta", "sequence_classification"), ("electra", "sequence_classification"),
    ("albert", "multiple_choice"), ("electra", "multiple_choice"),
    ("distilbert", "sequence_classification")])
def test_fit_on_task_batches_lowers_the_loss(family, task):
    config = TINY_CONFIGS[family].replace(dropout=0.0, attention_dropout=0.0)
    model = build_task_model(config, task, num_labels=None if task in (
        "question_answering", "multiple_choice") else 3)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    batch = task_batch(config, task)
    first = model.evaluate(tf.data.Dataset.from_tensors(batch), verbose=0, return_dict=True)
    history = model.fit(tf.data.Dataset.from_tensors(batch).repeat(12), verbose=0)
    last = model.evaluate(tf.data.Dataset.from_tensors(batch), verbose=0, return_dict=True)
    assert np.isfinite(history.history["loss"]).all()
    assert last["loss"] < 0.8 * first["loss"]
    predictions = model.predict(tf.data.Dataset.from_tensors(batch), verbose=0)
    assert sorted(predictions) == sorted(model.output)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASK_MODEL_KINDS)
def test_jit_compile_matches_eager(task):
    """`inference_function`: XLA, every input axis free (two shapes through one trace)."""
    model = build("albert", task)
    compiled = kerasbert.models.inference_function(model)
    for batch, seq in ((4, 8), (2, 11)):
        inputs = task_inputs(model.encoder.config, task, batch=batch, seq=seq)
        assert_outputs_equal(compiled(inputs), model(inputs), atol=1e-5)


@pytest.mark.parametrize("task", TASK_MODEL_KINDS)
def test_mixed_precision_gives_float32_outputs_close_to_float32(task):
    reference = build("roberta", task)
    encoder = kerasbert.models.build_encoder(reference.encoder.config, dtype="mixed_float16")
    mixed = TaskModel(encoder, task, num_labels=reference.num_labels)
    mixed.set_weights(reference.get_weights())
    inputs = task_inputs(reference.encoder.config, task)
    outputs = mixed(inputs)
    assert all(value.dtype == tf.float32 for value in outputs.values())
    assert_outputs_equal(outputs, reference(inputs), atol=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASK_MODEL_KINDS)
def test_a_mirrored_training_step_equals_one_device(task):
    devices = [device.name for device in tf.config.list_logical_devices("CPU")[:2]]
    strategy = get_strategy("mirrored", devices=devices)
    config = TINY_CONFIGS["bert"].replace(dropout=0.0, attention_dropout=0.0)
    batch = task_batch(config, task, seed=3)
    if task == "token_classification":
        # Each replica averages over its own labelled tokens (as PyTorch DDP and Model Garden
        # do): give both replicas' halves of the batch as many, so the mean is the global one.
        half = {name: value[:2] for name, value in batch.items()}
        second = half["labels"].copy()
        second[second >= 0] = (second[second >= 0] + 1) % 3
        batch = {name: np.concatenate([value, second if name == "labels" else value])
                 for name, value in half.items()}
    reference = build_task_model(config, task, num_labels=None if task in (
        "question_answering", "multiple_choice") else 3)
    with strategy.scope():
        mirrored = build_task_model(config, task, num_labels=reference.num_labels if task not in (
            "question_answering", "multiple_choice") else None)
        mirrored.set_weights(reference.get_weights())
        mirrored.compile(optimizer=keras.optimizers.SGD(0.5))
    reference.compile(optimizer=keras.optimizers.SGD(0.5))
    initial = reference.get_weights()
    for model in (reference, mirrored):
        model.fit(tf.data.Dataset.from_tensors(batch), epochs=1, verbose=0)
    for ours, theirs in zip(mirrored.weights, reference.weights):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=1e-5)
    assert any(not np.array_equal(a, b) for a, b in zip(initial, reference.get_weights()))


@pytest.mark.slow
@pytest.mark.parametrize("task,num_labels", [
    ("sequence_classification", 3), ("sequence_classification", 1),
    ("token_classification", 3), ("question_answering", None), ("multiple_choice", None)])
def test_default_loss_equals_the_loss_transformers_computes(task, num_labels, tmp_path):
    """Cross-entropy / MSE / -100 ignored / mean of start and end, as the `*For<Task>` models."""
    import torch

    hf = hf_config("bert", **({"num_labels": num_labels} if num_labels else {}))
    reference = save_hf_model("Bert" + HF_CLASSES[task], hf, tmp_path)
    model = kerasbert.convert.from_hf(tmp_path)
    batch = task_batch(model.encoder.config, task, num_labels=num_labels or 2, seed=5)
    if num_labels == 1:
        batch["labels"] = np.linspace(0.0, 5.0, len(batch["labels"])).astype("float32")
    model.compile()
    ours = model.evaluate(tf.data.Dataset.from_tensors(batch), verbose=0, return_dict=True)
    labels = ({"start_positions": torch.tensor(batch["start_positions"], dtype=torch.long),
               "end_positions": torch.tensor(batch["end_positions"], dtype=torch.long)}
              if task == "question_answering" else
              {"labels": torch.tensor(batch["labels"]).long() if num_labels != 1 else
               torch.tensor(batch["labels"])})
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor(batch["token_ids"], dtype=torch.long),
                             token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long),
                             attention_mask=torch.tensor(batch["padding_mask"], dtype=torch.long),
                             **labels).loss.item()
    np.testing.assert_allclose(ours["loss"], expected, rtol=1e-5)


def test_built_on_a_pretraining_model_shares_its_encoder():
    pretrainer = kerasbert.models.build_pretraining_model(TINY_CONFIGS["bert"])
    model = build_task_model(pretrainer, "sequence_classification", num_labels=2)
    assert model.encoder is pretrainer.encoder
    electra = kerasbert.models.ElectraPretrainer(
        TINY_CONFIGS["electra"], kerasbert.models.generator_config(TINY_CONFIGS["electra"], 0.5))
    assert build_task_model(electra, "token_classification").encoder is electra.discriminator


def test_the_pooler_is_dropped_or_added_as_the_head_needs():
    encoder = kerasbert.models.build_encoder(TINY_CONFIGS["bert"])
    inputs = random_inputs(encoder.config)
    span = build_task_model(encoder, "question_answering")
    assert not span.encoder.config.use_pooler and span.encoder is not encoder
    np.testing.assert_array_equal(span.encoder(inputs)["sequence_output"],
                                  encoder(inputs)["sequence_output"])
    assert not any("pooler" in variable.path for variable in span.weights)

    no_pooler = kerasbert.models.build_encoder(TINY_CONFIGS["bert"].replace(use_pooler=False))
    classifier = build_task_model(no_pooler, "sequence_classification")
    assert classifier.encoder.config.use_pooler
    np.testing.assert_array_equal(classifier.encoder(inputs)["sequence_output"],
                                  no_pooler(inputs)["sequence_output"])


def test_impossible_settings_are_refused():
    config = TINY_CONFIGS["bert"]
    with pytest.raises(ValueError, match="task must be one of"):
        build_task_model(config, "summarization")
    with pytest.raises(ValueError, match="num_labels=3 is not possible"):
        build_task_model(config, "question_answering", num_labels=3)
    with pytest.raises(ValueError, match="num_labels must be a positive integer"):
        build_task_model(config, "sequence_classification", num_labels=0)
    with pytest.raises(ValueError, match=r"id2label must name the label ids 0..2"):
        build_task_model(config, "token_classification", num_labels=3, id2label=["O", "B"])
    with pytest.raises(ValueError, match="build_task_model adds or removes it"):
        TaskModel(kerasbert.models.build_encoder(config), "token_classification")


@pytest.mark.parametrize("task", ["sequence_classification", "multiple_choice"])
def test_mean_pooling_heads_save_reload_and_ignore_padding(task, tmp_path):
    model = build("modernbert", task, pooling="mean")
    inputs = task_inputs(model.encoder.config, task)
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    assert reloaded.pooling == "mean"
    assert_outputs_equal(model(inputs), reloaded(inputs))
    # Padding tokens do not count: more padding after the same tokens gives the same logits.
    longer = {name: np.concatenate([value, np.full(value.shape[:-1] + (5,), 0, "int32")],
                                   axis=-1) for name, value in inputs.items()}
    assert_outputs_equal(model(inputs), model(longer), atol=1e-5)


def test_mean_pooling_is_refused_where_the_head_reads_no_first_token():
    with pytest.raises(ValueError, match="pooling='mean'"):
        build("bert", "sequence_classification", pooling="mean")
    with pytest.raises(ValueError, match="pooling must be one of"):
        build("modernbert", "sequence_classification", pooling="max")
