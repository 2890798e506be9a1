"""The owner's control of the loop through the trusted port, over real HTTP (spec 9.19; issue 15
item 7): pause training use, roll back to an earlier rules version, shut a class down and bring
it back, each with the owner's signed request; nobody else may, and the evaluated policy can
neither change nor read the mode.

Awards come from signal inputs (``examples/signal``) evaluated by the trusted harness.  The
bundled pilot 02 rules keep the class in shadow (pilot 10), so :func:`serve_training_rules`
first publishes, through the owner's port, the rules in force in training mode: then a pause
has something to withhold.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.ledger._attempt_cli import PILOT
from tests.service.conftest import Service, raw
from tests.service.test_rework_service import _attempt, _evaluate
from triz_ri_smart_ai_evaluator.access import Catalogue, Role
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.rules.formula import Mode
from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue
from triz_ri_smart_ai_evaluator.rules.published import BUNDLED_STORE, RulesStore
from triz_ri_smart_ai_evaluator.rules.versions import canonical_rules
from triz_ri_smart_ai_evaluator.service.client import ServiceError, TrustedClient
from triz_ri_smart_ai_evaluator.service.runtime import Runtime


def serve_training_rules(runtime: Runtime, owner: TrustedClient, *, delay: float = 1.5
                         ) -> tuple[str, str]:
    """Publish, through the owner's port, pilot 02's rules in force now in training mode,
    taking effect ``delay`` seconds from now, and wait until they do; return (the version in
    force before, the training version).

    The service serves the catalogue file, whose pilot 02 version may be one published ahead
    of its ``effective_from`` (catalogue/published/.../history.jsonl); spec 10.5 lets a new
    version take effect only after it, so the service here serves the version in force now,
    read from the same published store."""
    in_force, tc = RulesStore(BUNDLED_STORE).in_force(PILOT, datetime.now(UTC))
    runtime.catalogue = Catalogue({**load_catalogue(), PILOT: tc})
    starts = datetime.now(UTC) + timedelta(seconds=delay)
    training = tc.model_copy(update={
        "formula": tc.formula.model_copy(update={"mode": Mode.TRAINING}),
        "effective_from": starts})
    answer = owner.request("rules_and_benchmarks", "append",
                           {"task_class": json.loads(canonical_rules(training))})
    time.sleep(max(0.0, (starts - datetime.now(UTC)).total_seconds()) + 0.1)
    return in_force, str(answer["rules_version"])


def _in_force(owner: TrustedClient) -> str:
    return str(owner.request("loop_mode", "read", {"class_id": PILOT})["in_force"])


def _loop(owner: TrustedClient, **payload: Any) -> dict[str, Any]:
    return owner.request("loop_mode", "append", {"class_id": PILOT, **payload})


def _included(service: Service, attempt: str) -> dict[str, Any]:
    found = [e["data"] for e in service.events() if e["attempt"] == attempt
             and e["kind"] == "training.included"]
    assert len(found) == 1
    return found[0]


def _kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in events]


def test_owner_pauses_training_use_and_the_next_award_is_withheld(service: Service) -> None:
    with service.trusted(Role.OWNER) as owner:
        serve_training_rules(service.runtime, owner)
        assert _included(service, _evaluated(service))["included"] is True
        before = service.size()
        answer = _loop(owner, mode="shadow", reason="pause: a suspected checker bug")
        changed = service.events(before + 1)
        assert _kinds(changed) == ["class.mode_changed", "evidence.stored"]
        data = changed[0]["data"]
        assert answer["seq"] == changed[0]["seq"]
        assert answer["mode"] == "shadow"
        assert (data["mode"], data["previous"], data["cause"]) == ("shadow", "training", "owner")
        assert data["by"] == "owner-1"
        assert data["key_id"]
        assert data["signature"]
        signed = changed[1]["data"]
        assert (signed["what"], signed["principal"], signed["resource"]) == (
            "signed_request", "owner-1", "loop_mode")
        assert signed["digest"] == data["request"]
        paused = _included(service, _evaluated(service))
        assert paused["included"] is False
        assert paused["class_mode"] == "shadow"
        assert "owner: pause: a suspected checker bug" in paused["withheld"]
        _loop(owner, mode="training", reason="checker fixed")
        assert _included(service, _evaluated(service))["included"] is True
        read = owner.request("loop_mode", "read", {"class_id": PILOT})
    assert [c["data"]["mode"] for c in read["changes"]] == ["shadow", "training"]
    assert read["state"]["mode"] == "training"
    report = service.runtime.call_sync(lambda: recompute_ledger(service.runtime.store))
    assert report.ok, report.mismatches


def _evaluated(service: Service) -> str:
    attempt = _attempt(service, None)
    _evaluate(service, attempt, "pilot_02_honest")
    return attempt


def test_owner_rolls_back_to_an_earlier_version_and_lifts_it(service: Service) -> None:
    with service.trusted(Role.OWNER) as owner:
        earlier, newer = serve_training_rules(service.runtime, owner)
        started_before = _attempt(service, None)
        answer = _loop(owner, rollback_to=earlier, reason="the new version misjudges")
        assert answer["rollback"] == earlier
        assert answer["mode"] == "training"
        change = [e for e in service.events() if e["kind"] == "class.mode_changed"][-1]["data"]
        assert (change["cause"], change["rules_version"], change["by"]) == (
            "rollback", earlier, "owner-1")
        rolled = _attempt(service, None)
        with service.policy() as policy:
            assert policy.status(rolled)["rules_version"] == earlier
            assert policy.public_task(PILOT)["rules_version"] == earlier
            # spec 10.5: an attempt that started before the rollback keeps its rules
            assert policy.status(started_before)["rules_version"] == newer
        assert _evaluate(service, rolled, "pilot_02_honest")["rules_version"] == earlier
        lifted = _loop(owner, rollback_to="in_force", reason="fixed version published")
        assert lifted["rollback"] is None
        with service.policy() as policy:
            assert policy.status(_attempt(service, None))["rules_version"] == newer
    # nothing was re-published or rewritten: each version's publication is in the ledger once
    published = [e["data"]["rules_version"] for e in service.events()
                 if e["kind"] == "rules.published"]
    assert sorted(published) == sorted({newer, earlier})


def test_owner_shuts_a_class_down_and_brings_it_back(service: Service) -> None:
    with service.trusted(Role.OWNER) as owner:
        opened = _attempt(service, None)
        _loop(owner, mode="shut_down", reason="shutdown for maintenance")
        during = _attempt(service, None)
        for attempt in (opened, during):
            with service.trusted(Role.HARNESS) as harness:
                answer = harness.request("awards_and_signals", "append",
                                         {"attempt_id": attempt, "inputs": {}})
            assert (answer["status"], answer["stage"]) == ("errored", "shut_down")
            ended = [e for e in service.events() if e["attempt"] == attempt
                     and e["kind"].startswith("attempt.") and e["kind"] != "attempt.initiated"]
            assert [e["kind"] for e in ended] == ["attempt.errored"]
            assert ended[0]["data"]["stage"] == "shut_down"
            assert ended[0]["data"]["by"] == "harness-1"
            assert not [e for e in service.events() if e["attempt"] == attempt
                        and e["kind"] == "award.decision"]
        _loop(owner, mode="training", reason="maintenance done")
    back = _attempt(service, None)
    award = _evaluate(service, back, "pilot_02_honest")
    assert award["outcome"]
    with service.policy() as policy:
        assert policy.status(back)["status"] == "completed"


@pytest.mark.parametrize("role", [Role.VERIFIER, Role.HARNESS, Role.CONFIRMATION_SOURCE,
                                  Role.AUDITOR, Role.TRAINING_CONSUMER])
def test_other_trusted_principals_cannot_change_the_mode(service: Service, role: Role) -> None:
    before = service.size()
    with service.trusted(role) as other, pytest.raises(ServiceError) as refused:
        _loop(other, mode="training", reason="keep my class training")
    assert refused.value.status == 403
    new = service.events(before + 1)
    assert _kinds(new) == ["access.violation"]
    assert (new[0]["data"]["resource"], new[0]["data"]["action"]) == ("loop_mode", "append")
    assert new[0]["data"]["role"] == role.value


def test_the_auditor_reads_the_mode_and_others_do_not(service: Service) -> None:
    with service.trusted(Role.AUDITOR) as auditor:
        assert auditor.request("loop_mode", "read", {"class_id": PILOT})["state"]["mode"] == \
            "training"
    with service.trusted(Role.HARNESS) as harness, pytest.raises(ServiceError) as refused:
        harness.request("loop_mode", "read", {"class_id": PILOT})
    assert refused.value.status == 403


@pytest.mark.parametrize("action", ["read", "append"])
def test_the_policy_token_can_neither_read_nor_change_the_mode(service: Service,
                                                               action: str) -> None:
    before = service.size()
    payload = {"class_id": PILOT, "mode": "training", "reason": "x"} if action == "append" \
        else {"class_id": PILOT}
    with raw(service) as http:
        answer = http.post("/v1/policy/requests", json={
            "resource": "loop_mode", "action": action, "payload": payload},
            headers={"Authorization": f"Bearer {service.tokens['policy-1']}"})
    assert answer.status_code == 403
    new = service.events(before + 1)
    assert _kinds(new) == ["access.violation"]
    assert new[0]["seq"] == answer.json()["violation"]
    assert (new[0]["data"]["principal"], new[0]["data"]["resource"]) == ("policy-1",
                                                                         "loop_mode")
    # and the policy token is no credential on the trusted port at all
    with raw(service) as http:
        trusted = http.post("/v1/trusted/requests", json={
            "resource": "loop_mode", "action": action, "payload": payload},
            headers={"Authorization": f"Bearer {service.tokens['policy-1']}"})
    assert trusted.status_code == 401


def test_the_policy_view_of_its_attempt_has_no_loop_field(service: Service) -> None:
    attempt = _attempt(service, None)
    with service.trusted(Role.OWNER) as owner:
        _loop(owner, mode="suspended", reason="pause", drill=True)
    with service.policy() as policy:
        view = policy.status(attempt)
    assert set(view) == {"attempt_id", "task_class", "rules_version", "artefact_sha256",
                         "started_at", "status", "final_signal"}
    assert "suspended" not in json.dumps(view)
    assert "drill" not in json.dumps(view)


BAD = [
    pytest.param({"mode": "shadow", "rollback_to": "0" * 64, "reason": "x"}, "exactly one",
                 id="mode-and-rollback"),
    pytest.param({"reason": "x"}, "exactly one", id="neither"),
    pytest.param({"mode": "paused", "reason": "x"}, "mode", id="unknown-mode"),
    pytest.param({"mode": "shadow", "reason": ""}, "reason", id="empty-reason"),
    pytest.param({"mode": "shadow", "reason": "   "}, "needs a reason", id="blank-reason"),
    pytest.param({"mode": "shadow", "reason": "x", "max_included": 3, "per_seconds": 60},
                 "pressure limit belongs", id="limit-on-shadow"),
    pytest.param({"mode": "shadow", "reason": "x", "colour": "red"}, "colour",
                 id="unknown-field"),
    pytest.param({"rollback_to": "abc", "reason": "x"}, "rollback_to", id="not-a-version"),
    pytest.param({"rollback_to": "0" * 64, "reason": "x"}, "never published",
                 id="unknown-version"),
    pytest.param({"rollback_to": "IN_FORCE", "reason": "x"}, "already in force",
                 id="version-in-force"),
    pytest.param({"rollback_to": "in_force", "reason": "x"}, "no rollback",
                 id="nothing-to-lift"),
    pytest.param({"class_id": "no_such_class", "mode": "shadow", "reason": "x"},
                 "unknown task class", id="unknown-class"),
    pytest.param({"report": {"drill": "pause", "changes": [1], "checks": {"a": True},
                             "passed": True}}, "not drill changes", id="report-stray-change"),
    pytest.param({"report": {"drill": "pause", "changes": [1], "checks": {"a": False},
                             "passed": True}}, "passed must be", id="report-inconsistent"),
]


@pytest.mark.parametrize(("payload", "message"), BAD)
def test_a_bad_request_is_400_and_changes_nothing(service: Service, payload: dict[str, Any],
                                                  message: str) -> None:
    with service.trusted(Role.OWNER) as owner:
        if payload.get("rollback_to") == "IN_FORCE":
            payload = {**payload, "rollback_to": _in_force(owner)}
        before = service.size()
        with pytest.raises(ServiceError) as refused:
            owner.request("loop_mode", "append", {"class_id": PILOT, **payload})
    assert refused.value.status == 400
    assert message in str(refused.value)
    # only the service's record of the refusal (docs/service.md "Limits"), no loop event
    assert set(_kinds(service.events(before + 1))) <= {"service.refusal"}
    with service.trusted(Role.OWNER) as owner:
        state = owner.request("loop_mode", "read", {"class_id": PILOT})
    assert state["changes"] == []
    assert state["drills"] == []


def test_a_request_outside_the_schema_is_422_and_changes_nothing(service: Service) -> None:
    before = service.size()
    with service.trusted(Role.OWNER) as owner:
        body = json.dumps({"resource": "loop_mode", "payload": {"class_id": PILOT}}).encode()
        with pytest.raises(ServiceError) as refused:
            owner._send("POST", "/v1/trusted/requests", body)
    assert refused.value.status == 422
    assert set(_kinds(service.events(before + 1))) <= {"service.refusal"}


def test_an_unsigned_change_is_refused_and_logged(service: Service) -> None:
    before = service.size()
    payload = {"class_id": PILOT, "mode": "shut_down", "reason": "x",
               "signature": base64.b64encode(b"\0" * 64).decode()}
    body = json.dumps({"resource": "loop_mode", "action": "append", "payload": payload})
    with service.trusted(Role.OWNER) as owner, pytest.raises(ServiceError) as refused:
        owner._send("POST", "/v1/trusted/requests", body.encode())
    assert refused.value.status == 403
    assert _kinds(service.events(before + 1)) == ["access.violation"]
    with httpx.Client(base_url=service.base_url, trust_env=False) as http:
        assert http.get("/v1/health").status_code == 200
