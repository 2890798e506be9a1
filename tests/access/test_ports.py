"""The policy and trusted ports (spec 9.2, 9.3, 8.12, 4.1, 8.8, 11.14; issue 6).

The explicit write-permission tests of spec 11.14: the policy cannot change its verified value,
its verification status, its attempt log, the control set, its choice of evaluator or its final
signal, and cannot read another policy's attempt.  Then what the policy sees (4.1: no control
cases, expected answers or schedule) and how trusted components authenticate (9.3, 9.15).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.access import (
    AccessDenied,
    Action,
    PolicyPort,
    Principal,
    Resource,
    Role,
    TrustedPort,
    request_message,
    sign_request,
)
from triz_ri_smart_ai_evaluator.errors import EvaluatorError, InputError
from triz_ri_smart_ai_evaluator.ledger.events import EventKind
from triz_ri_smart_ai_evaluator.provenance import ComponentKey, is_valid_signature

from .conftest import CLASS, CONTROL, World, register_source
from .payloads import b64


def violations(world: World, start: int) -> list[dict[str, Any]]:
    return [e["data"] for e in world.events(start) if e["kind"] == EventKind.ACCESS_VIOLATION]


def refused_and_logged(world: World, port: PolicyPort | TrustedPort, resource: str,
                       action: str, payload: dict[str, Any]) -> dict[str, Any]:
    before = world.store.size()
    with pytest.raises(AccessDenied):
        port.request(resource, action, payload)
    logged = violations(world, before + 1)
    assert len(logged) == 1
    assert world.store.size() == before + 1
    return logged[0]


# -- spec 11.14: what the policy can never do, whatever it calls -------------------------------
@pytest.mark.parametrize(
    ("resource", "action", "payload"),
    [
        pytest.param("raw_measurements", "change", {"value": "1"}, id="change-verified-value"),
        pytest.param("raw_measurements", "append",
                     {"inputs": {"measurements": {"steps": {"value": "1", "source": "x"}}}},
                     id="write-verified-value"),
        pytest.param("verifier_decisions", "append", {"decision": {"verdict": "verified"}},
                     id="create-status-verified"),
        pytest.param("verifier_decisions", "change", {"verdict": "verified"},
                     id="change-verification-status"),
        pytest.param("attempts", "delete", {}, id="delete-attempt"),
        pytest.param("attempts", "change", {"status": "completed"}, id="change-attempt-log"),
        pytest.param("attempts", "append", {"outcome": "cancelled"}, id="append-attempt-log"),
        pytest.param("ledger", "delete", {"seq": 1}, id="delete-error-from-log"),
        pytest.param("control_sets", "read", {"class_id": CLASS}, id="read-control-set"),
        pytest.param("control_sets", "change", {"class_id": CLASS}, id="change-control-set"),
        pytest.param("check_schedule", "read", {}, id="see-schedule"),
        pytest.param("check_schedule", "append", {"verifiers": ["lenient"]},
                     id="choose-evaluator"),
        pytest.param("awards_and_signals", "change", {"final": "100"}, id="change-final-signal"),
        pytest.param("awards_and_signals", "append", {"inputs": {}}, id="create-signal"),
        pytest.param("indicators", "change", {}, id="change-indicator"),
        pytest.param("rules_and_benchmarks", "append", {"task_class": {}},
                     id="change-benchmark-or-formula"),
        pytest.param("quarantine", "append", {"status": "clear"}, id="lift-own-quarantine"),
    ],
)
def test_policy_cannot(world: World, resource: str, action: str,
                       payload: dict[str, Any]) -> None:
    logged = refused_and_logged(world, world.policy(), resource, action,
                                {"attempt_id": world.attempt, **payload})
    assert logged["principal"] == "policy-a"
    assert logged["target"] == world.attempt
    assert world.policy().attempt_status(world.attempt)["status"] == "initiated"


def test_policy_cannot_read_another_policys_attempt(world: World) -> None:
    other = world.policy("policy-b")
    logged = refused_and_logged(world, other, "attempts", "read", {"attempt_id": world.attempt})
    assert "only its own" in logged["reason"]
    assert logged["principal"] == "policy-b"


def test_unknown_attempt_is_refused_like_anothers(world: World) -> None:
    with pytest.raises(AccessDenied) as theirs:
        world.policy("policy-b").attempt_status(world.attempt)
    with pytest.raises(AccessDenied) as missing:
        world.policy("policy-b").attempt_status("att-does-not-exist")
    assert (theirs.value.message.split(" [logged")[0]
            == missing.value.message.split(" [logged")[0])


def test_claiming_verified_does_not_make_it_verified(world: World) -> None:
    """spec 8.8, 6.8: the submission's claims ("done", "verified") are claims, never evidence."""
    record = world.trusted(Role.AUDITOR).read_attempt(world.attempt)["record"]
    assert record["verifier_decisions"] == []
    kinds = [e.kind for e in world.attempt_events()]
    assert kinds == ["attempt.initiated", "evidence.stored", "policy.output", "policy.output",
                     "policy.output"]
    outputs = [e.data for e in world.attempt_events() if e.kind == "policy.output"]
    assert [(o["what"], o["index"]) for o in outputs] == [("claim", 0), ("claim", 1),
                                                          ("diagnostic", 0)]
    evidence = [e.data for e in world.attempt_events() if e.kind == "evidence.stored"]
    assert [d["what"] for d in evidence] == ["artefact"]


def test_submission_initiates_first_with_the_artefact_hash(world: World) -> None:
    import hashlib

    first = world.attempt_events()[0]
    assert first.kind == EventKind.ATTEMPT_INITIATED
    assert first.data["artefact_sha256"] == hashlib.sha256(b"the policy's artefact").hexdigest()
    assert world.store.get_evidence(first.data["artefact_sha256"]) == b"the policy's artefact"


def test_submission_cannot_name_a_verifier_or_score(world: World) -> None:
    before = world.store.size()
    with pytest.raises(InputError, match="unknown submission fields"):
        world.policy().request("submissions", "append", {
            "class_id": CLASS, "artefact_b64": b64(b"x"), "verifier": "lenient", "score": 1})
    assert world.store.size() == before


def test_attempt_ids_are_drawn_by_the_port(world: World) -> None:
    ids = {world.policy().submit(CLASS, b"same artefact") for _ in range(3)}
    assert len(ids) == 3


# -- what the policy sees (spec 4.1, 2.13, 9.6) ------------------------------------------------
def _evaluated(world: World) -> None:
    harness = world.trusted(Role.HARNESS)
    payload = world.payload(Role.HARNESS, Resource.AWARDS_AND_SIGNALS, Action.APPEND)
    harness.request("awards_and_signals", "append", payload)
    verifier = world.trusted(Role.VERIFIER)
    verifier.request("verifier_decisions", "append",
                     world.payload(Role.VERIFIER, Resource.VERIFIER_DECISIONS, Action.APPEND))


def test_policy_status_is_sanitised(world: World) -> None:
    _evaluated(world)
    status = world.policy().attempt_status(world.attempt)
    assert set(status) == {"attempt_id", "task_class", "rules_version", "artefact_sha256",
                           "started_at", "status", "final_signal"}
    assert status["status"] == "completed"
    text = json.dumps(status)
    assignment = world.trusted(Role.HARNESS).read_schedule(world.attempt)
    for secret in ("SECRET-EXPECTED-ANSWER", "hidden-case", assignment["control_draw"],
                   "verifier-1", "control", "measurement"):
        assert secret not in text


def test_public_task_holds_no_hidden_part(world: World) -> None:
    view = world.policy().public_task(CLASS)
    text = json.dumps(view)
    assert "SECRET-EXPECTED-ANSWER" not in text
    tc = world.catalogue.get(CLASS)
    for source in tc.sources:
        assert source.authentication not in text
        assert source.independence not in text
    for threat in tc.threat_model:
        assert threat.protection not in text
    for item in tc.checklist:
        assert item.verification.procedure not in text
    assert {"sources", "threat_model", "control_sets", "schedule"}.isdisjoint(view)
    assert [i["id"] for i in view["indicators"]] == [i.id for i in tc.indicators]
    assert set(view["benchmarks"]) == {b.indicator for b in tc.benchmarks}
    assert view["permitted_actions"] == ["append submissions (own)", "read attempts (own)",
                                         "read task_spec_public"]


def test_policy_sees_final_signal_only_once_awarded(world: World) -> None:
    assert world.policy().attempt_status(world.attempt)["final_signal"] is None
    _evaluated(world)
    # An unverified award (no measurements: spec 6.7, fail closed) is no final signal either.
    assert world.policy().attempt_status(world.attempt)["final_signal"] is None


def test_training_consumer_sees_only_final_verified(world: World) -> None:
    _evaluated(world)
    answer = world.trusted(Role.TRAINING_CONSUMER).request(
        "awards_and_signals", "read", {"attempt_id": world.attempt})
    assert set(answer) == {"attempt_id", "final", "credited", "verified", "rules_version",
                           "training_use"}
    assert answer["credited"] is None
    assert answer["final"] is None
    assert answer["verified"] is False
    owner = world.trusted(Role.OWNER).request("awards_and_signals", "read",
                                              {"attempt_id": world.attempt})
    assert owner["awards"]


def test_quarantined_attempt_gives_no_training_signal(world: World) -> None:
    world.trusted(Role.OWNER).request(
        "quarantine", "append",
        world.payload(Role.OWNER, Resource.QUARANTINE, Action.APPEND))
    answer = world.trusted(Role.AUDITOR).request("quarantine", "read",
                                                 {"attempt_id": world.attempt})
    assert answer["quarantine"] == "quarantined"


# -- trusted components authenticate (spec 9.3, 9.15) ------------------------------------------
def test_signed_append_records_signature_that_reverifies(world: World) -> None:
    verifier = world.trusted(Role.VERIFIER)
    payload = world.payload(Role.VERIFIER, Resource.VERIFIER_DECISIONS, Action.APPEND)
    verifier.request("verifier_decisions", "append", payload)
    events = world.attempt_events()
    signed = next(e.data for e in events if e.data.get("what") == "signed_request")
    decision = next(e.data for e in events if e.kind == EventKind.VERIFIER_DECISION)
    assert decision["signature"] == signed["signature"] == payload["signature"]
    assert decision["verifier"] == "verifier-1"
    message = world.store.get_evidence(signed["digest"])
    source = world.register.state.current_source("verifier-1")
    assert source is not None
    assert source.authentication.key_id == signed["key_id"]
    assert is_valid_signature(source.authentication, message, signed["signature"])
    assert message == request_message(verifier.principal, "verifier_decisions", "append",
                                      payload)


@pytest.mark.parametrize("how", ["missing", "garbage", "other-key", "other-resource",
                                 "tampered-payload"])
def test_bad_signature_is_refused_and_logged(world: World, how: str) -> None:
    principal = world.principal(Role.VERIFIER)
    body = {"attempt_id": world.attempt, "decision": {"verdict": "verified"}}
    if how == "missing":
        payload = body
    elif how == "garbage":
        payload = {**body, "signature": "AAAA"}
    elif how == "other-key":
        payload = sign_request(ComponentKey.generate(), principal, "verifier_decisions",
                               "append", body)
    elif how == "other-resource":
        signed = sign_request(world.keys["verifier-1"], principal, "evidence", "append", body)
        payload = {**body, "signature": signed["signature"]}
    else:
        payload = world.signed(Role.VERIFIER, Resource.VERIFIER_DECISIONS, Action.APPEND, body)
        payload = {**payload, "decision": {"verdict": "rejected"}}
    logged = refused_and_logged(world, world.trusted(Role.VERIFIER), "verifier_decisions",
                                "append", payload)
    assert "signature" in logged["reason"]


def test_unregistered_or_quarantined_component_is_refused(world: World) -> None:
    ghost = world.trusted(Role.VERIFIER, "verifier-ghost")
    key = ComponentKey.generate()
    body = {"attempt_id": world.attempt, "decision": {"verdict": "verified"}}
    payload = sign_request(key, ghost.principal, "verifier_decisions", "append", body)
    logged = refused_and_logged(world, ghost, "verifier_decisions", "append", payload)
    assert "no source" in logged["reason"]
    register_source(world.register, "verifier-q", key, quarantined=True)
    held = world.trusted(Role.VERIFIER, "verifier-q")
    payload = sign_request(key, held.principal, "verifier_decisions", "append", body)
    logged = refused_and_logged(world, held, "verifier_decisions", "append", payload)
    assert "quarantine" in logged["reason"]


def test_confirmation_source_confirms_only_as_itself(world: World) -> None:
    key = world.keys["verifier-1"]  # a registered key, but not the caller's own source
    from datetime import UTC, datetime

    from triz_ri_smart_ai_evaluator.ledger.events import utc_stamp
    from triz_ri_smart_ai_evaluator.provenance import sign_confirmation

    c = sign_confirmation(key, source="verifier-1", attempt=world.attempt,
                          content="The operator confirmed it.", issued_at=datetime.now(UTC))
    body = {"confirmation": {"source": c.source, "attempt": c.attempt, "content": c.content,
                             "issued_at": utc_stamp(c.issued_at), "signature": c.signature}}
    payload = world.signed(Role.CONFIRMATION_SOURCE, Resource.EVIDENCE, Action.APPEND, body)
    logged = refused_and_logged(world, world.trusted(Role.CONFIRMATION_SOURCE), "evidence",
                                "append", payload)
    assert "may not confirm as" in logged["reason"]


def test_harness_evaluates_under_pinned_rules_and_closes_attempt(world: World) -> None:
    harness = world.trusted(Role.HARNESS)
    payload = world.payload(Role.HARNESS, Resource.AWARDS_AND_SIGNALS, Action.APPEND)
    answer = harness.request("awards_and_signals", "append", payload)
    assert answer["award"]["rules_version"] == world.policy().attempt_status(
        world.attempt)["rules_version"]
    with pytest.raises(InputError, match="already has an outcome"):
        harness.request("awards_and_signals", "append",
                        world.payload(Role.HARNESS, Resource.AWARDS_AND_SIGNALS, Action.APPEND))


def test_trusted_reads_see_the_hidden_parts(world: World) -> None:
    assert world.trusted(Role.VERIFIER).read_control_set(CLASS)["content"] == CONTROL
    sub = world.trusted(Role.VERIFIER).request("submissions", "read",
                                               {"attempt_id": world.attempt})
    assert base64.b64decode(sub["artefact_b64"]) == b"the policy's artefact"
    assert sub["claims"] == ["done", "verified"]
    assert sub["diagnostics"] == ["I was unsure about step 2"]
    assert sub["submitted_by"] == "policy-a"


def test_control_set_content_stays_out_of_the_evidence_store(world: World) -> None:
    owner = world.trusted(Role.OWNER)
    owner.request("control_sets", "append",
                  world.payload(Role.OWNER, Resource.CONTROL_SETS, Action.APPEND))
    for digest in world.store.evidence_digests():
        assert b"rotated" not in world.store.get_evidence(digest)


# -- the door itself ---------------------------------------------------------------------------
def test_ports_refuse_the_wrong_role(world: World) -> None:
    with pytest.raises(InputError):
        PolicyPort(world.guard, world.principal(Role.AUDITOR), catalogue=world.catalogue)
    with pytest.raises(InputError):
        world.trusted(Role.EVALUATED_POLICY)


@pytest.mark.parametrize(("resource", "action"), [("secrets", "read"), ("ledger", "write"),
                                                  ("", "")])
def test_unknown_names_are_malformed_not_violations(world: World, resource: str,
                                                    action: str) -> None:
    before = world.store.size()
    with pytest.raises(InputError):
        world.policy().request(resource, action, {})
    assert world.store.size() == before


def test_hostile_target_text_is_still_logged(world: World) -> None:
    evil = "\ud800" + "x" * 5000
    logged = refused_and_logged(world, world.policy("policy-b"), "attempts", "read",
                                {"attempt_id": evil})
    assert len(logged["target"]) <= 200


def test_principal_validates() -> None:
    with pytest.raises(InputError):
        Principal("has space", Role.AUDITOR)
    with pytest.raises(InputError, match="unknown role"):
        Principal("x", "superuser")  # type: ignore[arg-type]
    assert Principal("x", "auditor").role is Role.AUDITOR  # type: ignore[arg-type]


def test_access_denied_is_an_evaluator_error_with_its_exit_code(world: World) -> None:
    with pytest.raises(EvaluatorError) as refused:
        world.policy().request("ledger", "read", {})
    assert isinstance(refused.value, AccessDenied)
    assert refused.value.exit_code == 5
