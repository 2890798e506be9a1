"""Project-wide test configuration: the ``slow`` marker for the developers' inner loop.

``bash scripts/run-tests.sh -m "not slow"`` runs everything but the suites below, which start
real sandboxes and servers or run thousands of property examples; CI runs them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_SLOW = (
    "pilot/",
    "sandbox/",
    "service/test_load.py",
    "service/test_hostile.py",
    "service/test_hostile_tail.py",
    "service/test_fuzz.py",
    "service/test_matrix_http.py",
    "service/test_service_postgres.py",
    "service/test_hostile_replay.py",
    "service/test_hostile_key_rotation.py",
    "ledger/test_tamper_suite.py",
    "ledger/test_crash_safety.py",
    "ledger/test_concurrent_writers.py",
    "ledger/test_one_decision_path.py",
    "ledger/test_ledger_bad_input.py",
    "ledger/test_escrow_cli_provenance.py",
    "service/test_service.py",
    "service/test_hostile_limits.py",
    "provenance/test_echo_trusted_negative.py",
    "signal/test_fail_closed.py",
    "verifier/test_corpus.py",
    "test_cli_fuzz.py",
)
_ROOT = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        relative = Path(str(item.fspath)).resolve().relative_to(_ROOT).as_posix()
        if relative.startswith(_SLOW):
            item.add_marker(pytest.mark.slow)
