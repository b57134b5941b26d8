"""The SavedModel as TF Serving and `saved_model_cli` see it: the numbered version folder of
`serving_version`, `saved_model_cli show --all` listing every signature with free axes, and
`saved_model_cli run` giving the Keras model's logits: plainly on an ids-only export, and with
tensorflow-text's ops registered first on an export with text signatures."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert.data import demo

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 32
SAVED_MODEL_CLI = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
# saved_model_cli has no flag to load op libraries: register tensorflow-text's, then run it.
SAVED_MODEL_CLI_WITH_TEXT_OPS = [
    sys.executable, "-c",
    "import tensorflow_text; from tensorflow.python.tools.saved_model_cli import main; main()"]
TEXTS = ["The quick brown fox.", "Héllo wörld, naïve café!"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    config = kerasbert.EncoderConfig(family="bert", vocab_size=tokenizer.vocabulary_size(),
                                     hidden_size=32, num_layers=1, num_heads=2,
                                     intermediate_size=37, max_positions=64,
                                     initializer_range=0.2)
    keras.utils.set_random_seed(1)
    model = kerasbert.models.build_task_model(kerasbert.models.build_encoder(config),
                                              "sequence_classification", num_labels=3)
    work = tmp_path_factory.mktemp("saved_model_cli")
    kerasbert.export.export(model, work / "text", formats=("saved_model",),
                            text_signatures=True, tokenizer=tokenizer, serving_version=3,
                            max_seq_length=MAX_SEQ_LENGTH)
    kerasbert.export.export(model, work / "ids", formats=("saved_model",),
                            max_seq_length=MAX_SEQ_LENGTH)
    return model, tokenizer, work


def run(command, *flags):
    completed = subprocess.run([*command, *flags], capture_output=True, text=True,
                               env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def signature_blocks(show_output):
    """`{signature: its text}` from `saved_model_cli show --all`."""
    blocks = {}
    for block in show_output.split("signature_def['")[1:]:
        name, _, text = block.partition("']:")
        blocks[name] = text
    return blocks


def test_serving_version_is_tf_serving_layout(exported):
    _, _, work = exported
    assert os.listdir(work / "text" / "saved_model") == ["3"]
    assert os.path.isfile(work / "text" / "saved_model" / "3" / "saved_model.pb")
    assert os.path.isfile(work / "ids" / "saved_model" / "saved_model.pb")


def test_show_lists_every_signature_with_free_axes(exported):
    _, _, work = exported
    blocks = signature_blocks(run([SAVED_MODEL_CLI], "show", "--dir",
                                  str(work / "text" / "saved_model" / "3"), "--all"))
    assert {"serving_default", "serve_text", "serve_text_pair", "serve_examples"} <= set(blocks)
    serving = blocks["serving_default"]
    for name in ("token_ids", "segment_ids", "padding_mask"):
        assert f"inputs['{name}']" in serving
    assert serving.count("dtype: DT_INT32") == 3 and serving.count("shape: (-1, -1)") == 3
    assert "outputs['logits']" in serving and "shape: (-1, 3)" in serving
    assert "inputs['text'] tensor_info:\n        dtype: DT_STRING" in blocks["serve_text"]
    assert "inputs['text_a']" in blocks["serve_text_pair"]
    assert "inputs['examples']" in blocks["serve_examples"]


def test_run_gives_the_keras_logits(exported, tmp_path):
    model, tokenizer, work = exported
    packed = tokenizer(TEXTS, max_length=MAX_SEQ_LENGTH - 7)  # not the export's length
    feeds = []
    for name, value in packed.items():
        np.save(tmp_path / f"{name}.npy", np.asarray(value, np.int32))
        feeds.append(f"{name}={tmp_path / name}.npy")
    expected = np.asarray(model(packed, training=False)["logits"])

    run([SAVED_MODEL_CLI], "run", "--dir", str(work / "ids" / "saved_model"), "--tag_set",
        "serve", "--signature_def", "serving_default", "--inputs", ";".join(feeds),
        "--outdir", str(tmp_path / "ids"))
    np.testing.assert_allclose(np.load(tmp_path / "ids" / "logits.npy"), expected, atol=1e-5)

    text_dir = str(work / "text" / "saved_model" / "3")
    run(SAVED_MODEL_CLI_WITH_TEXT_OPS, "run", "--dir", text_dir, "--tag_set", "serve",
        "--signature_def", "serving_default", "--inputs", ";".join(feeds),
        "--outdir", str(tmp_path / "text_ids"))
    np.testing.assert_allclose(np.load(tmp_path / "text_ids" / "logits.npy"), expected, atol=1e-5)

    run(SAVED_MODEL_CLI_WITH_TEXT_OPS, "run", "--dir", text_dir, "--tag_set", "serve",
        "--signature_def", "serve_text", "--input_exprs", f"text={TEXTS!r}",
        "--outdir", str(tmp_path / "text"))
    full_length = tokenizer(TEXTS, max_length=MAX_SEQ_LENGTH)
    np.testing.assert_allclose(np.load(tmp_path / "text" / "logits.npy"),
                               model(full_length, training=False)["logits"], atol=1e-5)


def test_the_weights_are_stored_once(exported):
    model, _, work = exported
    weight_bytes = sum(int(np.prod(weight.shape)) * 4 for weight in model.weights)
    for variables in (work / "ids" / "saved_model" / "variables",
                      work / "text" / "saved_model" / "3" / "variables"):
        stored = sum(os.path.getsize(variables / name) for name in os.listdir(variables))
        assert weight_bytes <= stored < 1.1 * weight_bytes, (variables, stored, weight_bytes)
