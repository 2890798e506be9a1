"""Issue 10: one decision path.  ``signal compute``, ``attempt evaluate``, ``escrow settle``
and the service give the same outcome for the same input, and ``ledger recompute`` (an
independent implementation, spec 10.2, 11.13) reproduces every award.

The property draws random hostile attempts for every bundled class (values in and out of their
domains, wrong sources, missing evidence, degrees, obstacles, claims), stores their evidence as
blobs, evaluates them into a real SQLite ledger and compares with the calculator and with the
recomputation.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.rules.versions import PinnedRules
from triz_ri_smart_ai_evaluator.signal import AttemptInputs

from ..signal.factories import DEFECT, DOCS, PILOT, STARTED, calculator, task_class
from ..signal.test_fail_closed import attempt
from ._attempt_cli import EVIDENCE, EXAMPLES, make_home, with_stored_evidence
from ._tamper import SqliteAttacker

PATHS = settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _accepted(class_id: str, doc: dict[str, Any]) -> AttemptInputs | None:
    """The inputs, or None when the calculator refuses them."""
    try:
        inputs = AttemptInputs.model_validate(doc)
        calculator(class_id).compute(inputs)
    except InputError:
        return None
    return inputs


def _opened(folder: Path, pinned: PinnedRules) -> SqliteStore:
    """A fresh ledger in ``folder`` with attempt ``a-1`` initiated under ``pinned``."""
    store = SqliteStore.open(folder / "ledger.db")
    attempts.initiate(store, pinned, attempt_id="a-1", task_version=pinned.version,
                      started_at=STARTED, deadline=STARTED + timedelta(hours=1))
    return store


@pytest.mark.parametrize("class_id", [PILOT, DEFECT, DOCS])
@PATHS
@given(data=st.data())
def test_the_ledger_awards_what_the_calculator_computes_and_recompute_reproduces_it(
    class_id: str, data: st.DataObject
) -> None:
    inputs = _accepted(class_id, data.draw(attempt(class_id)))
    if inputs is None:
        return  # refused input: the property of test_fail_closed covers it
    pinned = pin(task_class(class_id), started_at=STARTED)
    with tempfile.TemporaryDirectory() as folder:
        store = _opened(Path(folder), pinned)
        try:
            stored = with_stored_evidence(store, "a-1", inputs)
            expected = calculator(class_id).compute(stored)
            awarded = attempts.evaluate(store, pinned, stored, attempt_id="a-1", at=STARTED)
            assert (awarded.value, awarded.outcome, awarded.critical_violation) == (
                expected.value, expected.outcome, expected.critical_violation)
            assert awarded.indicators == expected.indicators
            assert awarded.checks == expected.checks
            report = recompute_ledger(store)
            assert report.ok, report.mismatches
            assert report.matched == 1
        finally:
            store.close()


@pytest.mark.parametrize("example", ["pilot_02_honest", "pilot_02_partial",
                                     "pilot_02_false_success"])
def test_signal_compute_and_attempt_evaluate_agree_on_the_bundled_examples(
    tmp_path: Path, example: str
) -> None:
    """The same file through both commands: same S, outcome and breakdown; only the evidence
    label differs (unchecked without a ledger, resolved with one)."""
    home = make_home(tmp_path)
    computed = json.loads(home.run("signal", "compute", "-t", PILOT, "-i",
                                   EXAMPLES / f"{example}.json", "--json").stdout)
    evaluated = home.evaluate(example, "att-1", "--evidence-dir", EVIDENCE / example)
    assert computed["evidence"] == "unchecked"
    assert evaluated["evidence"] == "resolved"
    for key in ("outcome", "signal", "reasons", "indicators", "checks", "critical_violation",
                "rules_version"):
        assert evaluated[key] == computed[key], key
    assert home.run("ledger", "recompute").returncode == 0


def test_escrow_settlement_uses_the_calculator_of_the_award(tmp_path: Path) -> None:
    """The deadline rule releases exactly the share the award held: the settlement's
    preliminary signal is the award's, computed by the same calculator."""
    pinned = pin(task_class(DEFECT), started_at=STARTED)
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    from ..signal.factories import inputs_for

    store = SqliteStore.open(tmp_path / "ledger.db")
    try:
        attempts.initiate(store, pinned, attempt_id="d-1", task_version=pinned.version,
                          started_at=STARTED, deadline=STARTED + timedelta(days=14))
        inputs = with_stored_evidence(store, "d-1", inputs_for(DEFECT, values))
        award = attempts.evaluate(store, pinned, inputs, attempt_id="d-1", at=STARTED)
        settled = attempts.settle(store, "d-1", late=None,
                                  at=datetime(2026, 12, 20, tzinfo=UTC))
        direct = calculator(DEFECT).compute(inputs)
        assert award.value == direct.value == Decimal(2)
        assert Decimal(settled.to_dict()["final"]) == direct.value
        assert recompute_ledger(store).ok
    finally:
        store.close()


def test_an_award_from_rules_edited_in_the_ledger_does_not_recompute(tmp_path: Path) -> None:
    """issue 10 class 7: rules whose recorded bytes no longer hash to their version are never
    used, by settlement (IntegrityError) or recomputation (a mismatch)."""
    import sqlite3

    from triz_ri_smart_ai_evaluator.errors import IntegrityError

    from ..signal.factories import inputs_for

    pinned = pin(task_class(DEFECT), started_at=STARTED)
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    path = tmp_path / "ledger.db"
    store = SqliteStore.open(path)
    try:
        attempts.initiate(store, pinned, attempt_id="d-1", task_version=pinned.version,
                          started_at=STARTED, deadline=STARTED + timedelta(days=14))
        inputs = with_stored_evidence(store, "d-1", inputs_for(DEFECT, values))
        attempts.evaluate(store, pinned, inputs, attempt_id="d-1", at=STARTED)
    finally:
        store.close()
    owner = SqliteAttacker(sqlite3.connect(path))  # write access to the file, no key
    owner.unguard("events")
    for seq, body in owner.sql("SELECT seq, body FROM {events}"):
        text = bytes(body).decode()
        if '"kind":"rules.published"' in text:
            edited = text.replace('\\"escrow_share\\":\\"0.5\\"', '\\"escrow_share\\":\\"0.1\\"')
            assert edited != text
            owner.sql("UPDATE {events} SET body = ? WHERE seq = ?", (edited.encode(), seq))
    owner.reguard()
    owner.conn.commit()
    owner.conn.close()
    store = SqliteStore.open(path)
    try:
        assert not recompute_ledger(store).ok
        with pytest.raises(IntegrityError):
            attempts.settle(store, "d-1", late=None, at=datetime(2026, 12, 20, tzinfo=UTC))
    finally:
        store.close()


MISSING = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@MISSING
@given(data=st.data())
def test_a_missing_evidence_blob_never_raises_the_signal(data: st.DataObject) -> None:
    """issue 10 class 6: the same attempt with some of its evidence blobs never stored is
    awarded at most what it is awarded with every blob stored (or 0), and a value whose only
    evidence is missing is not verified."""
    class_id = data.draw(st.sampled_from([PILOT, DEFECT, DOCS]))
    inputs = _accepted(class_id, data.draw(attempt(class_id)))
    if inputs is None:
        return
    pinned = pin(task_class(class_id), started_at=STARTED)
    with tempfile.TemporaryDirectory() as folder:
        store = _opened(Path(folder), pinned)
        try:
            full = with_stored_evidence(store, "a-1", inputs)
            cited = sorted({d for group in (full.measurements, full.checklist, full.self_checks)
                            for item in group.values() for d in item.evidence})
            dropped = set(data.draw(st.lists(st.sampled_from(cited), unique=True))
                          if cited else [])
            # The same digests, but the blobs of ``dropped`` were never stored: cite digests
            # of content nobody stored instead.
            doc_missing = full.model_dump(mode="json")
            for group in ("measurements", "checklist", "self_checks"):
                for item in doc_missing[group].values():
                    item["evidence"] = [("f" * 64 if d in dropped else d)
                                        for d in item["evidence"]]
            missing = AttemptInputs.model_validate(doc_missing)
            with_all = calculator(class_id).compute(full)
            awarded = attempts.evaluate(store, pinned, missing, attempt_id="a-1", at=STARTED)
            # A missing blob can only take S down to 0; from a negative value it gives 0,
            # since a violation whose evidence is gone is no verified violation (spec 6.6).
            assert awarded.value <= max(with_all.value, Decimal(0))
            by_id = {line.id: line for line in awarded.indicators}
            for ind_id, item in doc_missing["measurements"].items():
                if item["evidence"] and set(item["evidence"]) == {"f" * 64}:
                    assert by_id[ind_id].status.value != "verified"
        finally:
            store.close()
