"""The main job's stages: the console script each one runs, with which flags, what it leaves
behind and the one metric that says how it went.

Every stage is a binary a user could run alone; `flagfile_lines` gives the exact flags, which
the runner writes to `flags/<stage>.flags` in the run directory (rerun one stage with
`kerasbert-<script> --flagfile=runs/<run>/flags/<stage>.flags`).
"""

import dataclasses
import json
from typing import Callable

from kerasbert import file_system
from kerasbert.data import demo
from kerasbert.data.tfrecords import count_records
from kerasbert.json_files import read_json_file
from kerasbert.demo_pipeline.curves import read_scalars

TASK = "wordnet_gloss"
# A few held-out test glosses, classified by the exported raw-text TFLite file and SavedModel.
SENTENCES_FILE = "sentences.txt"
SENTENCE_COUNT = 6
PREDICTIONS_FILE = "predictions.jsonl"  # kerasbert-predict's answers, one JSON object a line
# Dev glosses: the in-domain text on which the export measures its quantized classifier's
# argmax agreement.
AGREEMENT_FILE = "agreement_texts.txt"
AGREEMENT_COUNT = 256
# The export judges its quantized classifier by the task metric on the first this many dev
# glosses (`--max_eval_examples`), against the Keras model's on the same glosses.
EXPORT_EVAL_EXAMPLES = 2000


@dataclasses.dataclass(frozen=True)
class Settings:
    """Sizes of a main-job run: `FULL` (under 10 minutes on 2 cores) or `QUICK` (what tests use).

    >>> QUICK.pretrain_steps < FULL.pretrain_steps
    True
    """

    corpus_shards: int
    vocab_size: int
    dupe_factor: int
    pretrain_seq_length: int
    max_predictions_per_seq: int
    pretrain_steps: int
    pretrain_batch_size: int
    pretrain_learning_rate: float
    finetune_examples: int
    finetune_epochs: int
    finetune_seq_length: int
    finetune_batch_size: int
    finetune_learning_rate: float


# The recipe of tests/training/test_finetune_learning.py, shortened to fit 10 minutes on 2 cores.
FULL = Settings(corpus_shards=3, vocab_size=8000, dupe_factor=5, pretrain_seq_length=64,
                max_predictions_per_seq=10, pretrain_steps=2500, pretrain_batch_size=32,
                pretrain_learning_rate=1e-3, finetune_examples=8000, finetune_epochs=2,
                finetune_seq_length=32, finetune_batch_size=32, finetune_learning_rate=1e-3)
QUICK = dataclasses.replace(FULL, corpus_shards=1, vocab_size=2000, dupe_factor=1,
                            pretrain_steps=60, finetune_examples=640, finetune_epochs=1)


@dataclasses.dataclass
class Stage:
    """One step of the main job.

    `script` runs with `flags`; `output` (relative to the run directory) is what it makes;
    a `resumable` stage continues from its own checkpoints when rerun, any other starts
    over (its unfinished output is deleted first); `describe(run_dir)` gives the metric
    shown after it, as `(text, values)`.

    >>> stage = plan("/runs/1", QUICK)[0]
    >>> stage.name, stage.script, stage.flagfile_lines()[0]
    ('vocabulary', 'kerasbert-vocab', '--input_files=...pydocs-00000-of-00004.txt.gz')
    """

    name: str
    title: str
    script: str
    flags: dict
    output: str
    resumable: bool
    describe: Callable

    def flagfile_lines(self):
        """The flags as `--name=value` lines (lists comma-joined, booleans as `--[no]name`)."""
        lines = []
        for name, value in self.flags.items():
            if isinstance(value, bool):
                lines.append(f"--{'' if value else 'no'}{name}")
            elif isinstance(value, (list, tuple)):
                lines.append(f"--{name}={','.join(str(item) for item in value)}")
            else:
                lines.append(f"--{name}={value}")
        return lines


def plan(run_dir, settings, precision="float32"):
    """The stages of a run in `run_dir`, in order; `precision`: the dtype policy the pretraining
    and fine-tuning stages train under (`--mixed_precision`). The export rebuilds a bfloat16
    `model.keras` in float32 (`kerasbert.export.model_sources.float32_model`)."""
    def path(*parts):
        return file_system.join(run_dir, *parts)

    corpus = demo.pretraining_corpus_files()[:settings.corpus_shards]
    gloss_files = demo.classification_files()
    vocab_file = path("vocabulary", "vocab.txt")
    finetune_common = {
        "task": TASK, "train_file": gloss_files["train"], "dev_file": gloss_files["dev"],
        "init_from": path("pretrain"), "max_seq_length": settings.finetune_seq_length,
        "max_train_examples": settings.finetune_examples,
        "num_train_epochs": settings.finetune_epochs,
        "train_batch_size": settings.finetune_batch_size, "eval_batch_size": 256,
        "learning_rate": settings.finetune_learning_rate, "mixed_precision": precision, "seed": 0}

    def finetune(arm, from_scratch):
        return Stage(
            f"finetune_{arm}", f"fine-tune the {arm.replace('_', ' ')} encoder on WordNet glosses",
            "kerasbert-finetune",
            {**finetune_common, "from_scratch": from_scratch, "model_dir": path(f"finetune_{arm}")},
            f"finetune_{arm}/model.keras", True,
            lambda run_dir: _eval_metrics(file_system.join(run_dir, f"finetune_{arm}"), "dev"))

    def test(arm):
        return Stage(
            f"test_{arm}",
            f"score the {arm.replace('_', ' ')} classifier on the held-out test split",
            "kerasbert-finetune",
            {"task": TASK, "mode": "eval", "init_from": path(f"finetune_{arm}", "model.keras"),
             "dev_file": gloss_files["test"], "vocab_file": vocab_file,
             "max_seq_length": settings.finetune_seq_length, "eval_batch_size": 256,
             "model_dir": path(f"test_{arm}")},
            f"test_{arm}/eval_results.json", False,
            lambda run_dir: _eval_metrics(file_system.join(run_dir, f"test_{arm}"), "test"))

    return [
        Stage("vocabulary", "train a WordPiece vocabulary on the shipped corpus", "kerasbert-vocab",
              {"input_files": corpus, "type": "wordpiece", "vocab_size": settings.vocab_size,
               "output_dir": path("vocabulary")},
              "vocabulary/vocab.txt", False, _vocabulary_metric),
        Stage("pretraining_data", "build NSP + MLM pretraining TFRecords",
              "kerasbert-create-pretraining-data",
              {"input_file": corpus, "output_file": path("data", "train.tfrecord"),
               "vocab_file": vocab_file, "max_seq_length": settings.pretrain_seq_length,
               "max_predictions_per_seq": settings.max_predictions_per_seq,
               "dupe_factor": settings.dupe_factor, "num_shards": 4, "objective": "nsp"},
              "data", False, _data_metric),
        Stage("pretrain", "pretrain a 2-layer BERT (MLM + NSP)", "kerasbert-pretrain",
              {"model": "bert_tiny_uncased", "input_files": path("data", "train-*"),
               "vocab_file": vocab_file, "max_seq_length": settings.pretrain_seq_length,
               "max_predictions_per_seq": settings.max_predictions_per_seq, "objective": "nsp",
               "train_steps": settings.pretrain_steps,
               "batch_size": settings.pretrain_batch_size,
               "learning_rate": settings.pretrain_learning_rate,
               "warmup_steps": settings.pretrain_steps // 10,
               "steps_per_loop": max(1, min(100, settings.pretrain_steps // 20)),
               "checkpoint_interval": max(1, settings.pretrain_steps // 4),
               "mixed_precision": precision, "model_dir": path("pretrain")},
              "pretrain", True, _pretraining_metric),
        finetune("pretrained", False),
        finetune("from_scratch", True),
        test("pretrained"),
        test("from_scratch"),
        Stage("export", "export the fine-tuned classifier and verify every artifact",
              "kerasbert-export",
              {"model": path("finetune_pretrained", "model.keras"), "output_dir": path("export"),
               "formats": ["saved_model", "tflite", "onnx"], "quantize": ["none", "dynamic_int8"],
               "text_signatures": True, "tokenizer": path("vocabulary"),
               "calibration_data": path(AGREEMENT_FILE),
               "eval_file": gloss_files["dev"], "task": TASK,
               "max_eval_examples": EXPORT_EVAL_EXAMPLES,
               "max_seq_length": settings.finetune_seq_length},
              "export", False, _export_metric),
        Stage("classify", "label raw sentences with the TFLite file and the SavedModel "
              "(the labels come out of the exported graphs)",
              "kerasbert-predict",
              {"export_dir": path("export"), "input_file": path(SENTENCES_FILE),
               "output_file": path("classify", PREDICTIONS_FILE)},
              f"classify/{PREDICTIONS_FILE}", False, _classify_metric),
    ]


def _read_json(path):
    return read_json_file(path, f"a {file_system.basename(path)}", expected=None)


def _vocabulary_metric(run_dir):
    with file_system.open_file(file_system.join(run_dir, "vocabulary", "vocab.txt")) as file:
        size = sum(1 for _ in file)
    return f"{size:,} tokens", {"vocabulary_size": size}


def _data_metric(run_dir):
    files = file_system.glob(file_system.join(run_dir, "data", "train-*"))
    count = sum(count_records(path) for path in files)
    return f"{count:,} instances in {len(files)} shards", {"instances": count}


def _pretraining_metric(run_dir):
    scalars = read_scalars(file_system.join(run_dir, "pretrain", "train"))
    values = {name: points[-1][1] for name, points in scalars.items()
              if name in ("loss", "mlm_logits_accuracy", "nsp_logits_accuracy")}
    return (f"MLM accuracy {values['mlm_logits_accuracy']:.3f}, NSP accuracy "
            f"{values['nsp_logits_accuracy']:.3f}, loss {values['loss']:.3f}"), values


def _eval_metrics(directory, split):
    results = _read_json(file_system.join(directory, "eval_results.json"))
    values = {f"{split}_{name}": results[name] for name in ("accuracy", "matthews_correlation")}
    return (f"{split} accuracy {results['accuracy']:.3f}, MCC "
            f"{results['matthews_correlation']:.3f}"), values


def _export_metric(run_dir):
    """The artifacts, and for each quantized one its strict argmax agreement on the judging
    texts and its task score's distance from the Keras model's on the dev glosses."""
    report = _read_json(file_system.join(run_dir, "export", "export_report.json"))
    artifacts = report["artifacts"]
    values = {"artifacts": sorted(artifacts),
              "verified": all(entry["verified"] for entry in artifacts.values())}
    text = f"{len(artifacts)} artifacts verified"
    for name, entry in sorted(artifacts.items()):
        if "agreement" not in entry:
            continue
        agreement = min(value["value"] for value in entry["agreement"].values())
        metric = entry["task_metric"]
        stem, _, extension = name[len("model_"):].rpartition(".")
        variant = stem if extension == "tflite" else f"{stem}_{extension}"
        text += (f"; {variant}: agreement {agreement:.3f}, dev score "
                 f"{metric['score_points']:.2f} (Keras {metric['float_score_points']:.2f})")
        values[variant] = {"agreement": agreement, "dev_score_gap_points": metric["gap_points"]}
    return text, values


def _classify_metric(run_dir):
    path = file_system.join(run_dir, "classify", PREDICTIONS_FILE)
    predictions = [json.loads(line) for line in file_system.read_text(path).splitlines()]
    return (f"{len(predictions)} sentences, same labels from TFLite and SavedModel",
            {"predictions": predictions})
