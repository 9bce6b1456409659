"""Where the test command's time goes: the slowest test files, printed after the run.

The suite's wall time is bounded by its slowest worker (pytest-xdist spreads whole files), so
the number to watch is the time per file (setup, call and teardown of its tests, module
fixtures included), not per test.  Reports reach the controlling process from every worker,
so this works with and without xdist.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

#: how many files the summary lists
SHOWN = 25

_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _seconds:
        return
    total = sum(_seconds.values())
    terminalreporter.section(f"slowest test files (of {total:.0f} s summed over workers)")
    ranked = sorted(_seconds.items(), key=lambda kv: kv[1], reverse=True)
    for path, seconds in ranked[:SHOWN]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {path}")
