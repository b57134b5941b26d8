"""Every family and every head kind exports to SavedModel, TFLite and ONNX, verifies (the
exporter runs every artifact in a fresh process that never imports kerasbert, and the report
says so), and, each artifact run again here by its own runtime, matches `transformers`
(PyTorch).

Each family is exported with at least two kinds of model and each kind of model with at least
one family (13 exports; a full cross product would cost CI ~14 minutes more): the models come
from `transformers` checkpoints with random weights through `--model=<Hugging Face folder>`.
"""

import json
import os

import numpy as np
import pytest

import kerasbert
from tests.export.artifacts import run_artifacts
from tests.helpers import hf_config, random_inputs, run_hf_model, save_hf_model

pytestmark = pytest.mark.slow

TOLERANCE = 1e-4
MAX_SEQ_LENGTH = 32
# (family, transformers class, kind of kerasbert model)
EXPORTS = [
    ("bert", "BertModel", "encoder"),
    ("bert", "BertForPreTraining", "pretraining"),
    ("bert", "BertForSequenceClassification", "sequence_classification"),
    ("roberta", "RobertaForMaskedLM", "pretraining"),
    ("roberta", "RobertaForTokenClassification", "token_classification"),
    ("albert", "AlbertForPreTraining", "pretraining"),
    ("albert", "AlbertForMultipleChoice", "multiple_choice"),
    ("electra", "ElectraForPreTraining", "pretraining"),
    ("electra", "ElectraForQuestionAnswering", "question_answering"),
    ("distilbert", "DistilBertForMaskedLM", "pretraining"),
    ("distilbert", "DistilBertForSequenceClassification", "sequence_classification"),
    ("modernbert", "ModernBertForMaskedLM", "pretraining"),
    ("modernbert", "ModernBertForSequenceClassification", "sequence_classification"),
]
# DistilBERT's classifier is exported with its fixed sinusoidal position table.
HF_OVERRIDES = {("distilbert", "sequence_classification"): {"sinusoidal_pos_embds": True}}
POSITIONS = np.array([[1, 4, 7], [2, 3, 5], [1, 2, 3]], np.int32)


def make_inputs(family, kind):
    """Batch 3, length 11 (neither is a verification shape), right padding and pairs."""
    config = hf_config(family)
    small = kerasbert.EncoderConfig(
        family=family, vocab_size=config.vocab_size, hidden_size=32, num_layers=1, num_heads=2,
        intermediate_size=37, type_vocab_size=getattr(config, "type_vocab_size", 0),
        pad_token_id=config.pad_token_id or 0)
    inputs = random_inputs(small, batch=3, seq=11, seed=7)
    if kind == "multiple_choice":
        rows = random_inputs(small, batch=6, seq=11, seed=8)
        inputs = {name: value.reshape(3, 2, 11) for name, value in rows.items()}
    return inputs


def torch_outputs(reference, inputs, kind, positions):
    out = run_hf_model(reference, inputs)
    if kind == "encoder":
        return {"sequence_output": out.last_hidden_state, "pooled_output": out.pooler_output}
    if kind == "question_answering":
        return {"start_logits": out.start_logits, "end_logits": out.end_logits}
    if kind != "pretraining":
        return {"logits": out.logits}
    if hasattr(out, "sop_logits"):
        expected = {"sop_logits": out.sop_logits}
    elif hasattr(out, "seq_relationship_logits"):
        expected = {"nsp_logits": out.seq_relationship_logits}
    else:
        expected = {}
    mlm = getattr(out, "prediction_logits", None)
    if mlm is None and out.logits.ndim == 3:
        mlm = out.logits
    if mlm is None:
        expected["rtd_logits"] = out.logits
    else:
        expected["mlm_logits"] = np.take_along_axis(mlm.numpy(), positions[:, :, None], axis=1)
    return expected


@pytest.fixture(scope="module", params=EXPORTS, ids=lambda e: f"{e[0]}-{e[2]}")
def exported(request, tmp_path_factory):
    family, class_name, kind = request.param
    hf_dir = tmp_path_factory.mktemp(f"hf_{family}_{kind}")
    extra = {"num_labels": 3} if kind in ("sequence_classification", "token_classification") else {}
    extra.update(HF_OVERRIDES.get((family, kind), {}))
    reference = save_hf_model(class_name, hf_config(family, **extra), hf_dir)
    output_dir = tmp_path_factory.mktemp(f"export_{family}_{kind}") / "out"
    report = kerasbert.export.export(hf_dir, output_dir, max_seq_length=MAX_SEQ_LENGTH)
    return family, kind, reference, output_dir, report


def test_every_artifact_verifies_and_the_report_says_so(exported):
    family, kind, _, output_dir, report = exported
    assert sorted(os.listdir(output_dir)) == ["export_report.json", "model.onnx", "model.tflite",
                                              "saved_model"]
    with open(output_dir / "export_report.json") as file:
        written = json.load(file)
    assert written["model"]["family"] == family
    for name in ("saved_model", "model.tflite", "model.onnx"):
        entry = written["artifacts"][name]
        assert entry["verified"] and len(entry["sha256"]) == 64 and entry["size_bytes"] > 0
        cases = {check["case"] for check in entry["checks"]}
        assert any("batch1" in case for case in cases) and any("batch3" in case for case in cases)
        assert any(check.get("check") == "padding" for check in entry["checks"])
        assert entry["ops"] and entry["latency_ms"] > 0
    assert "Erfc" not in written["artifacts"]["model.onnx"]["ops"]


def test_every_artifact_s_outputs_match_transformers(exported):
    family, kind, reference, output_dir, _ = exported
    inputs = make_inputs(family, kind)
    positions = POSITIONS
    model_inputs = dict(inputs)
    expected = torch_outputs(reference, inputs, kind, positions)
    if "mlm_logits" in expected:
        model_inputs["masked_lm_positions"] = positions
    results = run_artifacts(str(output_dir), model_inputs)
    rank = 3 if kind == "multiple_choice" else 2
    for artifact, result in results.items():
        assert sorted(result["outputs"]) == sorted(expected), artifact
        for name, value in expected.items():
            value = np.asarray(value, np.float32)
            scale = max(1.0, float(np.abs(value).max()))
            difference = float(np.abs(result["outputs"][name] - value).max()) / scale
            assert difference <= TOLERANCE, f"{artifact} {name}: {difference}"
        for name, shape in result["inputs"].items():
            if name != "masked_lm_positions":
                assert len(shape) == rank
        if artifact == "saved_model":
            assert all(dim is None for shape in result["inputs"].values() for dim in shape)
        elif artifact == "model.tflite":
            assert all(dim == -1 for shape in result["inputs"].values() for dim in shape)
            assert not [op for op in result["ops"] if op.startswith("Flex") or op == "CUSTOM"]
        else:
            expected_axes = (["batch", "sequence"] if rank == 2 else
                             ["batch", "choices", "sequence"])
            assert result["inputs"]["token_ids"] == expected_axes
