"""`export`: every artifact built in a folder beside `output_dir`, reloaded in its own runtime,
compared with the Keras model, described in `export_report.json`, then renamed into place."""

import dataclasses
import os
import tempfile

import keras
import numpy as np
import onnx
import tensorflow as tf

from kerasbert import file_system
from kerasbert.atomic_files import TemporarySibling
from kerasbert.export.answer_settings import AnswerSettings, recorded_settings
from kerasbert.export.answer_signatures import (answer_output_names, answer_signature,
                                                answer_signature_checks, reference_answers,
                                                verification_inputs)
from kerasbert.export.answers import answer_checks, answer_names
from kerasbert.export.cases import CaseMaker, text_sets
from kerasbert.export.compare import (FLOAT32_TOLERANCE, agreement, float_difference, passes,
                                      threshold)
from kerasbert.export.errors import ExportError
from kerasbert.export.cases import MIN_JUDGING_INPUTS
from kerasbert.export.labelled import METRIC_TOLERANCE_POINTS, LabelledSet
from kerasbert.export.model_sources import load_export_model
from kerasbert.export.onnx_model import OPSET, convert_to_onnx
from kerasbert.export.onnx_model import op_inventory as onnx_op_inventory
from kerasbert.export.output_kinds import is_token_aligned, output_kinds
from kerasbert.export.onnx_runtime_variants import (FUSED_CANDIDATE_FILE, ONNX_FILE_NAMES,
                                                    fused_candidate, quantize_dynamic_int8)
from kerasbert.export.padding_buckets import expected_width
from kerasbert.export.report import file_facts, make_report, saved_model_ops, write_report
from kerasbert.export.runtimes import run_in_fresh_process
from kerasbert.export.saved_model import TEXT_SIGNATURES, write_saved_model
from kerasbert.export.signatures import serving_function
from kerasbert.export.tflite import (QUANTIZATIONS, TFLITE_FILE_NAMES, convert_to_tflite,
                                     op_inventory, require_builtin_ops)
from kerasbert.models.tasks import encoder_of

from kerasbert.choices import EXPORT_FORMATS as FORMATS

REPORT_FILE = "export_report.json"
ANSWER_CASE = "answers"  # the case the answer signature is verified on
TEXT_TFLITE_FILE = "model_text.tflite"
_TEXT_CASES = {
    "text_single": ["Héllo wörld, naïve café résumé.", "The quick brown fox jumps.",
                    "日本語のテキスト 中文字符"],
    "text_pair": (["Is this a question?", "Ångström units", "short"],
                  ["Yes, it is an answer.", "measure tiny lengths, très petites", "x"]),
}


def export(model_or_path, output_dir, formats=FORMATS, quantize=("none",), max_seq_length=None,
           text_signatures=False, tokenizer=None, calibration_data=None, serving_version=None,
           eval_file=None, task=None, max_eval_examples=None, answer_settings=None):
    """Export `model_or_path` into `output_dir` and return the report (also written to
    `output_dir/export_report.json`).

    `model_or_path`: a kerasbert Keras model, a `.keras` file, a `kerasbert-pretrain` or
    `kerasbert-finetune` directory, or a Hugging Face folder. Paths (this one, `output_dir`,
    `calibration_data`, `eval_file`, `tokenizer`) may be local or TensorFlow file-system URLs
    (`gs://`, `s3://`, `hdfs://`, ...): artifacts are built and verified in a local folder,
    which is then copied to a remote `output_dir` with `export_report.json` last. `formats`: any of
    `saved_model`, `tflite`, `onnx`. `quantize`: the TFLite variants, any of `none`
    (`model.tflite`), `float16`, `dynamic_int8`, `int8` (full integer, calibrated on the
    first lines of the text files `calibration_data`; the lines after them are where the
    quantized variants are judged); with `onnx`, `dynamic_int8` also writes
    `model_dynamic_int8.onnx` (`model.onnx` is written whatever `quantize` is: ONNX Runtime's
    fused graph when that verifies, else the unfused one; `onnx_runtime_fusion` in its report
    entry says which). `text_signatures`: add `serve_text`, `serve_text_pair`
    and `serve_examples` to the SavedModel and, with `tflite`, write `model_text.tflite`
    (WordPiece tokenizers; any other is an error), using `tokenizer` or the model's own.
    With text signatures, a multiple-choice, span-QA or token-classification model also gets
    its answer signature (`serve_choices`, `serve_question`, `serve_entities`:
    `kerasbert.export.answer_signatures`), decoding with the `AnswerSettings` fields given in
    `answer_settings` (a dict, e.g. `{"doc_stride": 64}`), the others from the fine-tuning
    run's record when `model_or_path` is a `kerasbert-finetune` folder, else the defaults.
    `max_seq_length`: the text signatures' window (default: the fine-tuning run's, else 128).
    `serving_version`: put the SavedModel in `saved_model/<N>/`, TF Serving's layout.
    `eval_file` and `task`: a labelled file in any format `kerasbert-finetune` reads for
    `task` (its first `max_eval_examples` examples); quantized variants are then judged by
    that task's metric (see `kerasbert.export.compare` and `kerasbert.export.labelled`).

    Every artifact is reloaded in a fresh process and compared with the Keras model;
    on any failure `ExportError` names the artifact and its numbers, and nothing is left at
    `output_dir`.

    Example:
    >>> import os, tempfile, kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1, max_positions=32)
    >>> report = export(encoder, os.path.join(tempfile.mkdtemp(), "out"), formats=("onnx",),
    ...                 max_seq_length=32)
    >>> sorted(report["artifacts"]), report["artifacts"]["model.onnx"]["verified"]
    (['model.onnx'], True)
    """
    formats, quantize, calibration_data = _checked_choices(formats, quantize, calibration_data)
    if (eval_file is None) != (task is None):
        raise ExportError("--eval_file needs --task (the kerasbert-finetune task whose format "
                          "and metric the file has)" if task is None else
                          f"--task={task} names the task of a labelled file; give --eval_file too")
    output_dir = file_system.absolute(output_dir)
    if file_system.exists(output_dir) and (not file_system.isdir(output_dir)
                                           or file_system.listdir(output_dir)):
        raise ExportError(f"{output_dir}: already exists and is not empty; export writes a new "
                          "directory")
    model, tokenizer = load_export_model(model_or_path, tokenizer)
    settings = _answer_settings(model_or_path, max_seq_length, answer_settings)
    max_seq_length = settings.max_seq_length
    config = encoder_of(model).config
    if max_seq_length > config.max_sequence_length or max_seq_length < 4:
        raise ExportError(f"max_seq_length={max_seq_length}: {model.name} numbers at most "
                          f"{config.max_sequence_length} positions (and at least 4 are needed)")
    if text_signatures:
        _check_text_signatures(model, tokenizer, formats, max_seq_length)
    quantized = _makes_quantized_variants(formats, quantize)
    if quantized:
        _check_quantized_judging(model, tokenizer)
    calibrate = "int8" in quantize and "tflite" in formats
    sets = text_sets(calibration_data, calibrate=calibrate)
    maker = CaseMaker(model, tokenizer, max_seq_length, sets)
    if calibrate:
        maker.calibration_inputs()  # refuses early when there is no tokenizer
    serve = serving_function(model)
    labelled = None
    if eval_file is not None:
        labelled = LabelledSet(task, eval_file, model, tokenizer, max_seq_length,
                               max_eval_examples)
        labelled.reference = [_numpy(serve(batch)) for batch in labelled.batches]
        labelled.float_evaluation = labelled.score(labelled.reference)
        if quantized:
            _check_labelled_judging_inputs(labelled)

    work = TemporarySibling(output_dir, "partial", folder=True)  # and a killed run's removed
    work_dir = work.path
    try:
        builder = _ArtifactBuilder(model, tokenizer, maker, work_dir, settings, serve,
                                   labelled, quantized)
        if "saved_model" in formats:
            builder.saved_model(text_signatures, serving_version)
        if "tflite" in formats:
            builder.tflite(quantize)
            if text_signatures:
                builder.text_tflite()
        if "onnx" in formats:
            builder.onnx(quantize)
        _ArtifactVerifier(builder).verify()
        texts = sets.describe()
        texts["judging"]["inputs"] = builder.judged_on
        report = make_report(model, tokenizer, builder.artifacts, max_seq_length, OPSET,
                             texts, _labelled_report(labelled), settings)
        write_report(os.path.join(work_dir, REPORT_FILE), report)
        work.publish()  # over an empty output_dir too
    except BaseException:
        work.discard()
        raise
    return report


def _checked_choices(formats, quantize, calibration_data):
    formats = [formats] if isinstance(formats, str) else list(formats)
    quantize = [quantize] if isinstance(quantize, str) else list(quantize)
    unknown = [name for name in formats if name not in FORMATS]
    if unknown or not formats:
        raise ExportError(f"unknown format(s) {unknown or formats}; choose from {list(FORMATS)}")
    unknown = [name for name in quantize if name not in QUANTIZATIONS]
    if unknown or not quantize:
        raise ExportError(f"unknown quantization(s) {unknown or quantize}; choose from "
                          f"{list(QUANTIZATIONS)}")
    if "int8" in quantize and not calibration_data:
        raise ExportError("int8 (full-integer) quantization needs calibration_data "
                          "(--calibration_data): text files run through the model's tokenizer")
    unmade = [name for name in quantize if not any(
        name in _VARIANTS_MADE_BY[format_name] for format_name in formats)]
    if unmade:
        makers = [format_name for format_name in FORMATS
                  if unmade[0] in _VARIANTS_MADE_BY[format_name]]
        raise ExportError(f"--quantize={unmade[0]}: no format in --formats={','.join(formats)} "
                          f"makes that variant (only {' or '.join(makers)} does); add it to "
                          "--formats or leave the variant out of --quantize")
    if calibration_data:
        calibration_data = [calibration_data] if isinstance(calibration_data, str) else list(
            calibration_data)
        missing = [path for path in calibration_data if not file_system.isfile(path)]
        if missing:
            raise ExportError(f"calibration data {missing[0]}: no such file")
    return formats, quantize, calibration_data


# The variants of --quantize each format writes (model.onnx and the SavedModel are float).
_VARIANTS_MADE_BY = {"saved_model": ("none",), "tflite": QUANTIZATIONS,
                     "onnx": ("none", "dynamic_int8")}


def _makes_quantized_variants(formats, quantize):
    """Whether the export writes any quantized file."""
    return any(name != "none" and name in _VARIANTS_MADE_BY[format_name]
               for name in quantize for format_name in formats)


def _check_quantized_judging(model, tokenizer):
    """Refuse, before anything is built, quantized variants that could not be judged as the
    rule says: every output of a known kind, and real text to judge them on."""
    output_kinds(model)
    if tokenizer is None:
        raise ExportError(f"{model.name}: quantized variants are judged on real text run through "
                          "the model's tokenizer, and the model has none known; pass --tokenizer "
                          "(or export with --quantize=none)")


def _check_labelled_judging_inputs(labelled):
    count = _input_count(labelled.batches)
    if count < MIN_JUDGING_INPUTS:
        raise ExportError(f"--eval_file {labelled.path}: {count} inputs of {labelled.task.name} "
                          f"(from {labelled.examples_read} examples); quantized variants are "
                          f"judged on at least {MIN_JUDGING_INPUTS}: give a larger --eval_file or "
                          "raise --max_eval_examples")


def _answer_settings(model_or_path, max_seq_length, given):
    """The `AnswerSettings` of an export: `given` fields, else the fine-tuning run's record,
    else the defaults; `max_seq_length` likewise."""
    fields = {field.name for field in dataclasses.fields(AnswerSettings)}
    unknown = sorted(set(given or {}) - fields)
    if unknown:
        raise ExportError(f"answer_settings: unknown setting {unknown[0]!r}; choose from "
                          f"{sorted(fields)}")
    settings = (AnswerSettings() if isinstance(model_or_path, keras.Model)
                else recorded_settings(os.fspath(model_or_path), AnswerSettings()))
    if max_seq_length is not None:
        settings = settings.replace(max_seq_length=max_seq_length)
    return settings.replace(**(given or {}))


def _check_text_signatures(model, tokenizer, formats, max_seq_length):
    """Refuse, before anything is built, text signatures that cannot be made as asked."""
    from kerasbert.export.text_tflite import check_text_tflite

    if tokenizer is None:
        raise ExportError(f"{model.name}: text signatures need a tokenizer and the model has none "
                          "known; pass tokenizer= (--tokenizer) or export a Hugging Face folder "
                          "with its tokenizer files, or export without --text_signatures")
    if "masked_lm_positions" in model.input:
        raise ExportError(f"{model.name}: text signatures take whole texts, but this pretraining "
                          "model also needs masked_lm_positions; export it without "
                          "--text_signatures")
    if "tflite" not in formats:
        return
    try:
        check_text_tflite(model, tokenizer, max_seq_length)
    except ValueError as error:
        opt_out = ("leave tflite out of --formats to get the SavedModel's text signatures alone, "
                   "or export without --text_signatures" if "saved_model" in formats else
                   "export without --text_signatures")
        raise ExportError(f"{TEXT_TFLITE_FILE} cannot be built, and --text_signatures with tflite "
                          f"in --formats asks for it: {error}; {opt_out}") from None


def _labelled_report(labelled):
    if labelled is None:
        return None
    evaluation = labelled.float_evaluation
    return {**labelled.describe(), "float_metrics": evaluation.metrics,
            "float_score_points": round(labelled.points(evaluation), 6),
            "tolerance_points": METRIC_TOLERANCE_POINTS}


class _ArtifactBuilder:
    """Writes the artifacts into `work_dir`: each one's report entry (`artifacts`) and, per
    runtime, the calls a fresh process is to make on it (`runs`), for `_ArtifactVerifier`."""

    def __init__(self, model, tokenizer, maker, work_dir, answer_settings, serve, labelled,
                 quantized):
        self.model, self.tokenizer, self.maker = model, tokenizer, maker
        self.work_dir, self.answer_settings = work_dir, answer_settings
        self.max_seq_length = answer_settings.max_seq_length
        self.serve = serve
        self.labelled = labelled
        self.kinds = output_kinds(model, strict=False)
        self.cases = maker.verification_cases()
        self.latency_input = maker.latency_input()
        # Quantized files are judged on the labelled file's own inputs when there is one.
        self.agreement_batches = (maker.judging_inputs() if quantized and labelled is None
                                  else [])
        self.judged_on = _judged_on(maker, labelled, self.agreement_batches)
        self.artifacts = {}    # name -> report entry
        self.candidates = {}   # name -> report entry of a file that replaces an artifact if it verifies
        self.runs = {}         # runtime -> list of artifact dicts (path, calls, ...)

    def saved_model(self, text_signatures, serving_version):
        relative = "saved_model" if serving_version is None else os.path.join(
            "saved_model", str(int(serving_version)))
        path = os.path.join(self.work_dir, relative)
        tokenizer = self.tokenizer if text_signatures else None
        write_saved_model(self.model, path, tokenizer, self.max_seq_length,
                          answer_settings=self.answer_settings)
        entry = self._entry("saved_model", relative, ops=saved_model_ops(path))
        calls = self._id_calls()
        if text_signatures:
            calls += self._text_calls(TEXT_SIGNATURES) + self._answer_calls()
        self._schedule("saved_model", entry, {"path": path, "calls": calls,
                                              "latency": self._latency_call()}, "float32")

    def tflite(self, quantize):
        for quantization in quantize:
            name = TFLITE_FILE_NAMES[quantization]
            representative = (self.maker.calibration_inputs() if quantization == "int8"
                              else None)
            try:
                flatbuffer = convert_to_tflite(self.serve, self.model, quantization,
                                               representative)
                require_builtin_ops(flatbuffer, name)
            except ExportError:
                raise
            except (ValueError, RuntimeError) as error:
                raise ExportError(f"{name}: conversion failed: {error}") from None
            path = os.path.join(self.work_dir, name)
            with open(path, "wb") as file:
                file.write(flatbuffer)
            entry = self._entry(name, name, ops=op_inventory(flatbuffer), quantization=quantization)
            judged = "float32" if quantization == "none" else "quantized"
            calls = (self._id_calls() if judged == "float32" else
                     self._agreement_calls() + self._labelled_calls())
            self._schedule("tflite", entry, {"path": path, "calls": calls,
                                             "latency": self._latency_call()}, judged)

    def text_tflite(self):
        from kerasbert.export.text_tflite import text_tflite_model
        from kerasbert.export.text_tflite_answers import TEXT_TFLITE_ANSWERS
        try:
            flatbuffer = text_tflite_model(self.model, self.tokenizer, self.max_seq_length,
                                           settings=self.answer_settings)
        except (ValueError, RuntimeError, tf.errors.OpError) as error:
            raise ExportError(f"{TEXT_TFLITE_FILE}: conversion failed: {error}") from None
        path = os.path.join(self.work_dir, TEXT_TFLITE_FILE)
        with open(path, "wb") as file:
            file.write(flatbuffer)
        entry = self._entry(TEXT_TFLITE_FILE, TEXT_TFLITE_FILE, ops=op_inventory(flatbuffer))
        self._schedule("text_tflite", entry, {"path": path, "custom_ops": "tensorflow_text",
                                              "calls": self._text_calls(("serve_text",))
                                              + self._answer_calls(TEXT_TFLITE_ANSWERS.values())},
                       "float32")

    def onnx(self, quantize):
        """`model.onnx` (ONNX Runtime's fused graph when that verifies, see `_fused_onnx`) and,
        with `dynamic_int8` in `quantize`, `model_dynamic_int8.onnx`."""
        proto = convert_to_onnx(self.model)
        path = os.path.join(self.work_dir, ONNX_FILE_NAMES["none"])
        onnx.save(proto, path)
        entry = self._entry("model.onnx", "model.onnx", ops=onnx_op_inventory(proto),
                            opset=OPSET)
        self._schedule("onnx", entry, {"path": path, "calls": self._id_calls(),
                                       "latency": self._latency_call()}, "float32")
        if "dynamic_int8" in quantize:
            self._dynamic_int8_onnx(path)
        self._fused_onnx(path, entry)

    def _dynamic_int8_onnx(self, source):
        name = ONNX_FILE_NAMES["dynamic_int8"]
        path = os.path.join(self.work_dir, name)
        try:
            quantize_dynamic_int8(source, path)
        except (ValueError, RuntimeError, onnx.checker.ValidationError) as error:
            raise ExportError(f"{name}: quantization failed: {error}") from None
        entry = self._entry(name, name, ops=onnx_op_inventory(onnx.load(path)),
                            quantization="dynamic_int8", opset=OPSET)
        self._schedule("onnx", entry, {"path": path, "latency": self._latency_call(),
                                       "calls": self._agreement_calls() + self._labelled_calls()},
                       "quantized")

    def _fused_onnx(self, path, entry):
        """Schedule ONNX Runtime's fused graph of `path` as a candidate for `model.onnx`
        (`_ArtifactVerifier` puts it in place if it verifies); the report's
        `onnx_runtime_fusion` says what was fused, or why `model.onnx` is not fused."""
        candidate = os.path.join(self.work_dir, FUSED_CANDIDATE_FILE)
        try:
            fusion = fused_candidate(path, encoder_of(self.model).config, candidate)
        except Exception as error:  # an optional optimization: reported, never fatal
            fusion = {"fusions": {}, "reason": "ONNX Runtime's transformer optimizer failed: "
                      f"{type(error).__name__}: {error}"}
        entry["onnx_runtime_fusion"] = {"fused": False, **fusion}
        if "reason" in fusion:
            return
        candidate_entry = {"path": FUSED_CANDIDATE_FILE, "opset": OPSET,
                           "ops": onnx_op_inventory(onnx.load(candidate)),
                           "judged_as": "float32"}
        self.candidates[FUSED_CANDIDATE_FILE] = candidate_entry
        self.runs["onnx"].append({"path": candidate, "calls": self._id_calls(),
                                  "latency": self._latency_call(), "name": FUSED_CANDIDATE_FILE,
                                  "candidate_for": "model.onnx"})

    # --- calls and inputs ---

    def _id_calls(self):
        return [{"signature": "serving_default", "case": case.name,
                 "inputs": sorted(case.inputs)} for case in self.cases]

    def _agreement_calls(self):
        return [{"signature": "serving_default", "case": f"agreement{index}",
                 "inputs": sorted(batch)} for index, batch in enumerate(self.agreement_batches)]

    def _labelled_calls(self):
        if self.labelled is None:
            return []
        return [{"signature": "serving_default", "case": f"eval{index}", "inputs": sorted(batch)}
                for index, batch in enumerate(self.labelled.batches)]

    def _latency_call(self):
        return {"signature": "serving_default", "case": "latency",
                "inputs": sorted(self.latency_input)}

    def _text_calls(self, signatures):
        inputs = {"serve_text": ("text_single", ["text"]),
                  "serve_text_pair": ("text_pair", ["text_a", "text_b"]),
                  "serve_examples": ("examples", ["examples"])}
        return [{"signature": name, "case": inputs[name][0], "inputs": inputs[name][1]}
                for name in signatures]

    def _answer_calls(self, signatures=None):
        """The call of the model's answer signature, if it has one (among `signatures`)."""
        signature = answer_signature(self.model)
        if signature is None or (signatures is not None and signature not in signatures):
            return []
        return [{"signature": signature, "case": ANSWER_CASE,
                 "inputs": sorted(verification_inputs(self.model))}]

    def _entry(self, name, relative, **extra):
        entry = {"path": relative, **extra}
        self.artifacts[name] = entry
        return entry

    def _schedule(self, runtime, entry, artifact, judged):
        artifact = dict(artifact, name=next(k for k, v in self.artifacts.items() if v is entry))
        entry["judged_as"] = judged
        self.runs.setdefault(runtime, []).append(artifact)


class _ArtifactVerifier:
    """Runs what an `_ArtifactBuilder` made in fresh processes, compares the outputs with the
    Keras model's and writes the checks into the artifacts' report entries."""

    def __init__(self, built):
        self.built = built
        self.failures = []

    def verify(self):
        """Check every artifact; `ExportError` naming the failures (the first five)."""
        built = self.built
        inputs = self.input_arrays()
        references = self._references()
        with tempfile.TemporaryDirectory(dir=built.work_dir, prefix=".scratch-") as scratch:
            for runtime, artifacts in built.runs.items():
                outputs, info = run_in_fresh_process(
                    "tflite" if runtime == "text_tflite" else runtime, artifacts, inputs,
                    scratch, needs_tensorflow_text=runtime == "saved_model")
                if info.pop("_imported_kerasbert"):
                    self.failures.append(f"{runtime}: the fresh process imported kerasbert")
                self._judge_runtime(runtime, artifacts, info, outputs, references)
        for entry in built.artifacts.values():
            entry.update(file_facts(os.path.join(built.work_dir, entry["path"])))
        if self.failures:
            raise ExportError("; ".join(self.failures[:5]) + (
                f" (and {len(self.failures) - 5} more)" if len(self.failures) > 5 else ""))

    def input_arrays(self):
        """Every call's inputs, keyed `"<case>::<input>"`."""
        arrays = {}
        for case in self.built.cases:
            arrays.update({f"{case.name}::{key}": value for key, value in case.inputs.items()})
        for index, batch in enumerate(self.built.agreement_batches):
            arrays.update({f"agreement{index}::{key}": value for key, value in batch.items()})
        arrays.update({f"latency::{key}": value for key, value in self.built.latency_input.items()})
        for index, batch in enumerate(self.built.labelled.batches if self.built.labelled else []):
            arrays.update({f"eval{index}::{key}": value for key, value in batch.items()})
        single = _TEXT_CASES["text_single"]
        first, second = _TEXT_CASES["text_pair"]
        arrays["text_single::text"] = np.array(single)
        arrays["text_pair::text_a"] = np.array(first)
        arrays["text_pair::text_b"] = np.array(second)
        arrays["examples::examples"] = np.array(_examples(single, [second[0], "", second[2]]),
                                                dtype=object).astype("S")
        for name, texts in verification_inputs(self.built.model).items():
            arrays[f"{ANSWER_CASE}::{name}"] = np.array(texts)
        return arrays

    def _judge_runtime(self, runtime, artifacts, info, outputs, references):
        """Judge each artifact of `runtime` on what its fresh process returned."""
        for artifact in artifacts:
            failures = len(self.failures)
            entry = self._judge_artifact(runtime, artifact, info, outputs, references)
            if artifact.get("candidate_for"):  # its failures only decide whether it is used
                reasons = self.failures[failures:]
                del self.failures[failures:]
                self._settle_candidate(artifact, entry, reasons)

    def _judge_artifact(self, runtime, artifact, info, outputs, references):
        name = artifact["name"]
        entry = self.built.artifacts.get(name) or self.built.candidates[name]
        entry.update(info[name])
        if "error" in entry:
            self.failures.append(f"{name}: fails to load or run in a fresh {runtime} process: "
                                 f"{entry['error']}")
            entry["checks"], entry["verified"] = [], False
            return entry
        self._judge(artifact, entry, outputs, references)
        return entry

    def _settle_candidate(self, artifact, entry, reasons):
        """Put a verified candidate (ONNX Runtime's fused graph) in place of the artifact it is
        for; else remove it, and the artifact's report entry says why."""
        target = self.built.artifacts[artifact["candidate_for"]]
        fusion = target["onnx_runtime_fusion"]
        target_path = os.path.join(self.built.work_dir, target["path"])
        if entry["verified"]:
            os.replace(artifact["path"], target_path)
            fusion.update(fused=True, unfused_ops=target["ops"],
                          unfused_latency_ms=target.get("latency_ms"))
            target.update({key: entry[key] for key in ("ops", "checks", "signatures",
                                                       "latency_ms") if key in entry})
            return
        os.remove(artifact["path"])
        fusion["reason"] = ("the fused graph failed verification, so model.onnx is the unfused "
                            "graph: " + "; ".join(reasons))

    def _references(self):
        """The Keras model's outputs on every call's inputs, by case."""
        references = {}
        for case in self.built.cases:
            references[case.name] = _numpy(self.built.serve(case.inputs))
        for index, batch in enumerate(self.built.agreement_batches):
            references[f"agreement{index}"] = _numpy(self.built.serve(batch))
        labelled = self.built.labelled
        for index, reference in enumerate(labelled.reference if labelled else []):
            references[f"eval{index}"] = reference
        if self.built.tokenizer is not None:
            single = _TEXT_CASES["text_single"]
            first, second = _TEXT_CASES["text_pair"]
            for case, (a, b) in {"text_single": (single, None), "text_pair": (first, second),
                                 "examples": (single, [second[0], "", second[2]])}.items():
                references[case] = self._text_reference(a, b)
            if any(call["case"] == ANSWER_CASE for artifacts in self.built.runs.values()
                   for artifact in artifacts for call in artifact["calls"]):
                references[ANSWER_CASE] = reference_answers(
                    self.built.model, self.built.tokenizer, self.built.answer_settings)
        return references

    def _text_reference(self, texts, pair_texts):
        """The Keras model's outputs on the texts packed at `max_seq_length`, its sequence
        outputs cut to the bucket the text signatures pad the batch to (`padding_buckets`)."""
        outputs, padding_mask = self._text_outputs(texts, pair_texts)
        length = self.built.max_seq_length
        width = expected_width(padding_mask, length)
        return {name: value[:, :width] if is_token_aligned(self.built.kinds, name, value, length)
                else value
                for name, value in outputs.items()}

    def _text_outputs(self, texts, pair_texts):
        """The Keras model's outputs and the padding mask, the texts packed at `max_seq_length`."""
        if pair_texts is not None and not all(pair_texts):
            rows = [self._text_outputs([text], [pair] if pair else None)
                    for text, pair in zip(texts, pair_texts)]
            return ({key: np.concatenate([row[0][key] for row in rows]) for key in rows[0][0]},
                    np.concatenate([row[1] for row in rows]))
        packed = self.built.maker.packed(texts, pair_texts, self.built.max_seq_length)
        if self.built.maker.choices:
            packed = {key: value[:, :1] for key, value in packed.items()}
        return _numpy(self.built.serve(packed)), packed["padding_mask"]

    def _judge(self, artifact, entry, outputs, references):
        name = artifact["name"]
        produced = {}  # case -> {output: array}
        for call in artifact["calls"]:
            prefix = f"{name}::{call['signature']}::{call['case']}::"
            values = {key[len(prefix):]: value for key, value in outputs.items()
                      if key.startswith(prefix)}
            if call["case"] == ANSWER_CASE:
                expected = answer_output_names(self.built.model, self.built.answer_settings)
            else:
                expected = sorted(references[call["case"]])
            if call["signature"] not in ("serving_default", answer_signature(self.built.model)):
                expected = sorted(expected + list(answer_names(self.built.model)))
            if sorted(values) != expected:
                self.failures.append(f"{name}: signature {call['signature']} returns "
                                     f"{sorted(values)}, expected {expected}")
                entry["checks"], entry["verified"] = [], False
                return
            produced[call["case"], call["signature"]] = values
        if entry["judged_as"] == "float32":
            checks = self._float_checks(name, produced, references)
            checks += self._padding_checks(name, outputs)
            checks += self._answer_checks(name, produced, references)
            entry["verified"] = all(check["passed"] for check in checks)
        else:
            checks, entry["verified"] = self._quantized_checks(name, entry, produced, references)
        entry["checks"] = checks

    def _float_checks(self, name, produced, references):
        checks = []
        for (case, signature), values in produced.items():
            if case == ANSWER_CASE:  # judged by `_answer_checks`
                continue
            for output in sorted(set(values) & set(references[case])):
                result = float_difference(references[case][output], values[output])
                passed = result["max_rel"] <= FLOAT32_TOLERANCE
                checks.append({"signature": signature, "case": case, "output": output,
                               **result, "passed": passed})
                if not passed:
                    self.failures.append(
                        f"{name}: output {output!r} on {signature} case {case} differs by "
                        f"{result['max_abs']:.3g} (relative {result['max_rel']:.3g})")
        return checks

    def _quantized_checks(self, name, entry, produced, references):
        """The strict rule (`kerasbert.export.compare`) on the judging inputs, which with a
        labelled set are its own inputs and its task metric decides too; the checks and
        whether the artifact passes."""
        labelled = self.built.labelled
        prefix = "eval" if labelled is not None else "agreement"
        cases = [case for case, _ in produced if case.startswith(prefix)]
        judged = self.built.judged_on
        checks = []
        for output, kind in sorted(output_kinds(self.built.model).items()):
            result = agreement(kind,
                               np.concatenate([references[case][output] for case in cases]),
                               np.concatenate([produced[case, "serving_default"][output]
                                               for case in cases]),
                               np.concatenate([self._padding_mask(case) for case in cases]))
            limit = threshold(result, labelled is not None)
            checks.append({"check": "agreement", "output": output, "kind": kind,
                           "judging_inputs": judged["inputs"], **result, "threshold": limit,
                           "passed": passes(result, labelled is not None)})
        entry["agreement"] = {check["output"]: {key: value for key, value in check.items()
                                                if key not in ("check", "output", "passed")}
                              for check in checks}
        entry["judged_on"] = judged
        failed = [f"output {check['output']!r} {_agreement_text(check)}, "
                  f"{'above' if check['metric'] == 'max_error_over_spread' else 'below'} "
                  f"{check['threshold']}" for check in checks if not check["passed"]]
        if labelled is None:
            entry["decided_by"] = "agreement"
            if failed:
                self.failures.append(f"{name}: " + ", ".join(failed))
            return checks, not failed
        evaluation = labelled.score([produced[f"eval{index}", "serving_default"]
                                     for index in range(len(labelled.batches))])
        float_points = labelled.points(labelled.float_evaluation)
        points = labelled.points(evaluation)
        gap = abs(points - float_points)
        metric_passed = gap <= METRIC_TOLERANCE_POINTS
        entry["decided_by"] = "agreement_and_task_metric"
        entry["task_metric"] = {"task": labelled.task.name, "file": labelled.path,
                                "examples": labelled.examples_read,
                                "score_points": round(points, 6),
                                "float_score_points": round(float_points, 6),
                                "gap_points": round(gap, 6),
                                "tolerance_points": METRIC_TOLERANCE_POINTS,
                                "metrics": evaluation.metrics, "passed": metric_passed}
        checks.append({"check": "task_metric", **entry["task_metric"]})
        if not metric_passed:
            failed.insert(0, f"{labelled.task.name} score {points:.2f} against the float "
                          f"model's {float_points:.2f} on {labelled.examples_read} examples of "
                          f"{labelled.path}, {gap:.2f} points apart (at most "
                          f"{METRIC_TOLERANCE_POINTS} allowed)")
        if failed:
            described = ", ".join(_agreement_text(check) for check in checks
                                  if check["check"] == "agreement")
            self.failures.append(f"{name}: " + "; ".join(failed) + f" ({described})")
        return checks, not failed

    def _answer_checks(self, name, produced, references):
        """The text signatures' answers against the Python decoders (`kerasbert.export.answers`,
        `kerasbert.export.answer_signatures`)."""
        checks = []
        for (case, signature), values in produced.items():
            if signature == "serving_default":
                continue
            found = (answer_signature_checks(self.built.model, values, references[case],
                                             FLOAT32_TOLERANCE) if case == ANSWER_CASE
                     else answer_checks(self.built.model, values, FLOAT32_TOLERANCE))
            for check in found:
                checks.append({"signature": signature, "case": case, **check})
                if not check["passed"]:
                    self.failures.append(
                        f"{name}: answer {check['output']!r} on {signature} case {case} is not "
                        "what the Python decoder answers")
        return checks

    def _padding_checks(self, name, outputs):
        """The artifact's outputs at real tokens are the same when the input is padded longer."""
        checks = []
        for case in self.built.cases:
            if case.padded_from is None:
                continue
            length = case.inputs["padding_mask"].shape[-1]
            base_mask = next(c for c in self.built.cases if c.name == case.padded_from).inputs[
                "padding_mask"]
            base_length = base_mask.shape[-1]
            prefix = f"{name}::serving_default::"
            for key in [k for k in outputs if k.startswith(prefix + case.padded_from + "::")]:
                output = key.split("::")[-1]
                short = outputs[key]
                padded = outputs[f"{prefix}{case.name}::{output}"]
                if is_token_aligned(self.built.kinds, output, padded, length):
                    padded = padded[:, :base_length]
                    keep = base_mask.reshape(base_mask.shape + (1,) * (short.ndim - 2)) == 1
                    short, padded = np.where(keep, short, 0.0), np.where(keep, padded, 0.0)
                result = float_difference(short, padded)
                passed = result["max_rel"] <= FLOAT32_TOLERANCE
                checks.append({"check": "padding", "case": case.name, "output": output,
                               **result, "passed": passed})
                if not passed:
                    self.failures.append(
                        f"{name}: output {output!r} at real tokens changes by "
                        f"{result['max_abs']:.3g} when {case.padded_from} is padded to {length}")
        return checks

    def _padding_mask(self, case_name):
        if case_name.startswith("agreement"):
            return self.built.agreement_batches[int(case_name[len("agreement"):])]["padding_mask"]
        if case_name.startswith("eval"):
            return self.built.labelled.batches[int(case_name[len("eval"):])]["padding_mask"]
        for case in self.built.cases:
            if case.name == case_name:
                return case.inputs["padding_mask"]
        return None


def _examples(texts, pair_texts):
    serialized = []
    for text, pair in zip(texts, pair_texts):
        feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[text.encode("utf-8")]))}
        if pair:
            feature["text_pair"] = tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[pair.encode("utf-8")]))
        serialized.append(tf.train.Example(features=tf.train.Features(
            feature=feature)).SerializeToString())
    return serialized


def _numpy(outputs):
    return {key: np.asarray(value) for key, value in outputs.items()}


def _input_count(batches):
    """The number of inputs (rows) in `batches` of model inputs."""
    return sum(len(batch["token_ids"]) for batch in batches)


def _judged_on(maker, labelled, agreement_batches):
    """What the report says quantized files were judged on."""
    if labelled is not None:
        return {"source": labelled.path, "task": labelled.task.name,
                "inputs": _input_count(labelled.batches),
                "shape": f"the {labelled.task.name} examples encoded as the task encodes them"}
    return {"source": maker.sets.source, "inputs": _input_count(agreement_batches),
            "shape": maker.judging_shape()}


def _agreement_text(check):
    """`"argmax_agreement 0.9766 on 256 judging inputs (6 of 256 flipped, 2 near ties)"`."""
    text = f"{check['metric']} {check['value']:.4f} on {check['judging_inputs']} judging inputs"
    broken = (f", {check['non_finite']} with NaN or infinite values"
              if check.get("non_finite") else "")
    if check["metric"] == "argmax_agreement":
        return text + (f" ({check.get('flips', 0)} of {check['compared']} flipped, "
                       f"{check.get('near_tie_flips', 0)} near ties{broken})")
    if check["metric"] == "max_error_over_spread":
        return text + (f" (largest error {check.get('max_abs_error', float('inf')):.4g} over a "
                       f"float spread of {check.get('float_spread', 0.0):.4g}{broken})")
    return text + (f" (1st percentile {check.get('percentile_1_cosine', -1.0):.4f} over "
                   f"{check['compared']} vectors{broken})")
