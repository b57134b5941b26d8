"""The fault figures: each test appends what it injected and survived to a JSON-lines file in
the session's shared temporary folder; the terminal summary prints them as BUILD.md's table."""

import pytest

from tests.reliability.faults import FIGURES_FILE, figures_path, read_figures, record_figures


@pytest.fixture(scope="session")
def figures(tmp_path_factory):
    """`figures(fault, injected, survived, data_lost, not_counted=0)` appends one fault kind's
    counts."""
    path = figures_path(tmp_path_factory)

    def record(fault, injected, survived, data_lost, not_counted=0):
        record_figures(path, fault, injected, survived, data_lost, not_counted)

    return record


def pytest_terminal_summary(terminalreporter, config):
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    totals = read_figures(factory.getbasetemp() / FIGURES_FILE)
    if not totals:
        return
    terminalreporter.section("fault injection figures")
    terminalreporter.write_line("| fault | times injected | times survived | data lost |")
    terminalreporter.write_line("|---|---|---|---|")
    for fault, total in totals.items():
        terminalreporter.write_line(f"| {fault} | {total['injected']} | {total['survived']} | "
                                    f"{total['data_lost']} |")
    late = {fault: total["not_counted"] for fault, total in totals.items()
            if total["not_counted"]}
    terminalreporter.write_line("Kills that landed after the output was complete (not counted): "
                                + ("; ".join(f"{fault}: {count}" for fault, count in late.items())
                                   or "none"))
