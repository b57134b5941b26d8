"""Printing shared by the benchmark scripts: aligned or Markdown tables, target PASS/MISS lines."""


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
