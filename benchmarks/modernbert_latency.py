"""Forward latency and peak memory of a ModernBERT-base encoder: kerasbert vs transformers.

Measures, on CPU, one forward pass of a randomly initialized ModernBERT-base encoder (22
layers, hidden 768, 12 heads, intermediate 1,152, vocab 50,368; every third layer global,
the others local within 128 tokens) at each batch x length asked for, with the same weights
and token ids on both sides:

- kerasbert: `kerasbert.models.inference_function(encoder)` (XLA in float32; local layers
  attend in blocks of the window, so their cost is linear in length), and on a CPU with
  bfloat16 units (avx512_bf16 / amx_bf16) the same encoder under `mixed_bfloat16` (oneDNN);
  the targets are judged on the faster of the two, and the table says which;
- transformers `ModernBertModel` on PyTorch, eager, `torch.inference_mode()`, with the SDPA
  attention and with the eager one (both apply the window as a mask over the full n x n
  scores on CPU), `torch.set_num_threads(os.cpu_count())`.

Latency: in this one process, each implementation called once to warm up (tracing and XLA
compilation happen there), then timed over N calls; the median is reported, the sequence
output copied to the host. Peak memory: for each implementation and shape a child process
loads the same weights, resets its peak-memory mark (`/proc/self/clear_refs`) and runs two
passes; the figure is its peak resident memory over them (`VmHWM`) minus its resident memory
just before: weights and libraries are left out; the passes' activations, what the
allocators keep between passes (TensorFlow's keeps its pool, so a second pass alone would
show almost nothing) and, for XLA, the compilation are in.
`--smoke` measures kerasbert's only.

Run from the repository root:

    python benchmarks/modernbert_latency.py               # 1 x 512, 1 x 2048, 1 x 8192, 8 x 512
    python benchmarks/modernbert_latency.py --markdown    # the table as Markdown
    python benchmarks/modernbert_latency.py --shapes 1x512 1x2048 --repeats 3 --no_memory
    python benchmarks/modernbert_latency.py --shapes 1x512 1x8192 --no_eager  # ~10 minutes
    python benchmarks/modernbert_latency.py --smoke       # 2 layers, hidden 32: runs?
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # hide TensorFlow's INFO logs

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import kerasbert  # noqa: E402

from kerasbert.bfloat16 import cpu_bfloat16_flags  # noqa: E402
from reporting import (SMOKE_HELP, SMOKE_SHAPE, check_line, format_table,  # noqa: E402
                       median_seconds, smoke_banner)

VOCAB = 50368
BASE = dict(num_hidden_layers=22, hidden_size=768, num_attention_heads=12,
            intermediate_size=1152)
SMOKE = dict(num_hidden_layers=SMOKE_SHAPE["num_layers"], hidden_size=SMOKE_SHAPE["hidden_size"],
             num_attention_heads=SMOKE_SHAPE["num_heads"],
             intermediate_size=SMOKE_SHAPE["intermediate_size"])
OURS, OURS_BF16, SDPA, EAGER = "kerasbert", "kerasbert bf16", "PyTorch SDPA", "PyTorch eager"
COLUMNS = (OURS, OURS_BF16, SDPA, EAGER) if cpu_bfloat16_flags() else (OURS, SDPA, EAGER)
WARMUP = 1


def save_reference(directory, shape):
    """A random ModernBERT of `shape` saved as a Hugging Face folder (ModernBERT-base's config
    otherwise)."""
    torch.manual_seed(0)
    config = transformers.ModernBertConfig(vocab_size=VOCAB, **shape)
    transformers.ModernBertModel(config).eval().save_pretrained(directory)


def token_ids(batch, seq):
    return np.random.default_rng(0).integers(5, 50000, size=(batch, seq), dtype=np.int32)


def runners(directory):
    """`{column: (prepare(ids) -> inputs, run(inputs) -> numpy)}` for the three
    implementations, loaded from `directory`."""
    encoder = kerasbert.convert.from_hf(directory)
    infer = kerasbert.models.inference_function(encoder)
    ours = {OURS: infer}
    if OURS_BF16 in COLUMNS:
        bfloat16 = kerasbert.models.build_encoder(encoder.config, dtype="mixed_bfloat16")
        bfloat16.set_weights(encoder.get_weights())
        ours[OURS_BF16] = kerasbert.models.inference_function(bfloat16)
    reference = transformers.ModernBertModel.from_pretrained(directory).eval()

    def ours_inputs(ids):
        return {"token_ids": tf.constant(ids), "segment_ids": tf.zeros_like(ids),
                "padding_mask": tf.ones_like(ids)}

    def torch_inputs(ids):
        ids = torch.from_numpy(ids).long()
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def torch_run(implementation):
        def run(inputs):
            reference.config._attn_implementation = implementation
            with torch.inference_mode():
                return reference(**inputs).last_hidden_state.numpy()
        return run

    def ours_run(function):
        return lambda inputs: np.asarray(function(inputs)["sequence_output"], np.float32)

    return {**{column: (ours_inputs, ours_run(function)) for column, function in ours.items()},
            SDPA: (torch_inputs, torch_run("sdpa")), EAGER: (torch_inputs, torch_run("eager"))}


def memory_child(directory, column, batch, seq):
    """In a child process: the peak resident memory one forward pass adds, in MiB."""
    torch.set_num_threads(os.cpu_count())
    prepare, run = runners(directory)[column]
    inputs = prepare(token_ids(batch, seq))
    with open("/proc/self/clear_refs", "w") as file:  # the peak (VmHWM) restarts from here
        file.write("5")
    before = _status_mib("VmRSS")
    for _ in range(2):  # the first pass traces and compiles; allocators keep what it took
        run(inputs)
    print(json.dumps({"added_mib": _status_mib("VmHWM") - before}))


def _status_mib(field):
    """A `/proc/self/status` memory field (`VmRSS`, `VmHWM`: the peak since the last reset),
    in MiB."""
    with open("/proc/self/status") as file:
        line = next(line for line in file if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def peak_memory(directory, column, batch, seq):
    completed = subprocess.run(
        [sys.executable, __file__, "--memory_child", directory, column, str(batch), str(seq)],
        capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        print(completed.stderr[-2000:], file=sys.stderr)
        return float("nan")
    return json.loads(completed.stdout.strip().splitlines()[-1])["added_mib"]


def parse_shape(text):
    batch, seq = text.lower().split("x")
    return int(batch), int(seq)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as file:
            flags = next(line for line in file if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
    return " ".join(flag for flag in wanted if flag in flags) or "none of AVX2/AVX-512/AMX"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--memory_child":
        directory, column, batch, seq = sys.argv[2:6]
        memory_child(directory, column, int(batch), int(seq))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["1x512", "1x2048", "1x8192", "8x512"],
                        help="batch x length, e.g. 1x2048")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per shape")
    parser.add_argument("--no_memory", action="store_true", help="skip the peak-memory children")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--no_eager", action="store_true",
                        help="leave out PyTorch's eager attention (about 3 minutes a call at "
                             "1 x 8192 on 2 cores)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP + " (2 layers, hidden 32)")
    args = parser.parse_args()
    shape, name = BASE, "ModernBERT-base"
    if args.smoke:
        print(smoke_banner())
        shape, name, args.shapes, args.repeats = SMOKE, "SMOKE-SIZED ModernBERT", ["1x300"], 1
    shapes = [parse_shape(text) for text in args.shapes]
    torch.set_num_threads(os.cpu_count())

    with tempfile.TemporaryDirectory() as directory:
        save_reference(directory, shape)
        loaded = runners(directory)
        if args.no_eager:
            del loaded[EAGER]
        columns = [column for column in COLUMNS if column in loaded]
        times, memory = {}, {}
        for batch, seq in shapes:
            ids = token_ids(batch, seq)
            outputs = {}
            for column, (prepare, run) in loaded.items():
                print(f"  {column}: {batch} x {seq} ...", file=sys.stderr, flush=True)
                inputs = prepare(ids)
                times[batch, seq, column] = median_seconds(run, inputs, args.repeats, WARMUP)
                outputs[column] = run(inputs)
                if not args.no_memory and (column == OURS or not args.smoke):
                    memory[batch, seq, column] = peak_memory(directory, column, batch, seq)
                print(f"    {times[batch, seq, column]:.3f} s, peak "
                      f"{memory.get((batch, seq, column), float('nan')):.0f} MiB",
                      file=sys.stderr, flush=True)
            for column in (OURS, OURS_BF16):
                if column in outputs:
                    times[batch, seq, column, "difference"] = float(
                        np.abs(outputs[column] - outputs[SDPA]).max())
            fastest = min((column for column in (OURS, OURS_BF16) if column in outputs),
                          key=lambda column: times[batch, seq, column])
            times[batch, seq, "ours"] = fastest

    header = ["batch x length", *(f"{column} (s)" for column in columns), "ours (fastest)",
              "SDPA / ours", "eager / ours", "max |f32 - SDPA|", "max |bf16 - SDPA|"]
    if not args.no_memory:
        header += [f"{column} peak MiB" for column in columns]
    rows = []
    for batch, seq in shapes:
        ours = times[batch, seq, times[batch, seq, "ours"]]
        row = [f"{batch} x {seq}", *(f"{times[batch, seq, column]:.3f}" for column in columns),
               times[batch, seq, "ours"], f"{times[batch, seq, SDPA] / ours:.2f}x",
               f"{times[batch, seq, EAGER] / ours:.2f}x" if EAGER in columns else "-",
               *(f"{times[batch, seq, column, 'difference']:.1e}"
                 if (batch, seq, column, "difference") in times else "-"
                 for column in (OURS, OURS_BF16))]
        if not args.no_memory:
            row += [f"{memory[batch, seq, column]:.0f}" if (batch, seq, column) in memory
                    else "-" for column in columns]
        rows.append(row)

    print(f"{name} encoder ({shape}, vocab {VOCAB}, random weights), CPU with {os.cpu_count()} "
          f"cores ({cpu_flags()}); median seconds per forward pass over {args.repeats} calls "
          f"after {WARMUP} warm-up call, sequence output copied to host.")
    print(f"tensorflow {tf.__version__}, kerasbert {kerasbert.__version__}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), transformers "
          f"{transformers.__version__}. Ratios: PyTorch time / kerasbert time (above 1: "
          "kerasbert is faster). Peak MiB: resident memory one pass adds, in a child process.")
    print()
    print(format_table(header, rows, args.markdown))
    print()
    print("Targets:")
    for (batch, seq), target in (((1, 512), 1.3), ((1, 8192), 2.0)):
        if (batch, seq, OURS) not in times:
            print(f"{batch} x {seq}: not measured.")
            continue
        fastest = times[batch, seq, "ours"]
        ratio = times[batch, seq, SDPA] / times[batch, seq, fastest]
        print(check_line(f"ours >= {target}x PyTorch SDPA at {batch} x {seq}", ratio >= target,
                         f"SDPA / {fastest} = {ratio:.2f}x"))
    if (1, 8192, SDPA) in memory:
        fastest = times[1, 8192, "ours"]
        ours = memory[1, 8192, fastest]
        theirs = min(memory[1, 8192, column] for column in (SDPA, EAGER)
                     if (1, 8192, column) in memory)
        print(check_line("lower peak memory than PyTorch at 1 x 8192", ours < theirs,
                         f"{fastest} {ours:.0f} MiB, PyTorch's lower {theirs:.0f} MiB"))


if __name__ == "__main__":
    main()
