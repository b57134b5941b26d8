"""`export_report.json`: versions, the model, the texts quantized artifacts were calibrated and
judged on (and the labelled set, if any), and per artifact its size, SHA-256, signatures, op
inventory, checks, quantized agreement (and task metric) and latency."""

import collections
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import platform

import tensorflow as tf

from kerasbert.atomic_files import write_atomically
from kerasbert.models.tasks import encoder_of

_PACKAGES = ("kerasbert", "tensorflow", "tensorflow-text", "keras", "tf2onnx", "onnx",
             "onnxruntime", "ai-edge-litert", "numpy")


def library_versions():
    """`{package: version}` of the libraries an export depends on (None when absent).

    >>> library_versions()["tensorflow"].startswith("2.")
    True
    """
    versions = {"python": platform.python_version()}
    for package in _PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def file_facts(path):
    """`{"size_bytes", "sha256"}` of a file, or of a directory's files (each file's relative
    path and content hashed in sorted order).

    >>> import tempfile
    >>> facts = file_facts(tempfile.mkdtemp())
    >>> facts["size_bytes"], len(facts["sha256"])
    (0, 64)
    """
    digest = hashlib.sha256()
    if os.path.isfile(path):
        files = [(os.path.basename(path), path)]
    else:
        files = sorted((os.path.relpath(os.path.join(root, name), path), os.path.join(root, name))
                       for root, _, names in os.walk(path) for name in names)
    size = 0
    for relative, full in files:
        if os.path.isdir(path):
            digest.update(relative.encode("utf-8") + b"\0")
        with open(full, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
    return {"size_bytes": size, "sha256": digest.hexdigest()}


def saved_model_ops(path):
    """`{op type: count}` over the functions of the SavedModel at `path`.

    >>> import tempfile, kerasbert
    >>> from kerasbert.export.saved_model import write_saved_model
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> ops = saved_model_ops(write_saved_model(encoder, tempfile.mkdtemp() + "/sm"))
    >>> ops["MatMul"] > 0 or ops["BatchMatMulV2"] > 0
    True
    """
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as file:
        proto.ParseFromString(file.read())
    counts = collections.Counter()
    for meta_graph in proto.meta_graphs:
        graph = meta_graph.graph_def
        counts.update(node.op for node in graph.node)
        for function in graph.library.function:
            counts.update(node.op for node in function.node_def)
    return dict(sorted(counts.items()))


def make_report(model, tokenizer, artifacts, max_seq_length, opset, texts, labelled_set,
                answer_settings=None):
    """The report of a finished export (see `kerasbert.export.export`); `artifacts`: the verified
    artifacts' report entries by name, `texts`: the calibration and judging sets
    (`TextSets.describe()`), `labelled_set`: what the labelled set was, or None,
    `answer_settings`: how the answer signatures decode (an `AnswerSettings`), or None."""
    config = encoder_of(model).config
    return {
        "versions": library_versions(),
        "tensorflow_cpu_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "model": {"name": model.name, "family": config.family,
                  "inputs": {name: tensor.shape for name, tensor in model.input.items()},
                  "outputs": sorted(model.output),
                  "tokenizer": type(tokenizer).__name__ if tokenizer is not None else None,
                  "labels": _label_names(model), "task": getattr(model, "task", None)},
        "answer_settings": (dataclasses.asdict(answer_settings) if answer_settings is not None
                            else None),
        "max_seq_length": max_seq_length,
        "onnx_opset": opset,
        "texts": texts,
        "labelled_set": labelled_set,
        "artifacts": artifacts,
    }


def _label_names(model):
    """A task model's label names by class index (what its logits' columns mean), or None."""
    id2label = getattr(model, "id2label", None)
    return [id2label[index] for index in sorted(id2label)] if id2label else None


def write_report(path, report):
    """Write `report` as indented JSON at `path`."""
    return write_atomically(path, json.dumps(report, indent=2, sort_keys=True,
                                             default=_json_compatible) + "\n")


def _json_compatible(value):
    """What `json.dumps` writes for a value it cannot: a tuple or array as a list, else its text."""
    if isinstance(value, tuple):
        return list(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def summary_lines(report, output_dir):
    """What `kerasbert-export` prints of a `report`: a line per verified artifact (its checks,
    what decided it, its size and latency), then where the report is.

    >>> report = {"artifacts": {"model.tflite": {"checks": [{"max_rel": 2e-6}],
    ...                                          "size_bytes": 1_500_000}}}
    >>> print("\\n".join(summary_lines(report, "exports/mrpc")))
    model.tflite: verified (1 checks, max relative difference 2e-06), 1.50 MB
    Wrote exports/mrpc/export_report.json
    """
    from kerasbert import file_system
    from kerasbert.export.exporter import REPORT_FILE

    lines = [f"{name}: verified ({len(entry['checks'])} checks, {_decided_by(entry)}), "
             f"{entry['size_bytes'] / 1e6:.2f} MB"
             + (f", {entry['latency_ms']:.1f} ms at batch 1" if "latency_ms" in entry else "")
             for name, entry in report["artifacts"].items()]
    return lines + [f"Wrote {file_system.join(output_dir, REPORT_FILE)}"]


def _decided_by(entry):
    """What decided an artifact: its largest difference, its agreement or its task metric."""
    if "agreement" not in entry:
        worst = max((check.get("max_rel", 0.0) for check in entry["checks"]), default=0.0)
        return f"max relative difference {worst:.2g}"
    judged = entry["judged_on"]
    agreement = ", ".join(f"{output} {value['metric']} {value['value']:.4f}"
                          for output, value in entry["agreement"].items())
    agreement += f" on {judged['inputs']} judging inputs ({judged['shape']})"
    metric = entry.get("task_metric")
    if metric is None:
        return agreement
    return (f"{metric['task']} score {metric['score_points']:.2f} against the Keras model's "
            f"{metric['float_score_points']:.2f} on {metric['examples']} examples; {agreement}")
