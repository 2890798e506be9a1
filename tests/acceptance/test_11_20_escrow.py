"""Acceptance test of spec 11.20 (escrow), through the real CLI.

"A late positive or negative verified actual value is correctly attributed to the original
attempt under the original version of the rules."  A delayed-confirmation attempt is awarded
with half its signal in escrow (spec 9.17, 10.6) under rules version V1.  Then a new version V2
of the class is published into the same ledger and another attempt is awarded under it.  The
issue tracker's signed late report - "no recurrence" (positive) or "recurrence" (negative) - is
settled with ``triz-eval escrow settle --late``: the settlement lands on the original attempt
only, and its final value is the one V1 gives, not the one V2 would give.  The ledger set-up is
that of tests/ledger/test_escrow_cli_provenance.py (what the service would have written).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.ledger._attempt_cli import with_stored_evidence
from tests.ledger.test_escrow_cli_provenance import (
    ATTEMPT,
    NO_RECURRENCE,
    RECURRENCE,
    Home,
    digest_of,
    late_file,
    make_home,
)
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.log import open_sqlite_ledger
from triz_ri_smart_ai_evaluator.rules import pin, rules_version
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.signal.calculator import SignalCalculator

from ..signal.factories import DEFECT, inputs_for, task_class

VALUES = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
          "recurrence_free": "1"}
LATER = "defect-cli-2"


def _v2() -> TaskClass:
    """A new rules version of the class, in force from an hour ago: base unit doubled."""
    v1 = task_class(DEFECT)
    return v1.model_copy(update={
        "effective_from": datetime.now(UTC) - timedelta(hours=1),
        "formula": v1.formula.model_copy(update={"base_unit": v1.formula.base_unit * 2})})


def _final_under(tc: TaskClass, recurrence_free: str) -> Decimal:
    """The signal ``tc`` gives the attempt once the late value is known."""
    calculator = SignalCalculator(pin(tc, started_at=max(datetime.now(UTC) - timedelta(days=2),
                                                         tc.effective_from)))
    return calculator.compute(inputs_for(DEFECT, {**VALUES,
                                                  "recurrence_free": recurrence_free})).value


def _publish_v2_with_an_attempt(home: Home) -> str:
    """Another attempt awarded under V2: the ledger now holds V2's rules.published."""
    v2 = _v2()
    store = open_sqlite_ledger(home.db, home.keys)
    try:
        now = datetime.now(UTC)
        pinned = pin(v2, started_at=now)
        attempts.initiate(store, pinned, attempt_id=LATER, task_version="1", started_at=now,
                          deadline=now + timedelta(days=14))
        attempts.evaluate(store, pinned, with_stored_evidence(store, LATER,
                                                              inputs_for(DEFECT, VALUES)),
                          attempt_id=LATER, at=now)
        assert pinned.version in attempts.rules_published_in(store)
        return pinned.version
    finally:
        store.close()


def _show(home: Home, triz_eval: Callable[..., CliResult], attempt: str) -> dict[str, Any]:
    shown = triz_eval("attempt", "show", attempt, "--db", home.db, "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert isinstance(record, dict)
    return record


@pytest.mark.parametrize(("report", "value", "kind"), [
    pytest.param(NO_RECURRENCE, "1", "released", id="late-positive"),
    pytest.param(RECURRENCE, "0", "adjusted", id="late-negative"),
])
def test_11_20_a_late_value_settles_the_original_attempt_under_its_original_rules(
        tmp_path: Path, triz_eval: Callable[..., CliResult], report: dict[str, Any],
        value: str, kind: str) -> None:
    home = make_home(tmp_path, cli=triz_eval)
    v1 = rules_version(task_class(DEFECT))
    v2 = _publish_v2_with_an_attempt(home)
    assert v2 != v1
    assert _final_under(_v2(), value) != _final_under(task_class(DEFECT), value)

    confirmation = home.sign(report)
    settled = home.settle(late_file(home, [confirmation], value=value,
                                    evidence=[digest_of(report)]))
    assert settled.returncode == 0, settled.stderr
    result = json.loads(settled.stdout)
    assert result["kind"] == kind
    assert [c["status"] for c in result["confirmations"]] == ["accepted"]
    # Under V1, not V2: the final value is the one the original rules give.
    assert Decimal(result["final"]) == _final_under(task_class(DEFECT), value)
    assert Decimal(result["final"]) != _final_under(_v2(), value)

    original = _show(home, triz_eval, ATTEMPT)
    assert original["rules_version"] == v1
    # The record's escrow: what was held at the award, then the settlement (its kind).
    assert [e["kind"] for e in original["escrow"]] == ["escrow.held", kind]
    assert original["escrow"][-1]["final"] == result["final"]
    assert home.escrow_kinds() == ["escrow.held", f"escrow.{kind}"]
    # The late value is the original attempt's: the attempt under V2 still waits.
    later = _show(home, triz_eval, LATER)
    assert later["rules_version"] == v2
    assert [e["kind"] for e in later["escrow"]] == ["escrow.held"]
    assert triz_eval("ledger", "recompute", "--db", home.db).returncode == 0


def test_11_20_a_settled_attempt_is_not_settled_twice(
        tmp_path: Path, triz_eval: Callable[..., CliResult]) -> None:
    home = make_home(tmp_path, cli=triz_eval)
    confirmation = home.sign(NO_RECURRENCE)
    late = late_file(home, [confirmation], value="1", evidence=[digest_of(NO_RECURRENCE)])
    assert home.settle(late).returncode == 0
    size = home.size()
    again = home.settle(late_file(home, [home.sign(RECURRENCE)], value="0",
                                  evidence=[digest_of(RECURRENCE)]))
    assert again.returncode in (2, 3)
    assert len(again.stderr.strip().splitlines()) == 1
    assert home.size() == size
    assert home.escrow_kinds() == ["escrow.held", "escrow.released"]
