"""Issue 10, defect class 6: evidence that does not exist must not count (spec 8.8, 9.3, 10.3).

Any 64-hex string used to pass for evidence: ``attempt evaluate`` recorded a verified award whose
digests pointed at nothing, and ``ledger verify`` then counted 0 blobs.  In the trusted record
every digest a measurement, checklist state, self-check or obstacle cites must resolve to a blob
in the ledger's evidence store, stored for that attempt by a trusted component, before the value
counts.  The raw inputs are still recorded exactly as received (10.3); what did not resolve is
recorded for the auditor and named in the award's reasons, and the value is ``no_evidence``
(fail closed, never a silent zero).  ``ledger recompute`` does the same resolution from the
ledger alone (10.2, 11.13).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.signal import AttemptInputs, SignalCalculator

from ..signal.factories import PILOT, inputs_for, pilot_values, task_class
from ._attempt_cli import EVIDENCE, Home, cited, example, make_home, with_stored_evidence

T0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)  # pilot 02 rules version 3 is in force (ADR 0012)
AT = "2026-12-01T10:00:00.000000Z"


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    """The same tests on both stores (SQLite file, PostgreSQL schema)."""
    if request.param == "sqlite":
        sqlite = SqliteStore.open(tmp_path / "ledger.db")
        yield sqlite
        sqlite.close()
    else:
        yield request.getfixturevalue("pg_ledger").open()


def _initiate(store: LedgerStore, attempt_id: str) -> Any:
    pinned = pin(task_class(PILOT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id=attempt_id, task_version=pinned.version,
                      started_at=T0, deadline=T0 + timedelta(hours=1))
    return pinned


def _resolution(store: LedgerStore, attempt_id: str) -> dict[str, Any]:
    found = [e.data for e in store.attempt_events(attempt_id)
             if e.kind == EventKind.EVIDENCE_RESOLVED.value]
    assert len(found) == 1
    return found[0]


def _award(store: LedgerStore, attempt_id: str) -> dict[str, Any]:
    return next(e.data for e in store.attempt_events(attempt_id)
                if e.kind == EventKind.AWARD_DECISION.value)


# -- through the CLI, as a user meets it ------------------------------------------------------
def test_fabricated_digests_in_attempt_evaluate_are_not_evidence(home: Home) -> None:
    """The incident: the bundled honest example cites digests no one stored; it was awarded
    S = 2 as verified.  Now it is not verified, and the reasons name the digests."""
    doc = example("pilot_02_honest")
    digests = cited(AttemptInputs.model_validate(doc))
    answer = home.evaluate("pilot_02_honest", "fabricated")
    assert answer["outcome"] == "not_verified"
    assert answer["verified"] is False
    assert answer["signal"]["value"] == "0"
    named = [d for d in digests if any(d in reason for reason in answer["reasons"])]
    assert sorted(named) == sorted(digests)
    events = home.events("fabricated")
    # spec 10.3: the raw inputs are recorded exactly as received, digests included.
    raw = {(e["data"]["what"], e["data"].get("id")): e["data"] for e in events
           if e["kind"] == "measurement.raw"}
    assert raw[("indicator", "delivery")]["evidence"] == doc["measurements"]["delivery"][
        "evidence"]
    resolved = [e["data"] for e in events if e["kind"] == "evidence.resolved"]
    assert len(resolved) == 1
    assert {u["digest"] for u in resolved[0]["unresolved"]} == digests
    assert resolved[0]["resolved"] == []
    home.run("ledger", "recompute")


def test_evidence_dir_stores_the_blobs_and_the_example_verifies(home: Home) -> None:
    answer = home.evaluate("pilot_02_honest", "honest", "--evidence-dir",
                           EVIDENCE / "pilot_02_honest")
    assert answer["outcome"] == "obtained"
    assert answer["signal"]["value"] == "2"
    assert answer["evidence"] == "resolved"
    events = home.events("honest")
    stored = [e for e in events if e["kind"] == "evidence.stored"]
    # Each file is attributed to the source named by its folder.
    assert {(e["actor"], e["data"]["what"]) for e in stored} == {
        (p.parent.name, p.name) for p in (EVIDENCE / "pilot_02_honest").glob("*/*")}
    resolution = next(e["data"] for e in events if e["kind"] == "evidence.resolved")
    assert resolution["unresolved"] == []
    assert {r["digest"] for r in resolution["resolved"]} == cited(
        AttemptInputs.model_validate(example("pilot_02_honest")))
    verified = json.loads(home.run("ledger", "verify", "--json").stdout)
    assert verified["ok"]
    assert verified["evidence_checked"] >= len(stored)
    home.run("ledger", "recompute")


def test_evidence_stored_for_another_attempt_is_not_replayed(home: Home) -> None:
    """Attack: cite the blobs another (honest) attempt stored.  They exist, but not for this
    attempt, so they do not count."""
    home.evaluate("pilot_02_honest", "first", "--evidence-dir", EVIDENCE / "pilot_02_honest")
    answer = home.evaluate("pilot_02_honest", "replay")
    assert answer["outcome"] == "not_verified"
    assert any("not stored for this attempt" in r for r in answer["reasons"])
    home.run("ledger", "recompute")


def test_evidence_dir_of_an_unknown_source_is_refused(
        home: Home, tmp_path: Path, triz_eval: Callable[..., CliResult]) -> None:
    folder = tmp_path / "evidence" / "not_a_source"
    folder.mkdir(parents=True)
    (folder / "log.txt").write_text("x", "utf-8")
    # In process (cli.main) with the environment and folder ``home.run`` gives the script.
    proc = triz_eval("attempt", "evaluate", "-t", PILOT, "-i",
                     Path(__file__).resolve().parents[2] / "examples/signal/pilot_02_honest.json",
                     "--evidence-dir", tmp_path / "evidence", env=home.env, cwd=home.root)
    assert proc.returncode == 2
    assert "not_a_source" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_attempt_evaluate_help_documents_the_evidence_dir(home: Home) -> None:
    text = home.run("attempt", "evaluate", "--help").stdout
    assert "--evidence-dir" in text
    assert "--instance" in text


# -- the rule, on both stores -----------------------------------------------------------------
def test_stored_evidence_resolves_and_the_award_verifies(store: LedgerStore) -> None:
    pinned = _initiate(store, "a-1")
    inputs = with_stored_evidence(store, "a-1", inputs_for(PILOT, pilot_values()))
    signal = attempts.evaluate(store, pinned, inputs, attempt_id="a-1", at=T0)
    assert signal.outcome.value == "obtained"
    assert signal.evidence_check == "resolved"
    assert _resolution(store, "a-1")["unresolved"] == []
    assert recompute_ledger(store).ok


def test_a_digest_no_one_stored_is_not_evidence(store: LedgerStore) -> None:
    pinned = _initiate(store, "a-2")
    inputs = with_stored_evidence(store, "a-2", inputs_for(PILOT, pilot_values()))
    fake = "ab" * 32
    forged = inputs.model_copy(update={"measurements": {
        **inputs.measurements,
        "delivery": inputs.measurements["delivery"].model_copy(update={"evidence": (fake,)})}})
    signal = attempts.evaluate(store, pinned, forged, attempt_id="a-2", at=T0)
    assert signal.outcome.value == "not_verified"
    assert any(fake in r and "delivery" in r for r in signal.reasons)
    line = next(i for i in signal.indicators if i.id == "delivery")
    assert line.status.value == "no_evidence"
    unresolved = _resolution(store, "a-2")["unresolved"]
    assert [(u["what"], u["id"], u["digest"]) for u in unresolved] == [
        ("indicator", "delivery", fake)]
    # The award names the digest too: the auditor sees why, not a silent zero.
    assert any(fake in r for r in _award(store, "a-2")["reasons"])
    assert recompute_ledger(store).ok


def test_an_evidence_event_whose_blob_is_missing_does_not_resolve(store: LedgerStore) -> None:
    pinned = _initiate(store, "a-3")
    inputs = with_stored_evidence(store, "a-3", inputs_for(PILOT, pilot_values()))
    ghost = "cd" * 32  # an evidence.stored event for it, but no blob in the store
    store.append([NewEvent.make(EventKind.EVIDENCE_STORED, {"what": "ghost", "digest": ghost},
                                actor="harness", at=AT, attempt="a-3")])
    item = inputs.checklist["no_false_success"].model_copy(update={"evidence": (ghost,)})
    signal = attempts.evaluate(
        store, pinned, inputs.model_copy(update={"checklist": {**inputs.checklist,
                                                               "no_false_success": item}}),
        attempt_id="a-3", at=T0)
    assert signal.outcome.value == "not_verified"
    reason = next(u["reason"] for u in _resolution(store, "a-3")["unresolved"])
    assert "evidence store" in reason


@pytest.mark.parametrize("marker", [
    {"what": "artefact", "origin": "evaluated_model_output", "submitted_by": "policy-1"},
    {"what": "candidate", "source": "diff"},
    {"what": "signed_request", "principal": "harness-1"},
], ids=["policy-artefact", "harness-copy-of-the-candidate", "signed-request-record"])
def test_the_policys_own_output_is_not_evidence(store: LedgerStore,
                                                marker: dict[str, Any]) -> None:
    """Spec 8.8, 8.14: the policy's artefact (or a request record) stored as a blob for the
    attempt does not become evidence of a measured value by being cited."""
    pinned = _initiate(store, "a-4")
    inputs = with_stored_evidence(store, "a-4", inputs_for(PILOT, pilot_values()))
    data = b"diff --git a/app.py b/app.py\n+print('all scenarios delivered')\n"
    digest = store.put_evidence(data)
    store.append([NewEvent.make(EventKind.EVIDENCE_STORED, {**marker, "digest": digest},
                                actor="policy-1" if "origin" in marker else "harness", at=AT,
                                attempt="a-4")])
    m = inputs.measurements["delivery"].model_copy(update={"evidence": (digest,)})
    signal = attempts.evaluate(
        store, pinned,
        inputs.model_copy(update={"measurements": {**inputs.measurements, "delivery": m}}),
        attempt_id="a-4", at=T0)
    assert signal.outcome.value == "not_verified"
    assert [u["digest"] for u in _resolution(store, "a-4")["unresolved"]] == [digest]


def test_inputs_from_events_are_the_inputs_the_calculator_saw(store: LedgerStore) -> None:
    """Settlement and the harness's ``signal_of`` rebuild the inputs from the ledger: they must
    see the unresolved digests removed, as the award did, not the raw ones."""
    pinned = _initiate(store, "a-5")
    inputs = with_stored_evidence(store, "a-5", inputs_for(PILOT, pilot_values()))
    fake = "ef" * 32
    forged = inputs.model_copy(update={"measurements": {
        **inputs.measurements,
        "regression": inputs.measurements["regression"].model_copy(update={"evidence": (fake,)})
    }})
    signal = attempts.evaluate(store, pinned, forged, attempt_id="a-5", at=T0)
    rebuilt = attempts.inputs_from_events(store.attempt_events("a-5"))
    assert fake not in cited(rebuilt)
    again = SignalCalculator(pinned).compute(rebuilt)
    assert (again.value, again.outcome) == (signal.value, signal.outcome)


def test_an_award_that_counted_unresolved_evidence_fails_recompute(tmp_path: Path) -> None:
    """An award written the old way (digests never resolved) does not reproduce."""
    store = SqliteStore.open(tmp_path / "old.db")
    pinned = _initiate(store, "old")
    inputs = inputs_for(PILOT, pilot_values())  # digests of labels: nothing stored
    signal = SignalCalculator(pinned).compute(inputs)
    attempts.record_measurements(store, "old", inputs, at=T0)
    store.append([
        NewEvent.make(EventKind.INDICATORS_COMPUTED, attempts.indicators_payload(signal),
                      actor="evaluator", at=AT, attempt="old"),
        NewEvent.make(EventKind.AWARD_DECISION, attempts.award_payload(signal, pinned),
                      actor="evaluator", at=AT, attempt="old"),
    ])
    report = recompute_ledger(store)
    store.close()
    assert not report.ok
    assert "old" in report.mismatches[0]
