"""Request models per (resource, action) at the ports' one door (issue 14 item 4).

The matrix decides first, whatever the payload (spec 11.14); then the payload is read into its
cell's model: an unknown, missing or mistyped field is an InputError naming the cell and the
field, and nothing is written.
"""

from __future__ import annotations

from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.access import AccessDenied, Action, Resource, Role
from triz_ri_smart_ai_evaluator.access.requests import REQUESTS, request_model
from triz_ri_smart_ai_evaluator.errors import InputError

from .conftest import World


def test_every_cell_the_trusted_port_serves_has_a_request_model(world: World) -> None:
    handlers = world.trusted(Role.OWNER)._handlers
    assert set(handlers) <= set(REQUESTS)


@pytest.mark.parametrize(("role", "resource", "action", "change", "field"), [
    (Role.AUDITOR, Resource.ATTEMPTS, Action.READ, {"attempt_id": 7}, "attempt_id"),
    (Role.AUDITOR, Resource.LEDGER, Action.READ, {"start": True}, "start"),
    (Role.AUDITOR, Resource.LEDGER, Action.READ, {"limit": 1001}, "limit"),
    (Role.AUDITOR, Resource.EVIDENCE, Action.READ, {"verbose": True}, "verbose"),
    (Role.HARNESS, Resource.ATTEMPTS, Action.APPEND, {"outcome": "won"}, "outcome"),
    (Role.HARNESS, Resource.ATTEMPTS, Action.APPEND, {"reason": None}, "reason"),
    (Role.HARNESS, Resource.AWARDS_AND_SIGNALS, Action.APPEND, {"instance": 3}, "instance"),
    (Role.VERIFIER, Resource.VERIFIER_DECISIONS, Action.APPEND, {"decision": "ok"}, "decision"),
    (Role.OWNER, Resource.QUARANTINE, Action.APPEND, {"status": "maybe"}, "status"),
    (Role.OWNER, Resource.CONTROL_SETS, Action.APPEND, {"content": [1]}, "content"),
    (Role.OWNER, Resource.CHECK_SCHEDULE, Action.APPEND, {"verifiers": []}, "verifiers"),
])
def test_a_payload_that_does_not_fit_names_the_cell_and_field_and_writes_nothing(
    world: World, role: Role, resource: Resource, action: Action, change: dict[str, Any],
    field: str,
) -> None:
    body = {**world.payload(role, resource, action), **change}
    if action is Action.APPEND:
        body = world.signed(role, resource, action, body)
    before = world.store.size()
    with pytest.raises(InputError, match=rf"{resource.value}/{action.value} request field "
                                         rf"'{field}'"):
        world.trusted(role).request(resource, action, body)
    # a signed append stores its request bytes as evidence; no event is appended
    assert world.store.size() == before


def test_the_matrix_refuses_a_forbidden_cell_before_the_payload_is_read(world: World) -> None:
    before = world.store.size()
    with pytest.raises(AccessDenied):
        world.trusted(Role.AUDITOR).request(Resource.QUARANTINE, Action.APPEND,
                                            {"status": "maybe", "junk": [1]})
    assert [e["kind"] for e in world.events(before + 1)] == ["access.violation"]


def test_the_policy_door_reads_its_three_cells_into_models(world: World) -> None:
    policy = world.policy()
    with pytest.raises(InputError, match=r"task_spec_public/read request field 'class_id'"):
        policy.request("task_spec_public", "read", {"class_id": 5})
    with pytest.raises(InputError, match=r"attempts/read request field 'extra'"):
        policy.request("attempts", "read", {"attempt_id": world.attempt, "extra": 1})
    with pytest.raises(InputError, match="unknown submission fields"):
        policy.request("submissions", "append", {"class_id": "x", "verifier": "me"})


def test_an_evidence_append_with_a_confirmation_is_read_as_a_confirmation() -> None:
    assert request_model(Resource.EVIDENCE, Action.APPEND, {"confirmation": {}}).__name__ == (
        "ConfirmationAppend")
    assert request_model(Resource.EVIDENCE, Action.APPEND, {}).__name__ == "EvidenceAppend"
