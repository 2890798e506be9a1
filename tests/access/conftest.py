"""Shared fixtures of the access tests (spec 9.2, 9.3, 11.14).

Every test runs against a real SQLite ledger in ``tmp_path`` with a provenance register holding
one Ed25519-keyed source per trusted principal, the bundled catalogue and matrix, and one attempt
already submitted by ``policy-a`` through the policy port.  ``World.payload`` builds a valid
payload for any (role, resource, action), signed when it is a trusted append, so the generated
tests can drive every cell of the matrix through the one door.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.access import (
    AccessGuard,
    Action,
    Catalogue,
    CheckSchedule,
    MemoryControlSets,
    PolicyPort,
    Principal,
    Resource,
    Role,
    ScheduleBook,
    TrustedPort,
    load_matrix,
    sign_request,
)
from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.ledger.events import Event, parse_body, utc_stamp
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.provenance import (
    ComponentKey,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    SourceRecord,
    sign_confirmation,
)
from triz_ri_smart_ai_evaluator.rules import load_catalogue

from .payloads import cell_payload

CLASS = "document_step_faithfulness"
CONTROL = {"cases": [{"id": "hidden-case-1", "expected": "SECRET-EXPECTED-ANSWER"}]}

#: The principal id of each role in the world.
IDS = {
    Role.EVALUATED_POLICY: "policy-a",
    Role.VERIFIER: "verifier-1",
    Role.HARNESS: "harness-1",
    Role.CONFIRMATION_SOURCE: "confirm-1",
    Role.AUDITOR: "auditor-1",
    Role.OWNER: "owner-1",
    Role.TRAINING_CONSUMER: "trainer-1",
}


@dataclass
class World:
    store: SqliteStore
    guard: AccessGuard
    register: ProvenanceRegister
    catalogue: Catalogue
    control_sets: MemoryControlSets
    schedule: ScheduleBook
    keys: dict[str, ComponentKey] = field(default_factory=dict)
    attempt: str = ""

    def principal(self, role: Role, principal_id: str | None = None) -> Principal:
        # The training consumer trains policy-a, the policy that submits the world's attempt.
        runs = frozenset({"policy-a"}) if role is Role.TRAINING_CONSUMER else frozenset()
        return Principal(principal_id or IDS[role], role, runs)

    def policy(self, principal_id: str = "policy-a") -> PolicyPort:
        return PolicyPort(self.guard, Principal(principal_id, Role.EVALUATED_POLICY),
                          catalogue=self.catalogue)

    def trusted(self, role: Role, principal_id: str | None = None) -> TrustedPort:
        return TrustedPort(self.guard, self.principal(role, principal_id),
                           register=self.register, catalogue=self.catalogue,
                           control_sets=self.control_sets, schedule=self.schedule)

    def port(self, role: Role) -> PolicyPort | TrustedPort:
        return self.policy() if role is Role.EVALUATED_POLICY else self.trusted(role)

    def events(self, start: int = 1) -> list[dict[str, Any]]:
        return [parse_body(body, seq=seq) for seq, body in self.store.scan(start)]

    def attempt_events(self, attempt: str | None = None) -> list[Event]:
        return self.store.attempt_events(attempt or self.attempt)

    def signed(self, role: Role, resource: Resource, action: Action,
               payload: dict[str, Any]) -> dict[str, Any]:
        key = self.keys[IDS[role]]
        return sign_request(key, self.principal(role), resource, action, payload)

    def payload(self, role: Role, resource: Resource, action: Action) -> dict[str, Any]:
        """A valid payload for this cell (signed for a trusted append)."""
        body = self._body(role, resource, action)
        if action is Action.APPEND and role is not Role.EVALUATED_POLICY:
            return self.signed(role, resource, action, body)
        return body

    def _body(self, role: Role, resource: Resource, action: Action) -> dict[str, Any]:
        return cell_payload(
            role, resource, action, attempt=self.attempt, class_id=CLASS,
            task_class=lambda: self.catalogue.get(CLASS).model_dump(mode="json"),
            confirmation=lambda: self.confirmation(IDS[role], self.attempt))

    def confirmation(self, source: str, attempt: str) -> dict[str, Any]:
        c = sign_confirmation(self.keys[source], source=source, attempt=attempt,
                              content="The operator confirmed every step of the document.",
                              issued_at=datetime.now(UTC))
        return {"source": c.source, "attempt": c.attempt, "content": c.content,
                "issued_at": utc_stamp(c.issued_at), "signature": c.signature}


def register_source(register: ProvenanceRegister, source_id: str, key: ComponentKey, *,
                    quarantined: bool = False) -> None:
    register.register_source(SourceRecord(
        id=source_id, party="test operator", created_at=datetime.now(UTC),
        origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
        independence="runs outside the policy's reach", policy_access=PolicyAccess.NONE,
        authentication=key.authentication, quarantined=quarantined,
        quarantine_reason="test" if quarantined else None))


_CATALOGUE = load_catalogue()
_MATRIX = load_matrix()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    store = SqliteStore.open(tmp_path / "ledger.db")
    register = ProvenanceRegister(store, actor="provenance-register")
    w = World(
        store=store,
        guard=AccessGuard(_MATRIX, store),
        register=register,
        catalogue=Catalogue(_CATALOGUE),
        control_sets=MemoryControlSets({CLASS: CONTROL}),
        schedule=ScheduleBook(CheckSchedule.create(["verifier-1", "verifier-2"])),
    )
    for role, principal_id in IDS.items():
        if role is not Role.EVALUATED_POLICY:
            key = ComponentKey.generate()
            w.keys[principal_id] = key
            register_source(register, principal_id, key)
    w.attempt = w.policy().submit(CLASS, b"the policy's artefact", ["done", "verified"],
                                  ["I was unsure about step 2"])
    yield w
    store.close()


def is_json(value: object) -> bool:
    canonical_json(value)
    return True
