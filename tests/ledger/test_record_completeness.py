"""Issue 10, defect class 10 (record part): every field of spec 10.1 is in the attempt record.

Found by the audit: ``violations`` was taken by grepping the award's reasons for the word
"violation", so omitted mandatory self-checks and failed gates were missing, and so was every
violation behind the one that decided the outcome; ``included_in_training`` was never written;
the CLI recorded ``task_version`` "1" whatever class version the attempt was pinned to.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.rules.versions import PinnedRules
from triz_ri_smart_ai_evaluator.signal import AttemptInputs

from ..signal.factories import DEFECT, DOCS, PILOT, inputs_for, pilot_values, task_class
from ._attempt_cli import EVIDENCE, Home, make_home, with_stored_evidence

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)  # defect_fix rules v2 in force
DEFECT_VALUES = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
                 "recurrence_free": "1"}
DOCS_VALUES = {"citation_fidelity": "1", "evidence_integrity": "1", "contradiction_free": "1",
               "caveat_rate": "0"}


@pytest.fixture
def store(tmp_path: Path) -> Any:
    sqlite = SqliteStore.open(tmp_path / "ledger.db")
    yield sqlite
    sqlite.close()


def _record(store: LedgerStore, pinned: PinnedRules, inputs: AttemptInputs,
            attempt_id: str = "a-1") -> dict[str, Any]:
    attempts.initiate(store, pinned, attempt_id=attempt_id, task_version=pinned.version,
                      started_at=T0, deadline=T0 + timedelta(days=14))
    attempts.evaluate(store, pinned, with_stored_evidence(store, attempt_id, inputs),
                      attempt_id=attempt_id, at=T0)
    assert recompute_ledger(store).ok
    return attempts.attempt_record(store.attempt_events(attempt_id))


def _gate_class_with_a_quality_item() -> TaskClass:
    """Pilot 02 with one gate turned into a quality item: model 1 (gate) with K, so that K
    below the mandatory level can happen (no bundled class has one)."""
    doc = task_class(PILOT).model_dump(mode="json")
    for item in doc["checklist"]:
        if item["id"] == "duplicate_delivery":
            item["effect"] = "quality"
            item["severity"] = "major"
    return TaskClass.model_validate(doc)


CASES = [
    pytest.param(PILOT, {"omitted": ("checks_app_preserved",)},
                 [("self_check_omitted", "checks_app_preserved")], id="omitted-self-check"),
    pytest.param(PILOT, {"failed": ("end_to_end_delivery",)},
                 [("gate_failed", "end_to_end_delivery")], id="failed-gate"),
    pytest.param(PILOT, {"failed": ("no_false_success",)},
                 [("critical_violation", "no_false_success")], id="critical"),
    # The critical violation decides the outcome; the omitted check and the failed gate behind
    # it are violations all the same (they were dropped by the grep).
    pytest.param(PILOT, {"failed": ("no_false_success", "end_to_end_delivery"),
                         "omitted": ("checks_smtp_unavailable", "checks_app_preserved")},
                 [("critical_violation", "no_false_success"),
                  ("gate_failed", "end_to_end_delivery"),
                  ("self_check_omitted", "checks_app_preserved"),
                  ("self_check_omitted", "checks_smtp_unavailable")], id="all-at-once"),
    pytest.param(PILOT, {}, [], id="none"),
]


@pytest.mark.parametrize(("class_id", "kwargs", "expected"), CASES)
def test_violations_list_every_violation_from_structured_data(
    store: LedgerStore, class_id: str, kwargs: dict[str, Any],
    expected: list[tuple[str, str]],
) -> None:
    pinned = pin(task_class(class_id), started_at=T0)
    record = _record(store, pinned, inputs_for(class_id, pilot_values(), **kwargs))
    assert sorted((v["kind"], v["id"]) for v in record["violations"]) == sorted(expected)


def test_k_below_the_mandatory_level_is_a_violation(store: LedgerStore) -> None:
    tc = _gate_class_with_a_quality_item()
    pinned = pin(tc, started_at=T0)
    inputs = inputs_for(PILOT, pilot_values(), degrees={"duplicate_delivery": "1/2"})
    record = _record(store, pinned, inputs)
    assert record["outcome"] == "quality_violation"
    [k] = record["violations"]
    assert (k["kind"], k["k"], k["minimum"]) == ("quality_below_minimum", "0.5", "1")


@pytest.mark.parametrize(("class_id", "values", "kwargs", "included"), [
    pytest.param(DEFECT, DEFECT_VALUES, {}, True, id="verified-limited-mode"),
    pytest.param(DEFECT, DEFECT_VALUES, {"drop_evidence": ("regression_suite",)}, False,
                 id="not-verified"),
    pytest.param(PILOT, pilot_values(), {}, False, id="shadow-mode"),
    pytest.param(DOCS, DOCS_VALUES, {}, False, id="shadow-mode-docs"),
])
def test_the_training_decision_is_written_at_award_time(
    store: LedgerStore, class_id: str, values: dict[str, str], kwargs: dict[str, Any],
    included: bool,
) -> None:
    pinned = pin(task_class(class_id), started_at=T0)
    record = _record(store, pinned, inputs_for(class_id, values, **kwargs))
    assert record["included_in_training"] is included
    written = [e.data for e in store.attempt_events("a-1") if e.kind == "training.included"]
    assert [w["included"] for w in written] == [included]


def test_the_cli_records_the_class_version_the_attempt_was_pinned_to(tmp_path: Path) -> None:
    home: Home = make_home(tmp_path)
    home.evaluate("pilot_02_honest", "v-1", "--evidence-dir", EVIDENCE / "pilot_02_honest")
    initiated = next(e["data"] for e in home.events("v-1") if e["kind"] == "attempt.initiated")
    assert initiated["task_version"] == initiated["rules_version"]
    assert initiated["task_version"] != "1"


def test_a_self_check_whose_evidence_does_not_resolve_is_not_done(store: LedgerStore) -> None:
    """A self-check reported performed, citing a digest no one stored, is neither among the
    completed mandatory checks nor silent: it is an omitted self-check (spec 6.9, 10.1)."""
    pinned = pin(task_class(PILOT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id="a-1", task_version=pinned.version,
                      started_at=T0, deadline=T0 + timedelta(hours=1))
    inputs = with_stored_evidence(store, "a-1", inputs_for(PILOT, pilot_values()))
    check = inputs.self_checks["checks_app_preserved"].model_copy(
        update={"evidence": ("12" * 32,)})
    attempts.evaluate(store, pinned, inputs.model_copy(update={"self_checks": {
        **inputs.self_checks, "checks_app_preserved": check}}), attempt_id="a-1", at=T0)
    record = attempts.attempt_record(store.attempt_events("a-1"))
    assert "checks_app_preserved" not in record["mandatory_checks_done"]
    assert len(record["mandatory_checks_done"]) == len(pinned.task_class.self_checks) - 1
    assert {"kind": "self_check_omitted", "id": "checks_app_preserved"} in record["violations"]
    assert recompute_ledger(store).ok
