"""The access matrix through the HTTP API (spec 11.14; issue 6), generated from the matrix file.

One test per role x resource x action of ``catalogue/access/matrix.yaml``, each over real HTTP
to a real service with the role's own credential (a bearer token for the policy, signed
requests for trusted components): an allowed cell answers 200 and logs no violation; a
forbidden one answers 403 with the ledger position of exactly one logged ``access.violation``,
and nothing else is appended.  Adding a row to the file adds its tests.

The service is started once for the module (each test submits its own attempt and compares
the ledger before and after its own request), so the whole matrix runs in seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.access.payloads import cell_payload
from tests.service.conftest import Service, start_service
from triz_ri_smart_ai_evaluator.access import Action, Resource, Role, load_matrix
from triz_ri_smart_ai_evaluator.ledger.events import utc_stamp
from triz_ri_smart_ai_evaluator.provenance import sign_confirmation
from triz_ri_smart_ai_evaluator.rules import load_catalogue
from triz_ri_smart_ai_evaluator.service.client import PolicyClient, ServiceError, TrustedClient
from triz_ri_smart_ai_evaluator.service.config import DEFAULT_TRUSTED

CLASS = "document_step_faithfulness"
MATRIX = load_matrix()
CELLS = list(MATRIX.cells())
PRINCIPAL = {role: pid for pid, role in DEFAULT_TRUSTED}
PRINCIPAL[Role.EVALUATED_POLICY] = "policy-1"


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    folder: Path = tmp_path_factory.mktemp("matrix") / "svc"
    yield from start_service(folder, edit={
        "control_sets": {CLASS: {"cases": [{"id": "hidden-1", "expected": "SECRET-ANSWER"}]}}})


@pytest.fixture
def attempt(svc: Service) -> str:
    """A fresh attempt per cell: an allowed append (a cancellation, an evaluation) may end it."""
    return svc.policy().submit(CLASS, b"the policy's artefact", claims=["done"],
                               diagnostics=["unsure about step 2"])


def client(svc: Service, role: Role) -> PolicyClient | TrustedClient:
    return svc.policy() if role is Role.EVALUATED_POLICY else svc.trusted(role)


def payload(svc: Service, role: Role, resource: Resource, action: Action,
            attempt: str) -> dict[str, Any]:
    def confirmation() -> dict[str, Any]:
        source = PRINCIPAL[role]
        c = sign_confirmation(svc.keys[source], source=source, attempt=attempt,
                              content="The operator confirmed every step of the document.",
                              issued_at=datetime.now(UTC))
        return {"source": c.source, "attempt": c.attempt, "content": c.content,
                "issued_at": utc_stamp(c.issued_at), "signature": c.signature}

    return cell_payload(role, resource, action, attempt=attempt, class_id=CLASS,
                        task_class=lambda: load_catalogue()[CLASS].model_dump(mode="json"),
                        confirmation=confirmation)


def ids(ok: bool) -> list[Any]:
    return [pytest.param(r, s, a, id=f"{r.value}-{s.value}-{a.value}")
            for r, s, a, allowed in CELLS if allowed is ok]


@pytest.mark.parametrize(("role", "resource", "action"), ids(True))
def test_allowed_cell_answers_200(svc: Service, attempt: str, role: Role, resource: Resource,
                                  action: Action) -> None:
    before = svc.size()
    with client(svc, role) as c:
        answer = c.request(resource.value, action.value,
                           payload(svc, role, resource, action, attempt))
    assert isinstance(answer, dict)
    new = svc.events(before + 1)
    assert all(e["kind"] != "access.violation" for e in new)
    if action is Action.READ:
        assert new == [], "a read writes nothing"
    else:
        assert new, "an append leaves its record"


@pytest.mark.parametrize(("role", "resource", "action"), ids(False))
def test_forbidden_cell_answers_403_and_is_logged(svc: Service, attempt: str, role: Role,
                                                  resource: Resource, action: Action) -> None:
    before = svc.size()
    with client(svc, role) as c, pytest.raises(ServiceError) as refused:
        c.request(resource.value, action.value, payload(svc, role, resource, action, attempt))
    assert refused.value.status == 403
    new = svc.events(before + 1)
    assert [e["kind"] for e in new] == ["access.violation"]
    data = new[0]["data"]
    assert (data["principal"], data["role"], data["resource"], data["action"]) == (
        PRINCIPAL[role], role.value, resource.value, action.value)
    assert data["matrix_version"] == MATRIX.version
    assert f"event {new[0]['seq']}" in str(refused.value)


def test_every_cell_has_a_test() -> None:
    roles = {r for r, _, _, _ in CELLS}
    resources = {s for _, s, _, _ in CELLS}
    assert roles == set(Role)
    assert resources == set(Resource)
    assert len(CELLS) == len(Role) * len(Resource) * len(Action)
