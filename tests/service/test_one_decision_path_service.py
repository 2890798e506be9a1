"""Issue 10: the service awards what ``signal compute`` computes for the same input (one
decision path), and ``ledger recompute`` reproduces it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ledger._attempt_cli import EXAMPLES, PILOT
from tests.service.conftest import Service
from tests.service.test_rework_service import _attempt, _evaluate
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"


@pytest.mark.parametrize("example", ["pilot_02_honest", "pilot_02_partial",
                                     "pilot_02_false_success"])
def test_the_service_awards_what_signal_compute_computes(service: Service, example: str) -> None:
    computed = json.loads(subprocess.run(
        [str(TRIZ_EVAL), "signal", "compute", "-t", PILOT, "-i", str(EXAMPLES / f"{example}.json"),
         "--json"], capture_output=True, text=True, check=True, timeout=120).stdout)
    award = _evaluate(service, _attempt(service, None), example)
    assert award["outcome"] == computed["outcome"]
    assert award["value"] == computed["signal"]["value"]
    assert award["reasons"] == computed["reasons"]
    assert award["critical_violation"] == computed["critical_violation"]
    assert award["rules_version"] == computed["rules_version"]
    report = service.runtime.call_sync(lambda: recompute_ledger(service.runtime.store))
    assert report.ok, report.mismatches
