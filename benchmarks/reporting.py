"""Printing shared by the benchmark scripts: aligned or Markdown tables, target PASS/MISS lines,
what their `--smoke` runs share and the CPU's SIMD flags; and the median or best time of a call."""

import statistics
import time


def median_seconds(run, inputs, repeats, warmup):
    """The median wall-clock seconds of `run(inputs)` over `repeats` calls, after `warmup`
    untimed calls (where tracing and compilation happen)."""
    for _ in range(warmup):
        run(inputs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def best_seconds(run, repeats):
    """The fewest wall-clock seconds of `run()` over `repeats` calls, after one untimed call
    (where tracing and compilation happen)."""
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def format_table(header, rows, markdown=False):
    """`rows` (lists of str) under `header`, right-aligned, or as a Markdown table."""
    if markdown:
        lines = [header, ["---"] * len(header), *rows]
        return "\n".join("| " + " | ".join(line) + " |" for line in lines)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths))
                     for row in [header, *rows])


def check_line(label, passed, detail):
    """One line saying whether a speed target was met; a benchmark never fails on it."""
    return f"{'PASS' if passed else 'MISS'}  {label} ({detail})"


# `--smoke`: every benchmark's run on a tiny model and tiny data, in seconds (CI runs them all,
# tests/test_benchmark_smokes.py), so that a benchmark cannot rot unnoticed. Not a measurement.
SMOKE_HELP = "tiny model and data, seconds: checks that the script runs; not a measurement"
SMOKE_SHAPE = {"num_layers": 2, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64}


def smoke_banner():
    """The first line a `--smoke` run prints."""
    return "SMOKE RUN (--smoke): tiny model and data; its figures are not a measurement."


def cpu_flags():
    """The SIMD flags of this CPU that matter here (from /proc/cpuinfo), or "unknown"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            flags = next(line for line in file if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    wanted = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_vnni": "VNNI",
              "avx512_bf16": "BF16", "amx_tile": "AMX"}
    return " ".join(label for flag, label in wanted.items() if flag in flags) or "none of AVX2+"
