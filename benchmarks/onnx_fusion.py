"""ONNX Runtime on kerasbert's fused `model.onnx` vs the unfused tf2onnx graph vs PyTorch eager.

Builds, in one process on CPU, a transformers `BertForSequenceClassification` of kerasbert
preset `--preset` (default "bert_base_uncased": 12 layers, hidden 768) with random weights
(`torch.manual_seed`), 2 labels, in eval mode, and the same model in kerasbert
(`kerasbert.convert.from_hf` of its folder). From the kerasbert model: the unfused tf2onnx
graph (`convert_to_onnx`, in a child process: ~16.5 GB at its peak on BERT-base), the fused graph the export ships as `model.onnx` when it verifies
(`fused_candidate`: `kerasbert.export.onnx_fusions`, then ONNX Runtime's transformer
optimizer), and `quantize_dynamic_int8` of each (the export ships the unfused graph's).
Every ONNX file's logits are compared with PyTorch's on 8 batches of random ids (max |logit
difference|, argmax agreement), then all runtimes are timed interleaved at batch 1 x 128
(`export_latency.interleaved_latency`, 2 threads each), and ONNX Runtime's float32 `MatMul`
alone at BERT-base's feed-forward shapes gives the float32 ceiling (GFLOP/s) next to each
row's rate over the encoder's matrix products.

    .venv/bin/python benchmarks/onnx_fusion.py --markdown     # ~6 min on 2 cores

Targets (issue 42): ONNX Runtime float32 >= 2x PyTorch eager, `model_dynamic_int8.onnx`
>= 3x. `--smoke` runs a tiny model once (its figures mean nothing).
"""

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.export.onnx_runtime_variants import (  # noqa: E402
    fused_candidate, quantize_dynamic_int8)

from export_latency import (  # noqa: E402
    SMOKE_SHAPE, SMOKE_TIMING, THREADS, hf_config, interleaved_latency,
    onnx_runtime, pytorch_runtime)
from reporting import check_line, cpu_flags, format_table, smoke_banner  # noqa: E402

SEQ_LENGTH, NUM_LABELS, SEED, AGREEMENT_BATCHES = 128, 2, 0, 8
FILES = {"ONNX Runtime unfused float32": "unfused.onnx",
         "ONNX Runtime fused float32 (model.onnx)": "fused.onnx",
         "ONNX Runtime dynamic int8 of unfused (model_dynamic_int8.onnx)": "unfused_int8.onnx",
         "ONNX Runtime dynamic int8 of fused": "fused_int8.onnx"}
PYTORCH = "PyTorch eager"
# tf2onnx's conversion of BERT-base peaks at ~16.5 GB: in a child, whose memory is given back
CONVERT_CHILD = """
import sys, onnx, kerasbert
from kerasbert.export.onnx_model import convert_to_onnx
onnx.save(convert_to_onnx(kerasbert.convert.from_hf(sys.argv[1])), sys.argv[2])
"""


def random_batch(config, rng, batch=1):
    ids = rng.integers(1000, config.vocab_size, (batch, SEQ_LENGTH)).astype(np.int32)
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids),
            "padding_mask": np.ones_like(ids)}


def encoder_flops(config):
    """Multiply-adds x 2 of the encoder's matrix products at `SEQ_LENGTH` (embeddings,
    softmax and LayerNorms not counted)."""
    hidden, inner = config.hidden_size, config.intermediate_size
    per_layer = 2 * SEQ_LENGTH * (4 * hidden * hidden + 2 * hidden * inner)
    per_layer += 2 * 2 * SEQ_LENGTH * SEQ_LENGTH * hidden  # scores and weighted values
    return config.num_layers * per_layer


def matmul_ceiling(config, folder, calls):
    """ONNX Runtime's float32 GFLOP/s on four feed-forward blocks' products alone
    (`SEQ_LENGTH` x hidden -> intermediate -> hidden), the rate no float32 row can beat."""
    rng = np.random.default_rng(SEED)
    hidden, inner = config.hidden_size, config.intermediate_size
    nodes, initializers, tensor = [], [], "x"
    for index in range(4):
        for name, shape in (("up", (hidden, inner)), ("down", (inner, hidden))):
            weight = f"{name}{index}"
            initializers.append(onnx.numpy_helper.from_array(
                rng.normal(0, 0.02, shape).astype(np.float32), weight))
            nodes.append(onnx.helper.make_node("MatMul", [tensor, weight], [weight + "_out"]))
            tensor = weight + "_out"
    graph = onnx.helper.make_graph(
        nodes, "feed_forward",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [SEQ_LENGTH, hidden])],
        [onnx.helper.make_tensor_value_info(tensor, onnx.TensorProto.FLOAT,
                                            [SEQ_LENGTH, hidden])], initializers)
    path = os.path.join(folder, "ceiling.onnx")
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              path)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    x = rng.normal(0, 1, (SEQ_LENGTH, hidden)).astype(np.float32)
    for _ in range(3):
        session.run(None, {"x": x})
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        session.run(None, {"x": x})
        times.append(time.perf_counter() - start)
    return 4 * 2 * 2 * SEQ_LENGTH * hidden * inner / statistics.median(times) / 1e9


def build_files(config, folder):
    """The PyTorch model and the four ONNX files of `FILES` (in `folder`); the fusion counts."""
    torch.manual_seed(SEED)
    model = transformers.BertForSequenceClassification(hf_config(config, NUM_LABELS)).eval()
    with torch.no_grad():  # biases and LayerNorm shifts away from zero, as after training
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0, 0.02)
    model_dir = os.path.join(folder, "hf")
    model.save_pretrained(model_dir)
    paths = {label: os.path.join(folder, name) for label, name in FILES.items()}
    labels = list(FILES)
    print("  converting with tf2onnx (in a child process) ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-c", CONVERT_CHILD, model_dir, paths[labels[0]]],
                   check=True)
    fusion = fused_candidate(paths[labels[0]], config, paths[labels[1]])
    if "reason" in fusion:
        raise SystemExit(f"nothing fused: {fusion['reason']}")
    quantize_dynamic_int8(paths[labels[0]], paths[labels[2]])
    quantize_dynamic_int8(paths[labels[1]], paths[labels[3]])
    return model, paths, fusion["fusions"]


def agreement(runtimes, config):
    """`{runtime: (argmax agreement, max |logit difference|)}` against PyTorch."""
    rng = np.random.default_rng(SEED + 1)
    batches = [random_batch(config, rng, batch=4) for _ in range(AGREEMENT_BATCHES)]
    logits = {name: np.concatenate([run(feed(batch)) for batch in batches])
              for name, (run, feed) in runtimes.items()}
    reference = logits[PYTORCH]
    return {name: (float(np.mean(values.argmax(-1) == reference.argmax(-1))),
                   float(np.abs(values - reference).max())) for name, values in logits.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="bert_base_uncased")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--calls", type=int, default=10, help="timed calls per runtime per round")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one short round")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    overrides = dict(SMOKE_SHAPE) if args.smoke else {}
    if args.smoke:
        print(smoke_banner())
        for key, value in SMOKE_TIMING.items():
            setattr(args, key, value)
    config = kerasbert.zoo.get_config(args.preset).replace(**overrides, dropout=0.0,
                                                           attention_dropout=0.0)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        model, paths, fusions = build_files(config, folder)
        runtimes = {PYTORCH: pytorch_runtime(model)}
        runtimes.update({label: onnx_runtime(path) for label, path in paths.items()})
        agreed = agreement(runtimes, config)
        latency = interleaved_latency(runtimes, random_batch(config, np.random.default_rng(SEED)),
                                      args.warmup, args.rounds, args.calls)
        ceiling = matmul_ceiling(config, folder, calls=3 if args.smoke else 30)
    flops = encoder_flops(config)
    print(f"{datetime.date.today()}, {platform.processor() or platform.machine()}, CPU flags: "
          f"{cpu_flags()}; onnxruntime {onnxruntime.__version__}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}; {THREADS} threads; load (1 min) "
          f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"{args.preset}: {config.num_layers} layers, hidden {config.hidden_size}, batch 1 x "
          f"{SEQ_LENGTH}, median of {args.rounds} x {args.calls} calls; fused: {fusions}")
    pytorch = latency[PYTORCH]
    rows = [[name, f"{1000 * seconds:.1f}", f"{pytorch / seconds:.2f}x",
             f"{flops / seconds / 1e9:.0f}", f"{agreed[name][0]:.3f}", f"{agreed[name][1]:.2g}"]
            for name, seconds in latency.items()]
    print(format_table(["runtime", "median ms", "vs PyTorch", "GFLOP/s (encoder products)",
                        "argmax agreement", "max |logit diff| vs PyTorch"], rows, args.markdown))
    print(f"ONNX Runtime float32 MatMul alone at {SEQ_LENGTH} x {config.hidden_size} x "
          f"{config.intermediate_size}: {ceiling:.0f} GFLOP/s (the float32 ceiling)")
    labels = list(FILES)
    fused = pytorch / latency[labels[1]]
    int8 = pytorch / latency[labels[2]]
    print(check_line("ONNX Runtime float32 (fused model.onnx) >= 2x PyTorch eager", fused >= 2,
                     f"{fused:.2f}x; {latency[labels[0]] / latency[labels[1]]:.2f}x the "
                     "unfused graph"))
    print(check_line("model_dynamic_int8.onnx >= 3x PyTorch eager", int8 >= 3, f"{int8:.2f}x"))


if __name__ == "__main__":
    main()
