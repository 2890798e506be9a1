"""Matrix tests generated from the matrix file itself (spec 11.14, output 12.8; issue 6).

One test per role x resource x action read from ``catalogue/access/matrix.yaml``: adding a role,
a resource or a grant to the file adds or changes its tests.  An allowed cell succeeds through the
generic port entry (the one the HTTP layer routes every endpoint through) with a JSON answer and
no violation; a forbidden cell raises AccessDenied and leaves exactly one ``access.violation``
event with the principal, role, resource, action, matrix version and reason, and nothing else.
"""

from __future__ import annotations

import pytest

from triz_ri_smart_ai_evaluator.access import AccessDenied, Action, Resource, Role, load_matrix
from triz_ri_smart_ai_evaluator.ledger.events import EventKind

from .conftest import IDS, World, is_json

MATRIX = load_matrix()
CELLS = list(MATRIX.cells())


@pytest.mark.parametrize(
    ("role", "resource", "action"),
    [pytest.param(r, s, a, id=f"{r.value}-{s.value}-{a.value}") for r, s, a, ok in CELLS if ok],
)
def test_allowed_cell_succeeds(world: World, role: Role, resource: Resource,
                               action: Action) -> None:
    before = world.store.size()
    answer = world.port(role).request(resource.value, action.value,
                                      world.payload(role, resource, action))
    assert isinstance(answer, dict)
    assert is_json(answer)
    new = world.events(before + 1)
    assert all(e["kind"] != EventKind.ACCESS_VIOLATION.value for e in new)
    if action is Action.READ:
        assert new == [], "a read writes nothing"
    else:
        assert new, "an append leaves its record"


@pytest.mark.parametrize(
    ("role", "resource", "action"),
    [pytest.param(r, s, a, id=f"{r.value}-{s.value}-{a.value}")
     for r, s, a, ok in CELLS if not ok],
)
def test_forbidden_cell_is_refused_and_logged(world: World, role: Role, resource: Resource,
                                              action: Action) -> None:
    before = world.store.size()
    with pytest.raises(AccessDenied) as refused:
        world.port(role).request(resource.value, action.value,
                                 world.payload(role, resource, action))
    new = world.events(before + 1)
    assert len(new) == 1, "exactly one event: the violation, nothing else"
    event = new[0]
    assert event["kind"] == EventKind.ACCESS_VIOLATION.value
    assert refused.value.violation == event["seq"]
    data = event["data"]
    assert data["principal"] == IDS[role]
    assert data["role"] == role.value
    assert data["resource"] == resource.value
    assert data["action"] == action.value
    assert data["matrix_version"] == MATRIX.version
    assert "does not grant" in data["reason"]


def test_every_cell_is_generated() -> None:
    assert len(CELLS) == len(Role) * len(Resource) * len(Action)
