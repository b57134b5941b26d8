"""The fault figures: each test appends what it injected and survived to a JSON-lines file in
the session's shared temporary folder; the terminal summary prints them as BUILD.md's table."""

import pytest

from tests.reliability.faults import FIGURES_FILE, figures_path, read_figures, record_figures


@pytest.fixture(scope="session")
def figures(tmp_path_factory):
    """`figures(fault, injected, survived, data_lost)` appends one fault kind's counts."""
    path = figures_path(tmp_path_factory)

    def record(fault, injected, survived, data_lost):
        record_figures(path, fault, injected, survived, data_lost)

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
