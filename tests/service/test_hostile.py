"""Issue 11: the service holds under crashes, tried against a real ``triz-eval serve`` process.

Queued harness runs lost in a kill -9 are reconciled on the next start: each one that never
began is queued again once (``attempt.requeued``, recorded before it runs) and ends completed;
one whose run had begun, or was already queued again, ends errored with the reason.  None is
left ``initiated``.
"""

from __future__ import annotations

import base64
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent, utc_stamp
from triz_ri_smart_ai_evaluator.ledger.log import check_ledger, load_vkey, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.examples import bundled_candidates
from triz_ri_smart_ai_evaluator.sandbox import probe_isolation
from triz_ri_smart_ai_evaluator.service.runtime import orphaned_runs

from ._server_process import ServerProcess, init_server

AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

PILOT_CLASS = "pilot_02_feedback_form"


def _submit(server: ServerProcess, artefact: bytes) -> str:
    with server.client() as http:
        answer = http.post("/v1/policy/attempts", headers={
            "Authorization": f"Bearer {server.tokens['policy-1']}"}, json={
            "class_id": PILOT_CLASS, "artefact_b64": base64.b64encode(artefact).decode()})
    assert answer.status_code == 201, answer.text
    assert answer.json()["harness_queued"] is True
    return str(answer.json()["attempt_id"])


def _status(server: ServerProcess, attempt: str) -> str:
    with server.client() as http:
        answer = http.get(f"/v1/policy/attempts/{attempt}",
                          headers={"Authorization": f"Bearer {server.tokens['policy-1']}"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["status"])


def _kinds(db: Path, attempt: str) -> list[str]:
    store = open_sqlite_ledger(db, read_only=True)
    try:
        return [e.kind for e in store.attempt_events(attempt)]
    finally:
        store.close()


def test_queued_runs_lost_in_a_kill_9_each_end_completed_or_errored(tmp_path: Path) -> None:
    if not probe_isolation().available:
        pytest.fail("this test needs the sandbox (run as root with bwrap and nft)")
    reference = next(e for e in bundled_candidates() if e.name == "reference").diff.read_bytes()
    server = init_server(tmp_path / "svc", workers=1)
    server.start()
    try:
        attempts = [_submit(server, reference) for _ in range(4)]
        server.stop(signal.SIGKILL)  # a crash with runs queued (and perhaps one running)
        db = server.folder / "ledger.db"
        assert all(EventKind.ATTEMPT_COMPLETED.value not in _kinds(db, a) for a in attempts[1:])
        server.start()
        deadline = time.monotonic() + 240
        ended: dict[str, str] = {}
        while len(ended) < len(attempts) and time.monotonic() < deadline:
            for attempt in attempts:
                status = _status(server, attempt)
                if status != "initiated":
                    ended[attempt] = status
            time.sleep(1)
        assert set(ended) == set(attempts), f"left hanging: {set(attempts) - set(ended)}"
        assert set(ended.values()) <= {"completed", "errored"}
        for attempt in attempts:
            kinds = _kinds(db, attempt)
            if EventKind.ATTEMPT_REQUEUED.value in kinds:
                # recorded before the new run, and run to its end
                assert kinds.index(EventKind.ATTEMPT_REQUEUED.value) < len(kinds) - 1
                assert ended[attempt] == "completed"
            else:
                assert ended[attempt] == "errored"
        assert sum(EventKind.ATTEMPT_REQUEUED.value in _kinds(db, a) for a in attempts) >= 3
    finally:
        server.stop()
    store = open_sqlite_ledger(db, read_only=True)
    try:
        report = check_ledger(store, log_key=load_vkey(server.folder / "keys" / "log.vkey"))
    finally:
        store.close()
    assert report.ok, report.problems


def _initiated(store: SqliteStore, attempt: str, digest: str | None) -> None:
    store.append([NewEvent.make(EventKind.ATTEMPT_INITIATED, {
        "task_class": PILOT_CLASS, "attempt_id": attempt, "task_version": "1",
        "rules_version": f"{PILOT_CLASS}/1", "functions": [], "indicators": [],
        "benchmarks": {}, "control_ids": [], "sources": {}, "policy_access": {},
        "checklist": [], "self_checks": [], "formula": "none", "verifier_version": "none",
        "artefact_sha256": digest, "started_at": utc_stamp(AT), "deadline": utc_stamp(AT)},
        actor="policy-port", at=AT, attempt=attempt)])


def test_orphaned_runs_are_the_open_pilot_attempts_with_an_artefact(tmp_path: Path) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db")
    try:
        digest = store.put_evidence(b"--- a/app.py\n")
        for name in ("queued", "began", "again", "done"):
            _initiated(store, name, digest)
        _initiated(store, "no-artefact", None)
        later = AT + timedelta(seconds=1)
        store.append([
            NewEvent.make(EventKind.EVIDENCE_STORED, {"what": "candidate", "digest": digest},
                          actor="harness", at=later, attempt="began"),
            NewEvent.make(EventKind.ATTEMPT_REQUEUED, {"reason": "x"}, actor="evaluator-service",
                          at=later, attempt="again"),
            NewEvent.make(EventKind.ATTEMPT_COMPLETED, {"outcome": "obtained"}, actor="harness",
                          at=later, attempt="done"),
        ])
        found = {o.attempt_id: (o.began, o.requeued) for o in orphaned_runs(store, {PILOT_CLASS})}
    finally:
        store.close()
    assert found == {"queued": (False, False), "began": (True, False), "again": (False, True)}


def test_the_service_checkpoints_on_a_timer_when_events_stop_arriving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 item 3: the unprotected tail stays short even when nothing more arrives; a
    timer signs a checkpoint over events that no count-based checkpoint covered."""
    from triz_ri_smart_ai_evaluator.service import runtime as runtime_module

    from .conftest import start_service

    # The count/age policy stays at 10 s; only the idle timer is made quick.
    monkeypatch.setattr(runtime_module, "CHECKPOINT_TIMER_SECONDS", 0.3)
    service = start_service(tmp_path / "svc")
    running = next(service)
    try:
        with running.policy() as policy:
            policy.submit("document_step_faithfulness", b"a draft")
        size = running.size()
        deadline = time.monotonic() + 10
        covered = 0
        while time.monotonic() < deadline and covered < size:
            signed = running.runtime.call_sync(running.runtime.store.checkpoints)
            covered = signed[-1][0] if signed else 0
            time.sleep(0.1)
        assert covered >= size
    finally:
        with pytest.raises(StopIteration):
            next(service)
