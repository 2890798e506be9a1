"""Typed event payloads (issue 14 item 4).

The golden ledger below was written by the writers as they were before payloads were typed
(``golden/ledger_bodies.jsonl``, one canonical event body a line); the same calls must keep
producing exactly those bytes, and that ledger must keep verifying and recomputing.
Regenerate only on purpose: ``TRIZ_REGENERATE_GOLDEN=1 pytest tests/ledger/test_payloads.py``.
"""

from __future__ import annotations

import base64
import hashlib
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.access import (
    AccessGuard,
    Action,
    Catalogue,
    CheckSchedule,
    MemoryControlSets,
    Principal,
    Resource,
    Role,
    ScheduleBook,
    TrustedPort,
    load_matrix,
    sign_request,
)
from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.ledger import attempts
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.provenance import (
    ComponentKey,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    SourceRecord,
    sign_confirmation,
)
from triz_ri_smart_ai_evaluator.provenance import register as provenance_register
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.rules.versions import PinnedRules, rules_from_canonical
from triz_ri_smart_ai_evaluator.signal.inputs import AttemptInputs

from ..signal.factories import DEFECT, PILOT
from ._attempt_cli import with_stored_evidence

HERE = Path(__file__).parent / "golden"
GOLDEN = HERE / "ledger_bodies.jsonl"
T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
REPORT = {"defect": "D-17", "recurrence_reports": 0, "observation_days": 14}
OBSTACLE = {"kind": "external_tool_failure", "indicators": ["recovery", "regression"],
            "recorded_by": "harness", "description": "the SMTP relay of the sandbox was down",
            "standard_followed": True, "evidence": []}


def task_class(class_id: str) -> TaskClass:
    """The class's rules as committed with the golden file (the catalogue may move on)."""
    text = (HERE / f"{'defect' if class_id == DEFECT else 'pilot'}_rules.json").read_bytes()
    return rules_from_canonical(text, hashlib.sha256(text).hexdigest())


def _inputs(name: str) -> AttemptInputs:
    return AttemptInputs.model_validate_json((HERE / f"{name}_inputs.json").read_bytes())


class _Clock:
    def __init__(self) -> None:
        self.now = T0 + timedelta(days=15)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def _stored(store: LedgerStore, attempt_id: str, label: str) -> str:
    """Evidence content for ``label`` stored with its ``evidence.stored`` event."""
    from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent

    data = label.encode()
    digest = store.put_evidence(data)
    store.append([NewEvent.make(EventKind.EVIDENCE_STORED,
                                {"what": label, "digest": digest, "size": len(data)},
                                actor="harness", at=T0, attempt=attempt_id)])
    return digest


def write_golden_ledger(store: LedgerStore) -> None:
    """Every writer of ``ledger.attempts`` once, with fixed clocks: a delayed attempt settled
    through the provenance register, a pilot attempt with every kind of raw input (degree,
    omitted self-check, obstacle, claim, an unresolved digest), one with raw
    measurements only, abandoned."""
    # 1: delayed class, escrow held, settled by an accepted confirmation.
    pinned = pin(task_class(DEFECT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id="defect-1", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(days=14), control_ids=["c-2", "c-1"],
                      verifier_version="v-1", artefact_sha256="ab" * 32, instance="inst-1")
    attempts.evaluate(store, pinned, _inputs("defect"), attempt_id="defect-1", at=T0)
    register = ProvenanceRegister(store, actor="provenance-register", clock=_Clock())
    key = ComponentKey.from_private_bytes(b"t" * 32)
    register.register_source(SourceRecord(
        id="issue_tracker", party="issue tracker webhook", created_at=T0 - timedelta(days=30),
        origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
        independence="operators file recurrences; no path from the policy",
        policy_access=PolicyAccess.NONE, authentication=key.authentication))
    register.record_policy_output("defect-1", "fixed, verified, closed")
    register.submit_confirmation(sign_confirmation(
        key, source="issue_tracker", attempt="defect-1", content=REPORT,
        issued_at=T0 + timedelta(days=14)))
    digest = hashlib.sha256(canonical_json(REPORT)).hexdigest()
    late = {"recurrence_free": {"value": "1", "source": "issue_tracker", "evidence": [digest]}}
    attempts.settle(store, "defect-1", late=late, at=T0 + timedelta(days=15),
                    provenance=register)
    # 2: pilot class, every raw input kind.
    pinned = pin(task_class(PILOT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id="pilot-2", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(hours=1))
    inputs = _inputs("pilot")
    inputs = with_stored_evidence(store, "pilot-2", inputs)
    # one digest no one stored: recorded as unresolved
    delivery = inputs.measurements["delivery"].model_copy(update={"evidence": ("cd" * 32,)})
    inputs = inputs.model_copy(update={"measurements": {**inputs.measurements,
                                                        "delivery": delivery}})
    _stored(store, "pilot-2", "note")
    attempts.evaluate(store, pinned, inputs, attempt_id="pilot-2", at=T0 + timedelta(minutes=1))
    # 3: initiated, never finished.
    attempts.initiate(store, pinned, attempt_id="lost-3", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(hours=1))
    attempts.record_measurements(store, "lost-3", inputs, at=T0)
    _through_the_trusted_port(store, register, pinned)
    attempts.reconcile(store, now=T0 + timedelta(days=30))


def _through_the_trusted_port(store: LedgerStore, register: ProvenanceRegister,
                              pinned: PinnedRules) -> None:
    """4: what the trusted port writes for a harness, a verifier and the owner
    (signed requests)."""
    attempts.initiate(store, pinned, attempt_id="port-4", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(days=60))
    clock = _Clock()
    guard = AccessGuard(load_matrix(), store)
    for n, (role, pid) in enumerate(((Role.HARNESS, "harness-1"), (Role.VERIFIER, "verifier-1"),
                                     (Role.OWNER, "owner-1"))):
        key = ComponentKey.from_private_bytes(bytes([n + 1]) * 32)
        register.register_source(SourceRecord(
            id=pid, party="test operator", created_at=T0, origin=Origin.INDEPENDENT_OPERATIONAL,
            synthetic=False, independence="runs outside the policy's reach",
            policy_access=PolicyAccess.NONE, authentication=key.authentication))
        principal = Principal(pid, role)
        port = TrustedPort(guard, principal, register=register,
                           catalogue=Catalogue({PILOT: pinned.task_class}),
                           control_sets=MemoryControlSets({}), clock=clock,
                           schedule=ScheduleBook(CheckSchedule.create(["verifier-1"])))

        def send(resource: Resource, body: dict[str, Any], *, port: TrustedPort = port,
                 principal: Principal = principal, key: ComponentKey = key) -> None:
            port.request(resource, Action.APPEND,
                         sign_request(key, principal, resource, Action.APPEND, body))

        if role is Role.HARNESS:
            send(Resource.EVIDENCE, {"attempt_id": "port-4", "what": "harness_log",
                                     "content_b64": base64.b64encode(b"log").decode()})
            send(Resource.RAW_MEASUREMENTS, {"attempt_id": "port-4",
                                             "inputs": {"claims": ["ready"]}})
        elif role is Role.VERIFIER:
            send(Resource.VERIFIER_DECISIONS, {"attempt_id": "port-4", "decision": {
                "verdict": "rejected", "note": "step 2 is not in the source"}})
        else:
            send(Resource.QUARANTINE, {"attempt_id": "port-4", "status": "quarantined",
                                       "reason": "under review"})
    send(Resource.ATTEMPTS, {"attempt_id": "port-4", "outcome": "verification_failed",
                             "reason": "rejected"})


def _bodies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    # the register's receipts are random; the golden file needs one fixed receipt
    monkeypatch.setattr(provenance_register.secrets, "token_hex", lambda n: "5e" * n)
    store = SqliteStore.open(tmp_path / "golden.db")
    try:
        write_golden_ledger(store)
        report = recompute_ledger(store)
        assert report.ok, report.mismatches
        return [body for _, body in store.scan()]
    finally:
        store.close()


def test_the_writers_reproduce_the_golden_ledger_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = _bodies(tmp_path, monkeypatch)
    if os.environ.get("TRIZ_REGENERATE_GOLDEN") == "1":
        GOLDEN.write_bytes(b"".join(b + b"\n" for b in bodies))
    assert bodies == GOLDEN.read_bytes().splitlines()
