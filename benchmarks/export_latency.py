"""Exported-model latency: Keras vs SavedModel vs TFLite (4 variants) vs ONNX Runtime vs PyTorch.

Builds, in one process on CPU, a fine-tuned-size sentence classifier: a
transformers `BertForSequenceClassification` of kerasbert preset `--preset`
(default "bert_base_uncased": 12 layers, hidden 768, vocab 30522) with random
weights (`torch.manual_seed`), 2 labels, in eval mode. Random weights give
logits near zero, so the classifier (weights and bias) is rescaled on the
calibration texts (below): `--classifier scaled` (default) to a mean |logit
margin| (label 1 minus label 0) of `SCALED_MARGIN`. Argmax does not change with
scale, though, and a random encoder's pooled output hardly depends on its input,
so nearly every text gets the same label and agreement is close to trivially
100% (the label split and the margins are printed). `--classifier centred`
instead centres the margin (median 0, standard deviation `CENTRED_MARGIN_STD`),
as a fine-tuned head's would be, about half the texts on each side; then the
quantization error of a random encoder flips a few percent of the labels, and
the export's own rule (argmax agreement >= 0.99, every flip counted) refuses
the quantized TFLite files.

The model is saved with `save_pretrained` into a temporary folder with the
shipped WordPiece vocabulary (`kerasbert.data.demo.vocabulary_dir("wordpiece")`,
3,568 tokens; the model keeps its 30,522 rows), and that folder is exported with
`kerasbert.export.export` (SavedModel, TFLite float32 / float16 / dynamic int8 /
int8, ONNX, max_seq_length 128; `calibration_data` a text file of
`CALIBRATION_LINES` lines of the shipped corpus: full int8 calibrates on the
first 64, and the export judges the quantized files on the 256 after them). The
export runs in child processes, so that its memory is given
back before the runtimes are loaded, and is timed (it converts, then reloads and
checks every artifact in fresh processes of its own). By default it is two
`export` calls, (saved_model, tflite) and then (onnx): on BERT-base, one call
with every format goes past 21.5 GB of memory (tf2onnx's conversion alone peaks
at ~16.5 GB, on top of what the four TFLite conversions leave behind) and the
kernel's out-of-memory killer ends it on a 23 GB machine; `--one_export_call`
makes it one call.

Then, in this process, each runtime runs the classifier:

- Keras serving: `kerasbert.convert.from_hf(folder)` called through
  `kerasbert.export.signatures.serving_function(model)`, the function every
  artifact is made from (no XLA); it is the reference for agreement;
- Keras XLA: `kerasbert.models.inference_function(model)`;
- SavedModel: `tf.saved_model.load(saved_model).signatures["serving_default"]`;
- TFLite: `ai_edge_litert.interpreter.Interpreter(model_path, num_threads=2)`,
  signature runner `serving_default`, one per variant;
- ONNX Runtime: `InferenceSession(model.onnx)`, CPU provider,
  `intra_op_num_threads=2` (ONNX Runtime's transformer-optimizer fusions when the export
  verified them: the export report's `onnx_runtime_fusion` is printed), and the same for
  `model_dynamic_int8.onnx` (`quantize_dynamic`, judged by the export's strict quantized
  rule);
- PyTorch eager: the transformers model reloaded from the folder,
  `torch.set_num_threads(2)`, `torch.no_grad()`, default attention
  implementation (printed).

Agreement: `AGREEMENT_LINES` other corpus lines, packed by
`kerasbert.tokenizers.from_hf(folder)` at sequence 128 (right padding), run in
batches of `AGREEMENT_BATCH`; each runtime's argmax over the logits is compared
with Keras serving's, and the largest absolute logit difference is given.

Latency: batch 1, sequence 128 (one corpus line, padded). Every runtime is
warmed up (`--warmup` calls), then the runtimes are interleaved: `--rounds`
rounds, each calling every runtime `--calls` times in a row (the order rotates
from round to round, with a pause of `SWITCH_PAUSE` between runtimes so that one
runtime's still-spinning worker threads do not slow the next), so a burst of
load from other processes hits all alike.
A call includes reading the logits into numpy; ms is the median over all timed
calls. Size: the artifact on disk (the SavedModel folder, `model.safetensors`
for PyTorch, the weights in memory for the Keras rows).

Then every runtime but Keras serving and the SavedModel is dropped and those
two are timed again the same way: TensorFlow alone in the process, as a server
would run it.

GEMM ceiling: TFLite's FULLY_CONNECTED alone at BERT's feed-forward shapes,
float32 and dynamic-range int8, same threads (`gemm_ceiling`): what the int8
kernels themselves gain on this CPU, whatever the model around them (the
feed-forward and projection matmuls are ~90% of BERT-base's work at seq 128).

Targets: dynamic-int8 TFLite >= 1.8x faster than float32 TFLite, and >= 3.5x
smaller at >= 99% argmax agreement; ONNX Runtime float32 >= 2x faster than
PyTorch eager and ONNX dynamic int8 >= 3x; reloaded SavedModel within 10% of the
in-process Keras path (SavedModel ms / Keras serving ms <= 1.10). The exit status is non-zero only on errors,
never on a missed target; an `ExportError` is printed as is.

Raw text in (`--raw_text`, only that part, in this process, no export): a kerasbert
classifier of the same shape with the shipped WordPiece vocabulary, written as a
SavedModel with text signatures and as the raw-text TFLite file, each once padding every
batch to 128 (as before length buckets, `length_buckets=False`) and once bucketed; the
SavedModel's `serve_text` and the TFLite file's are timed interleaved on one corpus
sentence of 21 word pieces (bucket 32), and each bucketed runtime's logits are compared
with its fixed twin's on texts of several lengths, in one batch and alone. Target: >= 3x
lower latency bucketed, for both. Then what bounds it, at 128 and at 32 tokens: the classifier
alone on ids, only its 2-D kernels as matmuls (and their GFLOP/s), the tokenizer alone.

Run from the repository root, on an otherwise idle machine:

    python benchmarks/export_latency.py                  # BERT-base; the export takes minutes
    python benchmarks/export_latency.py --smoke        # 2 layers, hidden 32, float32: runs?
    python benchmarks/export_latency.py --smoke --raw_text   # the raw-text part, tiny: runs?
    python benchmarks/export_latency.py --num_layers 4 --rounds 3 --calls 5   # mid-size
    python benchmarks/export_latency.py --quantize none dynamic_int8 --keep_dir
    python benchmarks/export_latency.py --raw_text       # raw text in: fixed 128 vs bucketed
"""

import argparse
import datetime
import gc
import gzip
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # hide TensorFlow's INFO logs and warnings

import keras  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402

import kerasbert  # noqa: E402
import kerasbert.export  # noqa: E402
from kerasbert.data import demo  # noqa: E402
from kerasbert.export.signatures import serving_function  # noqa: E402

from reporting import check_line, cpu_flags, format_table, smoke_banner  # noqa: E402

SEQ_LENGTH, NUM_LABELS, THREADS, SEED = 128, 2, 2, 0
SCALED_MARGIN, CENTRED_MARGIN_STD = 4.0, 2.0
CLASSIFIER_MODES = ("scaled", "centred")
CALIBRATION_LINES, AGREEMENT_LINES, AGREEMENT_BATCH = 320, 200, 20
CALIBRATION_SHARD, AGREEMENT_SHARD = 0, 1
TFLITE_FILES = {"none": "model.tflite", "float16": "model_float16.tflite",
                "dynamic_int8": "model_dynamic_int8.tflite", "int8": "model_int8.tflite"}
TFLITE_ROWS = {"none": "TFLite float32", "float16": "TFLite float16",
               "dynamic_int8": "TFLite dynamic int8", "int8": "TFLite int8"}
KERAS, KERAS_XLA, SAVED_MODEL, ONNX, PYTORCH = (
    "Keras serving", "Keras XLA", "SavedModel", "ONNX Runtime", "PyTorch eager")
ONNX_INT8 = "ONNX Runtime dynamic int8"
ONNX_FILES = {ONNX: "model.onnx", ONNX_INT8: "model_dynamic_int8.onnx"}
DYNAMIC_SPEED_TARGET, DYNAMIC_SIZE_TARGET, AGREEMENT_TARGET = 1.8, 3.5, 0.99
ONNX_TARGET, ONNX_INT8_TARGET, SAVED_MODEL_TOLERANCE = 2.0, 3.0, 0.10
# --smoke: the shape of a model that exports, loads and runs every code path in seconds.
SMOKE_SHAPE = {"num_layers": 2, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64}
SMOKE_TIMING = {"rounds": 1, "calls": 2, "warmup": 1}
# Seconds between one runtime's calls and the next's: OpenMP (PyTorch) and ONNX Runtime worker
# threads spin for a while after their work, taking the cores from whatever runs next.
SWITCH_PAUSE = 0.5
# One export call per group. Split by default: one call with every format needs more than
# 21.5 GB for BERT-base (tf2onnx's conversion on top of what the TFLite conversions left).
EXPORT_GROUPS = {"one": [("saved_model", "tflite", "onnx")],
                 "split": [("saved_model", "tflite"), ("onnx",)]}
# Run by `export_in_child`: one `kerasbert.export.export` call, its ExportError to a file.
EXPORT_CHILD = """
import json, sys
import kerasbert.export
request = json.loads(sys.argv[1])
try:
    kerasbert.export.export(request["model"], request["output_dir"], formats=request["formats"],
                            quantize=request["quantize"],
                            max_seq_length=request["max_seq_length"],
                            calibration_data=request["calibration_data"])
except kerasbert.export.ExportError as error:
    with open(request["error_file"], "w", encoding="utf-8") as file:
        file.write(f"{type(error).__name__}: {error}")
    sys.exit(2)
"""


def corpus_lines(shard, count, skip=0):
    """`count` non-empty lines of the shipped corpus shard `shard`, after `skip` of them."""
    with gzip.open(demo.pretraining_corpus_files()[shard], "rt", encoding="utf-8") as file:
        lines = (line.strip() for line in file)
        return list(itertools.islice((line for line in lines if line), skip, skip + count))


def hf_config(config, num_labels):
    """The transformers `BertConfig` of a kerasbert `EncoderConfig`."""
    return transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        intermediate_size=config.intermediate_size, hidden_act=config.hidden_activation,
        max_position_embeddings=config.max_positions, type_vocab_size=config.type_vocab_size,
        pad_token_id=config.pad_token_id, layer_norm_eps=config.layer_norm_epsilon,
        hidden_dropout_prob=config.dropout, attention_probs_dropout_prob=config.attention_dropout,
        initializer_range=config.initializer_range, num_labels=num_labels)


def torch_inputs(packed):
    names = {"token_ids": "input_ids", "segment_ids": "token_type_ids",
             "padding_mask": "attention_mask"}
    return {names[name]: torch.from_numpy(np.array(value)).long()
            for name, value in packed.items()}


def pack(tokenizer, texts):
    """`texts` packed at `SEQ_LENGTH` as int32 numpy arrays by input name."""
    packed = tokenizer(texts, max_length=SEQ_LENGTH)
    return {name: np.asarray(value, np.int32) for name, value in packed.items()}


def build_classifier(config, tokenizer, calibration_texts, mode):
    """A random-weight `BertForSequenceClassification` in eval mode with its classifier rescaled
    on `calibration_texts`: `scaled`, mean |logit margin| `SCALED_MARGIN`; `centred`, margin
    standard deviation `CENTRED_MARGIN_STD` and median 0. Returns `(model, scale)`."""
    torch.manual_seed(SEED)
    model = transformers.BertForSequenceClassification(hf_config(config, NUM_LABELS)).eval()
    inputs = torch_inputs(pack(tokenizer, calibration_texts))
    with torch.no_grad():
        logits = model(**inputs).logits.numpy()
        margin = logits[:, 1] - logits[:, 0]
        classifier = model.classifier
        if mode == "scaled":
            scale = SCALED_MARGIN / float(np.mean(np.abs(margin)))
            classifier.weight.mul_(scale)
            classifier.bias.mul_(scale)
        else:
            scale = CENTRED_MARGIN_STD / float(np.std(margin))
            classifier.weight.mul_(scale)
            classifier.bias.mul_(scale)
            shift = scale * float(np.median(margin)) / 2
            classifier.bias[1] -= shift
            classifier.bias[0] += shift
    return model, scale


def write_model_folder(folder, model):
    model.save_pretrained(folder)
    shutil.copy(os.path.join(demo.vocabulary_dir("wordpiece"), "vocab.txt"), folder)


def path_size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def export_in_child(folder, output_dir, formats, quantize, calibration_file, error_file):
    """`(seconds, error message or None)` of one `kerasbert.export.export` call in a child
    process (its start-up included), so that its memory is given back when it ends."""
    request = {"model": folder, "output_dir": output_dir, "error_file": error_file,
               "formats": list(formats), "max_seq_length": SEQ_LENGTH,
               "quantize": export_quantize(formats, quantize),
               "calibration_data": [calibration_file]}
    start = time.perf_counter()
    completed = subprocess.run([sys.executable, "-c", EXPORT_CHILD, json.dumps(request)],
                               stdout=sys.stderr)
    seconds = time.perf_counter() - start
    if completed.returncode == 0:
        return seconds, None
    if os.path.isfile(error_file):
        with open(error_file, encoding="utf-8") as file:
            return seconds, file.read()
    if completed.returncode < 0:
        signal_number = -completed.returncode
        return seconds, (f"the export process was killed by signal {signal_number}" + (
            " (SIGKILL: most likely the kernel's out-of-memory killer)"
            if signal_number == 9 else ""))
    return seconds, f"the export process exited with status {completed.returncode}"


# --- runtimes: each is `(run(inputs) -> logits numpy, inputs(packed numpy) -> its feed)` ---

def keras_runtimes(folder):
    """Keras serving and Keras XLA runners over the model loaded from `folder`, and its weight
    bytes."""
    model = kerasbert.convert.from_hf(folder)
    serve = serving_function(model)
    infer = kerasbert.models.inference_function(model)
    weight_bytes = sum(int(np.prod(variable.shape)) * np.dtype(variable.dtype).itemsize
                       for variable in model.weights)

    def feed(packed):
        return {name: tf.constant(value) for name, value in packed.items()}

    runtimes = {KERAS: (lambda inputs: serve(inputs)["logits"].numpy(), feed),
                KERAS_XLA: (lambda inputs: infer(inputs)["logits"].numpy(), feed)}
    return runtimes, weight_bytes


def saved_model_runtime(path):
    loaded = tf.saved_model.load(path)
    function = loaded.signatures["serving_default"]

    def run(inputs):
        return function(**inputs)["logits"].numpy()

    run.loaded = loaded  # keeps the loaded object (and its variables) alive
    return run, lambda packed: {name: tf.constant(value) for name, value in packed.items()}


def tflite_runtime(path):
    interpreter = Interpreter(model_path=path, num_threads=THREADS)
    runner = interpreter.get_signature_runner("serving_default")

    def run(inputs):
        return np.array(runner(**inputs)["logits"])

    run.interpreter = interpreter
    return run, dict


def onnx_runtime(path):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def run(inputs):
        return session.run(["logits"], inputs)[0]

    return run, dict


def export_quantize(formats, quantize):
    """The `quantize` of one export call: the TFLite variants asked for, and with ONNX its
    float32 and dynamic-int8 files."""
    chosen = list(quantize) if "tflite" in formats else []
    if "onnx" in formats:
        chosen += [name for name in ("none", "dynamic_int8") if name not in chosen]
    return chosen


def onnx_runtimes(output_dirs, runtimes, sizes):
    """Add the ONNX Runtime rows (float32 `model.onnx`, `model_dynamic_int8.onnx`) to
    `runtimes` and `sizes`."""
    for row, file_name in ONNX_FILES.items():
        path = os.path.join(output_dirs[file_name], file_name)
        runtimes[row] = onnx_runtime(path)
        sizes[row] = path_size(path)


def onnx_fusion_line(report):
    """What the export says of `model.onnx`: ONNX Runtime's fused graph, or why not."""
    fusion = report["artifacts"]["model.onnx"].get("onnx_runtime_fusion") or {}
    if fusion.get("fused"):
        return ("model.onnx is ONNX Runtime's fused graph (verified): "
                + ", ".join(f"{name} x{count}" for name, count in fusion["fusions"].items()))
    return f"model.onnx is not fused: {fusion.get('reason', 'no fusion recorded')}"


def onnx_target_lines(latencies):
    """The ONNX Runtime targets against PyTorch eager, one check line each."""
    lines = []
    for row, target in ((ONNX, ONNX_TARGET), (ONNX_INT8, ONNX_INT8_TARGET)):
        speed = latencies[PYTORCH] / latencies[row]
        lines.append(check_line(f"{row} >= {target}x faster than PyTorch eager",
                                speed >= target, f"PyTorch / {row} = {speed:.2f}x"))
    return lines


def pytorch_runtime(model):
    def run(inputs):
        with torch.no_grad():
            return model(**inputs).logits.numpy()

    return run, torch_inputs


# --- measuring ---

def agreement(runtimes, batches, reference_name):
    """`{runtime: (argmax agreement, max abs logit difference)}` against `reference_name`, and
    the reference logits."""
    logits = {}
    for name, (run, feed) in runtimes.items():
        print(f"  agreement: {name} ...", file=sys.stderr, flush=True)
        logits[name] = np.concatenate([run(feed(batch)) for batch in batches])
    reference = logits[reference_name]
    return {name: (float(np.mean(np.argmax(values, -1) == np.argmax(reference, -1))),
                   float(np.max(np.abs(values - reference))))
            for name, values in logits.items()}, reference


def interleaved_latency(runtimes, packed, warmup, rounds, calls):
    """`{runtime: median seconds per call}` over `rounds` rounds of `calls` calls each, the
    runtimes interleaved (the order rotating every round, `SWITCH_PAUSE` between runtimes)
    after `warmup` calls of each."""
    feeds = {name: feed(packed) for name, (_, feed) in runtimes.items()}
    for name, (run, _) in runtimes.items():
        print(f"  warm-up: {name} ...", file=sys.stderr, flush=True)
        for _ in range(warmup):
            run(feeds[name])
    names = list(runtimes)
    times = {name: [] for name in names}
    for round_index in range(rounds):
        print(f"  round {round_index + 1}/{rounds} ...", file=sys.stderr, flush=True)
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            run, feed_inputs = runtimes[name][0], feeds[name]
            time.sleep(SWITCH_PAUSE)  # the previous runtime's spinning threads go idle
            for _ in range(calls):
                start = time.perf_counter()
                run(feed_inputs)
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def gemm_ceiling(config, calls=20):
    """`{variant: GFLOP/s}` of TFLite's FULLY_CONNECTED alone, float32 vs dynamic-range int8,
    under the same interpreter settings as the model rows: BERT-base's feed-forward shapes
    (`SEQ_LENGTH` x hidden -> intermediate -> hidden, 4 times), static shapes. It bounds the
    dynamic-int8 speed-up any BERT model can get from this CPU's int8 kernels."""
    rng = np.random.default_rng(SEED)
    hidden, inner = config.hidden_size, config.intermediate_size
    weights = tf.Module()
    weights.up = tf.Variable(rng.normal(0, 0.02, (hidden, inner)).astype(np.float32))
    weights.down = tf.Variable(rng.normal(0, 0.02, (inner, hidden)).astype(np.float32))

    def feed_forward(x):
        for _ in range(4):
            x = tf.matmul(tf.nn.gelu(tf.matmul(x, weights.up)), weights.down)
        return {"y": x}
    weights.run = tf.function(feed_forward, input_signature=[
        tf.TensorSpec([SEQ_LENGTH, hidden], tf.float32, name="x")])
    x = rng.normal(0, 1, (SEQ_LENGTH, hidden)).astype(np.float32)
    flops = 4 * 2 * 2 * SEQ_LENGTH * hidden * inner
    rates = {}
    for variant in ("float32", "dynamic int8"):
        converter = tf.lite.TFLiteConverter.from_concrete_functions(
            [weights.run.get_concrete_function()], weights)
        if variant != "float32":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        runner = Interpreter(model_content=converter.convert(),
                             num_threads=THREADS).get_signature_runner()
        for _ in range(3):
            runner(x=x)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            runner(x=x)
            times.append(time.perf_counter() - start)
        rates[variant] = flops / statistics.median(times) / 1e9
    return rates


def report_summary(report):
    """One line per artifact of what `export_report.json` says: verified, agreement, latency."""
    lines = []
    for name, entry in sorted(report["artifacts"].items()):
        parts = [f"verified={entry.get('verified')}", f"judged as {entry.get('judged_as')}"]
        for output, result in (entry.get("agreement") or {}).items():
            parts.append(f"{output} {result['metric']} {result['value']:.4f}")
        if "latency_ms" in entry:
            parts.append(f"latency_ms {entry['latency_ms']:.1f}")
        parts.append(f"{entry.get('size_bytes', 0) / 1e6:.1f} MB")
        lines.append(f"  {name}: " + ", ".join(parts))
    return lines


# --- raw text in: length buckets vs padding to max_seq_length ---

TEXT_TOKENS, TEXT_SPEED_TARGET = 21, 3.0
TEXT_FIXED, TEXT_BUCKETED = "fixed 128", "bucketed"


def text_sentence(tokenizer, tokens=TEXT_TOKENS):
    """The first shipped corpus line of exactly `tokens` word pieces (without [CLS]/[SEP])."""
    for line in corpus_lines(AGREEMENT_SHARD, 2000):
        if int(np.sum(tokenizer([line])["padding_mask"])) == tokens + 2:
            return line
    raise RuntimeError(f"no corpus line of {tokens} word pieces in the first 2000")


def text_runtimes(model, tokenizer, work_dir):
    """`{(format, padding): run(texts) -> logits}`: the SavedModel's `serve_text` and the
    raw-text TFLite file (ai_edge_litert `InterpreterWithCustomOps`, tensorflow-text kernels,
    `THREADS` threads), each padding to `SEQ_LENGTH` as before length buckets and bucketed."""
    from ai_edge_litert.interpreter import InterpreterWithCustomOps
    from tensorflow_text import tflite_registrar

    from kerasbert.export.saved_model import write_saved_model
    from kerasbert.export.text_tflite import text_tflite_model

    runtimes = {}
    for padding, buckets in ((TEXT_FIXED, False), (TEXT_BUCKETED, True)):
        print(f"  raw text: SavedModel and TFLite, {padding} ...", file=sys.stderr, flush=True)
        path = write_saved_model(model, os.path.join(work_dir, f"text_{buckets}"), tokenizer,
                                 SEQ_LENGTH, length_buckets=buckets)
        loaded = tf.saved_model.load(path)

        def run_saved(texts, loaded=loaded):
            return loaded.signatures["serve_text"](text=tf.constant(texts))["logits"].numpy()

        run_saved.loaded = loaded
        interpreter = InterpreterWithCustomOps(
            custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS, num_threads=THREADS,
            model_content=text_tflite_model(model, tokenizer, SEQ_LENGTH, buckets))
        runner = interpreter.get_signature_runner("serve_text")

        def run_tflite(texts, runner=runner):
            return np.array(runner(text=np.array([t.encode("utf-8") for t in texts], object))[
                "logits"])

        run_tflite.interpreter = interpreter
        runtimes[SAVED_MODEL, padding] = run_saved
        runtimes["TFLite text", padding] = run_tflite
    return runtimes


def raw_text_latency(args, config):
    """Build a random-weight classifier of `config` and time raw text in: the SavedModel's
    `serve_text` and `model_text.tflite`, fixed padding vs length buckets, batch 1, a
    `TEXT_TOKENS`-word-piece corpus sentence; the logits of each bucketed runtime against its
    fixed one on texts of several lengths, in one batch and alone."""
    tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    keras.utils.set_random_seed(SEED)
    model = kerasbert.models.build_task_model(
        config.replace(vocab_size=tokenizer.vocabulary_size()), "sequence_classification",
        num_labels=NUM_LABELS)
    sentence = text_sentence(tokenizer)
    mixed = [sentence, "short", " ".join(corpus_lines(AGREEMENT_SHARD, 12)), sentence * 3]
    load_before = os.getloadavg()[0]
    work_dir = tempfile.mkdtemp(prefix="kerasbert_text_latency_")
    try:
        runtimes = text_runtimes(model, tokenizer, work_dir)
        differences = {}
        for name, run in runtimes.items():
            reference = runtimes[name[0], TEXT_FIXED](mixed)
            together = run(mixed)
            alone = np.concatenate([run([text]) for text in mixed])
            differences[name] = float(max(np.max(np.abs(together - reference)),
                                          np.max(np.abs(alone - reference))))
        latencies = interleaved_latency(
            {name: (run, lambda texts: texts) for name, run in runtimes.items()}, [sentence],
            args.warmup, args.rounds, args.calls)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    print_raw_text(args, config, latencies, differences, load_before)
    print_floor(args, floor_profile(model, tokenizer, sentence, args))


def floor_profile(model, tokenizer, sentence, args):
    """`{part: (s at SEQ_LENGTH, s at the bucket)}`, medians of interleaved calls, batch 1:
    the Keras classifier alone on ids (a `tf.function`, no XLA, as the SavedModel's graph runs),
    only its 2-D kernels as matmuls (the weights every call reads, at the rows the call has),
    and the tokenizer + packing alone. What bounds the raw-text speed-up."""
    bucket = 32
    packed = {name: value for name, value in tokenizer([sentence], max_length=SEQ_LENGTH).items()}
    inputs = {length: {name: value[:, :length] for name, value in packed.items()}
              for length in (SEQ_LENGTH, bucket)}
    forward = tf.function(lambda batch: model(batch, training=False)["logits"])
    kernels = [variable for variable in model.trainable_variables
               if len(variable.shape) == 2 and "embedding" not in variable.path]
    matmuls = tf.function(lambda rows: [tf.matmul(tf.ones([rows, kernel.shape[0]]), kernel)
                                        for kernel in kernels])
    tokenize = tf.function(lambda texts: tokenizer(texts, max_length=SEQ_LENGTH))
    text = tf.constant([sentence])
    parts = {"classifier on ids": lambda length: forward(inputs[length]),
             "its 2-D kernels as matmuls": lambda length: matmuls(length),
             "tokenizer + packing": lambda length: tokenize(text)}
    profile = {}
    for part, run in parts.items():
        medians = []
        for length in (SEQ_LENGTH, bucket):
            for _ in range(args.warmup):
                tf.nest.map_structure(np.asarray, run(length))
            times = []
            for _ in range(args.rounds * args.calls):
                start = time.perf_counter()
                tf.nest.map_structure(np.asarray, run(length))
                times.append(time.perf_counter() - start)
            medians.append(statistics.median(times))
        profile[part] = tuple(medians)
    flops = 2 * sum(int(np.prod(kernel.shape)) for kernel in kernels)
    profile["kernel GFLOP/s"] = tuple(length * flops / profile["its 2-D kernels as matmuls"][index]
                                      / 1e9 for index, length in enumerate((SEQ_LENGTH, bucket)))
    return profile


def print_floor(args, profile):
    print()
    print("What bounds it (same process, batch 1, median of "
          f"{args.rounds * args.calls} calls after {args.warmup}):")
    rows = [[part, f"{1000 * long:.1f}", f"{1000 * short:.1f}", f"{long / short:.2f}x"]
            for part, (long, short) in profile.items() if part != "kernel GFLOP/s"]
    rate = profile["kernel GFLOP/s"]
    rows.append(["kernel GFLOP/s", f"{rate[0]:.0f}", f"{rate[1]:.0f}", f"{rate[0] / rate[1]:.2f}x"])
    print(format_table(["part", f"{SEQ_LENGTH} ms", "32 ms", "ratio"], rows, args.markdown))


def print_raw_text(args, config, latencies, differences, load_before):
    print(f"Raw-text latency: BERT classifier ({args.preset} shape, {config.num_layers} layers, "
          f"hidden {config.hidden_size}, shipped WordPiece vocabulary, {NUM_LABELS} labels, "
          f"random weights, seed {SEED}), batch 1, one corpus sentence of {TEXT_TOKENS} word "
          f"pieces, max_seq_length {SEQ_LENGTH}: padded to {SEQ_LENGTH} (as before length "
          "buckets) vs to its bucket (32).")
    print(f"{datetime.date.today().isoformat()}, {platform.processor() or platform.machine()}, "
          f"os.cpu_count() = {os.cpu_count()}; CPU flags: {cpu_flags()}; tensorflow "
          f"{tf.__version__}; 1-minute load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after.")
    print(f"Latency: {args.warmup} warm-up calls each, then {args.rounds} interleaved rounds x "
          f"{args.calls} calls; median per call. Max |logit difference| of each runtime vs its "
          "fixed-padding twin on 4 texts of 3 to 128+ word pieces, in one batch and alone.")
    print()
    rows = []
    for name in (SAVED_MODEL, "TFLite text"):
        fixed, bucketed = latencies[name, TEXT_FIXED], latencies[name, TEXT_BUCKETED]
        rows.append([name, f"{1000 * fixed:.1f}", f"{1000 * bucketed:.1f}",
                     f"{fixed / bucketed:.2f}x", f"{differences[name, TEXT_BUCKETED]:.3g}"])
    print(format_table(["runtime", f"{TEXT_FIXED} ms", f"{TEXT_BUCKETED} ms", "speed-up",
                        "max abs diff"], rows, args.markdown))
    print()
    print("Targets:")
    for name in (SAVED_MODEL, "TFLite text"):
        speed = latencies[name, TEXT_FIXED] / latencies[name, TEXT_BUCKETED]
        print(check_line(f"{name} raw text, {TEXT_TOKENS} word pieces: >= {TEXT_SPEED_TARGET}x "
                         f"lower latency than padding to {SEQ_LENGTH}",
                         speed >= TEXT_SPEED_TARGET, f"{speed:.2f}x"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bert_base_uncased",
                        help="kerasbert BERT preset whose shape the classifier takes")
    parser.add_argument("--num_layers", type=int,
                        help="override the preset's number of layers (e.g. 2 for a smoke run)")
    parser.add_argument("--quantize", nargs="+", choices=tuple(TFLITE_FILES),
                        default=list(TFLITE_FILES), help="TFLite variants to export and time")
    parser.add_argument("--classifier", choices=CLASSIFIER_MODES, default="scaled",
                        help="classifier rescaling: scaled (mean |margin| %s) or centred "
                             "(balanced labels; see above)" % SCALED_MARGIN)
    parser.add_argument("--one_export_call", action="store_true",
                        help="export every format in one export() call (needs more than "
                             "21.5 GB of memory for BERT-base) instead of two child processes, "
                             "(saved_model, tflite) then (onnx)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--calls", type=int, default=10, help="timed calls per runtime per round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per runtime first")
    parser.add_argument("--keep_dir", action="store_true",
                        help="keep the model folder, calibration file and exports (path printed)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--raw_text", action="store_true",
                        help="run only the raw-text part: serve_text and model_text.tflite, "
                             "padded to 128 vs length-bucketed, in this process (no export)")
    parser.add_argument("--smoke", action="store_true",
                        help="that the script runs, numbers meaningless: a tiny model (%s), "
                             "TFLite float32 only, one export call, one short timing round; "
                             "with --raw_text, the raw-text part instead" % SMOKE_SHAPE)
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE_TIMING, quantize=["none"], one_export_call=True)
        print(smoke_banner())
    if args.rounds < 1 or args.calls < 1 or args.warmup < 1:
        parser.error("--rounds, --calls and --warmup must be at least 1")
    config = kerasbert.zoo.get_config(args.preset)
    if config.family != "bert":
        parser.error(f"--preset must be a BERT preset, got {args.preset} ({config.family})")
    if args.num_layers:
        config = config.replace(num_layers=args.num_layers)
    if args.smoke:
        config = config.replace(**SMOKE_SHAPE)
    if args.raw_text:
        raw_text_latency(args, config)
        return
    quantize = [name for name in TFLITE_FILES if name in args.quantize]

    torch.set_num_threads(THREADS)
    load_before = os.getloadavg()[0]
    work_dir = tempfile.mkdtemp(prefix="kerasbert_export_latency_")
    try:
        results = build_and_measure(args, config, quantize, work_dir)
    finally:
        if args.keep_dir:
            print(f"Kept {work_dir}", file=sys.stderr)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    if results is None:
        sys.exit(1)
    print_results(args, config, quantize, results, load_before)


def build_and_measure(args, config, quantize, work_dir):
    """Build, export and measure; `None` (after printing the error) if the export fails."""
    folder = os.path.join(work_dir, "hf_model")
    calibration_file = os.path.join(work_dir, "calibration.txt")
    calibration_texts = corpus_lines(CALIBRATION_SHARD, CALIBRATION_LINES)
    agreement_texts = corpus_lines(AGREEMENT_SHARD, AGREEMENT_LINES)
    with open(calibration_file, "w", encoding="utf-8") as file:
        file.write("\n".join(calibration_texts) + "\n")
    vocabulary_tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))

    print("Building the PyTorch classifier ...", file=sys.stderr, flush=True)
    torch_model, scale = build_classifier(config, vocabulary_tokenizer, calibration_texts,
                                           args.classifier)
    write_model_folder(folder, torch_model)

    hf_attention = torch_model.config._attn_implementation
    del torch_model  # the export needs the memory; PyTorch reloads the folder afterwards
    gc.collect()

    groups = EXPORT_GROUPS["one" if args.one_export_call else "split"]
    output_dirs, export_seconds, reports = {}, {}, []
    for index, formats in enumerate(groups):
        output_dir = os.path.join(work_dir, f"export{index}")
        variants = f" (TFLite: {', '.join(quantize)})" if "tflite" in formats else ""
        print(f"Exporting {folder}: {', '.join(formats)}{variants} in a child process ...",
              file=sys.stderr, flush=True)
        seconds, error = export_in_child(folder, output_dir, formats, quantize, calibration_file,
                                         os.path.join(work_dir, f"export{index}_error.txt"))
        export_seconds[", ".join(formats)] = seconds
        if error is not None:
            print(f"Export of {', '.join(formats)} failed after {seconds:.0f} s: {error}")
            return None
        with open(os.path.join(output_dir, kerasbert.export.REPORT_FILE), encoding="utf-8") as file:
            reports.append(json.load(file))
        for name in os.listdir(output_dir):
            output_dirs[name] = output_dir
    report = {"artifacts": {name: entry for part in reports
                            for name, entry in part["artifacts"].items()},
              "versions": reports[0]["versions"]}

    print("Loading every runtime ...", file=sys.stderr, flush=True)
    tokenizer = kerasbert.tokenizers.from_hf(folder)
    runtimes, keras_bytes = keras_runtimes(folder)
    saved_model = os.path.join(output_dirs["saved_model"], "saved_model")
    runtimes[SAVED_MODEL] = saved_model_runtime(saved_model)
    sizes = {KERAS: keras_bytes, KERAS_XLA: keras_bytes, SAVED_MODEL: path_size(saved_model)}
    for quantization in quantize:
        path = os.path.join(output_dirs[TFLITE_FILES[quantization]], TFLITE_FILES[quantization])
        runtimes[TFLITE_ROWS[quantization]] = tflite_runtime(path)
        sizes[TFLITE_ROWS[quantization]] = path_size(path)
    onnx_runtimes(output_dirs, runtimes, sizes)
    torch_model = transformers.BertForSequenceClassification.from_pretrained(folder).eval()
    runtimes[PYTORCH] = pytorch_runtime(torch_model)
    sizes[PYTORCH] = path_size(os.path.join(folder, "model.safetensors"))

    batches = [pack(tokenizer, agreement_texts[start:start + AGREEMENT_BATCH])
               for start in range(0, len(agreement_texts), AGREEMENT_BATCH)]
    agreements, reference = agreement(runtimes, batches, KERAS)
    latency_inputs = pack(tokenizer, agreement_texts[:1])
    latencies = interleaved_latency(runtimes, latency_inputs, args.warmup, args.rounds,
                                    args.calls)
    real_tokens = int(latency_inputs["padding_mask"].sum())
    print("Timing SavedModel and Keras serving with no other runtime loaded ...",
          file=sys.stderr, flush=True)
    tensorflow_only = {name: runtimes.pop(name) for name in (KERAS, SAVED_MODEL)}
    runtimes.clear()
    del torch_model
    gc.collect()
    alone = interleaved_latency(tensorflow_only, latency_inputs, args.warmup, args.rounds,
                                args.calls)
    print("Timing TFLite's FULLY_CONNECTED alone ...", file=sys.stderr, flush=True)
    gemm = gemm_ceiling(config)
    return {"export_seconds": export_seconds, "report": report, "sizes": sizes,
            "agreements": agreements, "latencies": latencies,
            "reference": reference, "scale": scale, "real_tokens": real_tokens,
            "attention": hf_attention, "export_groups": groups, "gemm": gemm,
            "tensorflow_only": alone,
            "calibration_file": calibration_file}


def print_results(args, config, quantize, results, load_before):
    latencies, sizes, agreements = results["latencies"], results["sizes"], results["agreements"]
    reference = results["reference"]
    margin = reference[:, 1] - reference[:, 0]
    print(f"Exported-model latency: BERT classifier ({args.preset} shape, {config.num_layers} "
          f"layers, hidden {config.hidden_size}, vocab {config.vocab_size}, {NUM_LABELS} labels, "
          f"random weights, seed {SEED}), batch 1, seq {SEQ_LENGTH}.")
    print(f"{datetime.date.today().isoformat()}, {platform.platform()}, "
          f"{platform.processor() or platform.machine()}, os.cpu_count() = {os.cpu_count()}; "
          f"python {platform.python_version()}.")
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}, kerasbert "
          f"{kerasbert.__version__}, ai-edge-litert {report_version(results, 'ai-edge-litert')}, "
          f"onnxruntime {onnxruntime.__version__}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}.")
    calls = "; ".join(f"({formats}) {seconds:.1f} s"
                      for formats, seconds in results["export_seconds"].items())
    print(f"Export time (kerasbert.export.export, one child process per call, start-up "
          f"included; TFLite {'/'.join(quantize)}; every artifact reloaded and checked in fresh "
          f"processes): {sum(results['export_seconds'].values()):.1f} s = {calls}.")
    print(f"Threads: TFLite num_threads={THREADS}, ONNX Runtime intra_op_num_threads={THREADS}, "
          f"torch.set_num_threads({THREADS}) (attention {results['attention']!r}), TensorFlow "
          f"default pools (intra-op {tf.config.threading.get_intra_op_parallelism_threads()}; "
          f"0 = all cores).")
    how = ("to mean |margin| %s" % SCALED_MARGIN if args.classifier == "scaled" else
           "and centred (margin std %s, median 0)" % CENTRED_MARGIN_STD)
    print(f"Classifier ({args.classifier}) rescaled x{results['scale']:.1f} {how} on "
          f"{CALIBRATION_LINES} calibration lines; on the {len(margin)} agreement lines the "
          f"Keras logit margin has median |margin| {np.median(np.abs(margin)):.2f}, label 1 "
          f"for {np.mean(margin > 0):.0%}.")
    print(f"Latency: {args.warmup} warm-up calls each, then {args.rounds} interleaved rounds x "
          f"{args.calls} calls; median per call, logits read into numpy. Input: one corpus line, "
          f"{results['real_tokens']} real tokens padded to {SEQ_LENGTH}.")
    print(f"Agreement: {len(margin)} corpus lines (not the calibration ones) at seq {SEQ_LENGTH}, "
          f"batches of {AGREEMENT_BATCH}; argmax and max |logit difference| vs Keras serving.")
    print(f"1-minute load average: {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
          f"(more than {os.cpu_count()}: other processes shared the cores).")
    print()
    header = ["runtime", "median ms", "size MB", "argmax agreement", "max abs diff"]
    rows = []
    for name, seconds in latencies.items():
        matched, difference = agreements[name]
        size = f"{sizes[name] / 1e6:.1f}" + (" (in memory)" if name in (KERAS, KERAS_XLA) else "")
        rows.append([name, f"{1000 * seconds:.1f}", size, f"{matched:.1%}", f"{difference:.3g}"])
    print(format_table(header, rows, args.markdown))
    print()
    print("Export report (export_report.json; latency_ms: fresh process, 5 calls, batch 1, "
          "default threads):")
    for line in report_summary(results["report"]):
        print(line)
    print(onnx_fusion_line(results["report"]))
    print()
    gemm = results["gemm"]
    print(f"TFLite FULLY_CONNECTED alone ({SEQ_LENGTH} x {config.hidden_size} -> "
          f"{config.intermediate_size} -> {config.hidden_size}, x4, {THREADS} threads): "
          + ", ".join(f"{name} {rate:.0f} GFLOP/s" for name, rate in gemm.items())
          + f"; dynamic int8 / float32 = {gemm['dynamic int8'] / gemm['float32']:.2f}x (what "
          "the int8 kernels themselves gain on this CPU).")
    print()
    print("Targets:")
    float32, dynamic = TFLITE_ROWS["none"], TFLITE_ROWS["dynamic_int8"]
    if float32 in latencies and dynamic in latencies:
        speed = latencies[float32] / latencies[dynamic]
        print(check_line(f"dynamic-int8 TFLite >= {DYNAMIC_SPEED_TARGET}x faster than float32 "
                         "TFLite", speed >= DYNAMIC_SPEED_TARGET,
                         f"float32 / dynamic int8 = {speed:.2f}x"))
        smaller = sizes[float32] / sizes[dynamic]
        matched = agreements[dynamic][0]
        print(check_line(f"dynamic-int8 TFLite >= {DYNAMIC_SIZE_TARGET}x smaller at >= "
                         f"{AGREEMENT_TARGET:.0%} argmax agreement",
                         smaller >= DYNAMIC_SIZE_TARGET and matched >= AGREEMENT_TARGET,
                         f"{smaller:.2f}x smaller, agreement {matched:.1%}"))
    else:
        print("dynamic-int8 TFLite targets: not measured (--quantize lacks none or dynamic_int8).")
    for line in onnx_target_lines(latencies):
        print(line)
    ratio = latencies[SAVED_MODEL] / latencies[KERAS]
    print(check_line(f"reloaded SavedModel within {SAVED_MODEL_TOLERANCE:.0%} of in-process Keras",
                     ratio <= 1 + SAVED_MODEL_TOLERANCE,
                     f"SavedModel / Keras serving = {ratio:.2f}x; / Keras XLA = "
                     f"{latencies[SAVED_MODEL] / latencies[KERAS_XLA]:.2f}x"))
    alone = results["tensorflow_only"]
    ratio = alone[SAVED_MODEL] / alone[KERAS]
    print(check_line(f"the same, no other runtime loaded ({1000 * alone[SAVED_MODEL]:.1f} ms vs "
                     f"{1000 * alone[KERAS]:.1f} ms)", ratio <= 1 + SAVED_MODEL_TOLERANCE,
                     f"SavedModel / Keras serving = {ratio:.2f}x"))


def report_version(results, package):
    return results["report"].get("versions", {}).get(package)


if __name__ == "__main__":
    main()
