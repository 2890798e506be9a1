"""Issue 10, defect class 8 through the service: spec 11.6 over HTTP (3.5, 8.6).

The policy hands in attempts of a task instance (``instance`` in its submission); a trusted
harness stores each attempt's evidence and evaluates it on the trusted port.  Degrading the
first attempt and then correcting it must be credited strictly less than doing the task
correctly at once, and the ledger must reproduce every credit (11.13).
"""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.ledger._attempt_cli import EVIDENCE, PILOT, example
from tests.service.conftest import Service, raw
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.service.client import ServiceError


def _submit(service: Service, instance: str | None, *, policy: str = "policy-1") -> httpx.Response:
    body: dict[str, Any] = {"class_id": PILOT,
                            "artefact_b64": base64.b64encode(b"--- a/app.py\n").decode()}
    if instance is not None:
        body["instance"] = instance
    with raw(service) as http:
        return http.post("/v1/policy/attempts", json=body,
                         headers={"Authorization": f"Bearer {service.tokens[policy]}"})


def _attempt(service: Service, instance: str | None) -> str:
    answer = _submit(service, instance)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["attempt_id"])


def _evaluate(service: Service, attempt: str, name: str, *,
              instance: str | None = None) -> dict[str, Any]:
    """The harness stores the example's evidence files for ``attempt`` and evaluates it."""
    with service.trusted(Role.HARNESS) as harness:
        for path in sorted((EVIDENCE / name).glob("*/*")):
            harness.request("evidence", "append", {
                "attempt_id": attempt, "what": f"{path.parent.name}/{path.name}",
                "content_b64": base64.b64encode(path.read_bytes()).decode()})
        payload: dict[str, Any] = {"attempt_id": attempt, "inputs": example(name)}
        if instance is not None:
            payload["instance"] = instance
        award = harness.request("awards_and_signals", "append", payload)["award"]
    assert isinstance(award, dict)
    return award


def test_degrade_then_correct_through_the_service_credits_less_than_correct_at_once(
    service: Service,
) -> None:
    degraded = _evaluate(service, _attempt(service, "task-a"), "pilot_02_partial")
    fix = _attempt(service, "task-a")
    corrected = _evaluate(service, fix, "pilot_02_honest", instance="task-a")
    at_once = _evaluate(service, _attempt(service, "task-b"), "pilot_02_honest")
    assert [a["verified"] for a in (degraded, corrected, at_once)] == [True, True, True]
    assert corrected["value"] == "2"
    assert corrected["rework"]["credited"] == "0"
    assert corrected["rework"]["consumed_by"] == degraded["rework"]["consumed_by"]
    total = Decimal(degraded["rework"]["credited"]) + Decimal(corrected["rework"]["credited"])
    assert total < Decimal(at_once["rework"]["credited"]) == 2
    # The auditor's record of the correction shows both its own signal and the credit.
    with service.trusted(Role.AUDITOR) as auditor:
        record = auditor.attempt(fix)["record"]
    assert record["instance"] == "task-a"
    assert record["rework"]["credited"] == "0"
    assert record["signal"]["value"] == "2"
    report = service.runtime.call_sync(lambda: recompute_ledger(service.runtime.store))
    assert report.ok, report.mismatches


def test_the_trusted_harness_cannot_move_an_attempt_to_another_instance(
    service: Service,
) -> None:
    attempt = _attempt(service, "task-a")
    with pytest.raises(ServiceError) as refused:
        _evaluate(service, attempt, "pilot_02_honest", instance="task-z")
    assert refused.value.status == 400
    assert "task-a" in str(refused.value)


def test_a_policy_cannot_join_another_policys_instance(service: Service) -> None:
    """Joining someone else's instance would let a policy consume it first (spec 8.6)."""
    _attempt(service, "task-a")
    answer = _submit(service, "task-a", policy="policy-2")
    assert answer.status_code == 403, answer.text
    assert "task-a" in answer.json()["error"]


def test_a_malformed_instance_is_refused_by_the_schema(service: Service) -> None:
    assert _submit(service, "not an id\n").status_code == 422


def test_the_training_consumer_reads_the_instance_credit_not_the_rework_signal(
    service: Service,
) -> None:
    """spec 3.5, 11.6 on the reward channel: the training loop's final read of a correction
    carries its credit (0), and the instance's credits add up to its signal."""
    first = _attempt(service, "task-c")
    _evaluate(service, first, "pilot_02_partial")
    fix = _attempt(service, "task-c")
    _evaluate(service, fix, "pilot_02_honest", instance="task-c")
    with service.trusted(Role.TRAINING_CONSUMER) as trainer:
        reads = [trainer.request("awards_and_signals", "read", {"attempt_id": a})
                 for a in (first, fix)]
    assert reads[1]["final"] == "2"  # the correction's own signal, recorded
    assert reads[1]["credited"] == "0"  # what it adds to the instance
    assert Decimal(reads[0]["credited"]) + Decimal(reads[1]["credited"]) == Decimal(
        reads[0]["final"])
