"""What the test run reports besides outcomes: which tests exercised the served application.

``served.py`` records every request against the test that sent it; the terminal summary lists
those tests (``served: <node id>``). The evaluator credits a ``test_selfcheck_<id>`` only when it
passed and is on that list (TASK.md, "Self-check tests").
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import served


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    served.current_test = item.nodeid
    yield
    served.current_test = None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if served.used_by:
        terminalreporter.section("served application")
        for node in sorted(served.used_by):
            terminalreporter.write_line(f"served: {node}")
