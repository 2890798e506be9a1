"""The service end to end: a pilot 02 submission runs in the harness worker pool (real sandbox,
real receiver), the attempt's status moves through the ledger's states, the policy's view hides
what it must, the owner's view shows the breakdown, and credentials are checked."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import Service, raw, start_service
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.examples import bundled_candidates
from triz_ri_smart_ai_evaluator.sandbox import probe_isolation
from triz_ri_smart_ai_evaluator.service.auth import signed_headers
from triz_ri_smart_ai_evaluator.service.client import ServiceError

PILOT = "pilot_02_feedback_form"


@pytest.fixture
def with_workers(tmp_path: Path) -> Iterator[Service]:
    yield from start_service(tmp_path / "svc", workers=1)


def wait_for_outcome(service: Service, attempt: str, timeout: float = 120) -> dict[str, object]:
    with service.policy() as policy:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = policy.status(attempt)
            if status["status"] != "initiated":
                return status
            time.sleep(0.5)
    raise AssertionError(f"attempt {attempt} has no outcome after {timeout} s")


def _why(folder: Path) -> list[object]:
    """What the run bundles say, for a failure message: status, reasons, abort, phases."""
    found: list[object] = []
    for summary in sorted(folder.glob("**/summary.json")):
        doc = json.loads(summary.read_text("utf-8"))
        found.append({k: doc.get(k) for k in ("status", "signal", "reasons", "aborted",
                                              "metrics", "phases")})
    return found


def test_pilot_submission_runs_in_the_worker_pool(with_workers: Service) -> None:
    if not probe_isolation().available:
        pytest.fail("this test needs the sandbox (run as root with bwrap and nft)")
    reference = next(e for e in bundled_candidates() if e.name == "reference").diff
    with with_workers.policy() as policy:
        started = time.monotonic()
        attempt = policy.submit(PILOT, reference.read_bytes(), claims=["done, verified"])
        answered = time.monotonic() - started
        assert policy.status(attempt)["status"] == "initiated"
    assert answered < 5, "the harness must not run in the request handler"
    status = wait_for_outcome(with_workers, attempt)
    assert status["status"] == "completed"
    assert status["final_signal"] == "2", _why(with_workers.folder)
    # The policy's view carries no control data, expected answers or schedule.
    text = str(status)
    for hidden in ("control", "expected", "schedule", "scenario", "plan"):
        assert hidden not in text
    with with_workers.trusted(Role.OWNER) as owner:
        record = owner.attempt(attempt)["record"]
    assert record["status"] == "completed"
    assert record["signal"]["value"] == "2"
    assert record["performance"], "the owner sees the transparent breakdown (spec 3.2)"


def test_garbage_pilot_submission_ends_errored(with_workers: Service) -> None:
    with with_workers.policy() as policy:
        attempt = policy.submit(PILOT, b"this is not a diff")
    status = wait_for_outcome(with_workers, attempt, timeout=60)
    assert status["status"] == "errored"
    assert status["final_signal"] is None


def test_policy_credentials_are_checked(service: Service) -> None:
    with raw(service) as http:
        assert http.get("/v1/policy/tasks/pilot_02_feedback_form").status_code == 401
        bad = http.get("/v1/policy/tasks/pilot_02_feedback_form",
                       headers={"Authorization": "Bearer not-a-token"})
        assert bad.status_code == 401
        assert "error" in bad.json()


def test_trusted_signature_replay_and_forgery_are_refused(service: Service) -> None:
    key = service.keys["auditor-1"]
    path = "/v1/trusted/attempts/att-0"
    headers = signed_headers(key, "auditor-1", "GET", path, "", b"")
    with raw(service) as http:
        first = http.get(path, headers=headers)
        assert first.status_code in (200, 400), first.text  # authenticated
        again = http.get(path, headers=headers)
        assert again.status_code == 401
        assert "replayed" in again.json()["error"]
        forged = signed_headers(service.keys["verifier-1"], "auditor-1", "GET", path, "", b"")
        assert http.get(path, headers=forged).status_code == 401
        stale = signed_headers(key, "auditor-1", "GET", path, "", b"", now=time.time() - 3600)
        assert http.get(path, headers=stale).status_code == 401


def test_policy_token_cannot_use_the_trusted_port(service: Service) -> None:
    with raw(service) as http:
        answer = http.post("/v1/trusted/requests",
                           json={"resource": "raw_measurements", "action": "read",
                                 "payload": {}},
                           headers={"Authorization": f"Bearer {service.tokens['policy-1']}"})
    assert answer.status_code == 401


def test_owner_view_of_an_attempt_and_policy_view_differ(service: Service) -> None:
    with service.policy() as policy:
        attempt = policy.submit("document_step_faithfulness", b"artefact",
                                claims=["all verified"], diagnostics=["note"])
        mine = policy.status(attempt)
    with service.trusted(Role.AUDITOR) as auditor:
        full = auditor.attempt(attempt)["record"]
    assert set(mine) == {"attempt_id", "task_class", "rules_version", "artefact_sha256",
                         "started_at", "status", "final_signal"}
    assert "control_ids" in full
    assert "policy_access" in full  # spec 10.1: the policy's permissions per source
    assert [e["kind"] for e in full["events"]].count("policy.output") == 2


def test_oversized_body_is_413(service: Service) -> None:
    with raw(service) as http:
        answer = http.post("/v1/policy/attempts", content=b"x" * (3 * 1024 * 1024),
                           headers={"Authorization": f"Bearer {service.tokens['policy-1']}",
                                    "Content-Type": "application/json"})
    assert answer.status_code == 413


def test_openapi_document_lists_both_ports(service: Service) -> None:
    doc = httpx.get(f"{service.base_url}/openapi.json", timeout=10).json()
    paths = set(doc["paths"])
    assert {"/v1/policy/attempts", "/v1/policy/requests", "/v1/trusted/requests",
            "/v1/trusted/attempts/{attempt_id}"} <= paths


def test_unknown_task_class_is_a_clear_400(service: Service) -> None:
    with service.policy() as policy, pytest.raises(ServiceError) as refused:
        policy.submit("no_such_class", b"x")
    assert refused.value.status == 400
    assert "no_such_class" in str(refused.value)
