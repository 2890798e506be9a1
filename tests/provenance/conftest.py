"""Shared fixtures for the provenance tests (spec 9.15, 11.21).

Every test runs against a real SQLite ledger in ``tmp_path`` and a controllable clock, so what
is asserted is what the ledger records, not what an in-memory object believes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent, utc_stamp
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.provenance import (
    ComponentKey,
    Confirmation,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    ProvenanceRules,
    SourceRecord,
    sign_confirmation,
)

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
ATTEMPT = "task-7/attempt-1"

POLICY_OUTPUT = (
    "The function computes the monthly invoice total by summing all line items, applying the "
    "regional VAT rate of 20 percent, and rounding half up to two decimal places; the result "
    "for account 4471 is 1234.56 EUR and it matches the ledger balance."
)
INDEPENDENT_TEXT = (
    "Bank statement export for account 4471 shows a month-end balance of 1234.56 EUR; "
    "reconciliation service run 88 found no unmatched entries and no manual adjustments."
)


@dataclass
class Clock:
    """A clock the test moves by hand; every call advances it a millisecond."""

    now: datetime = T0 + timedelta(hours=1)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@dataclass
class World:
    """A ledger file, a register on it, and signing keys for named sources."""

    path: Path
    store: SqliteStore
    clock: Clock
    rules: ProvenanceRules
    register: ProvenanceRegister
    keys: dict[str, ComponentKey] = field(default_factory=dict)
    opened: list[SqliteStore] = field(default_factory=list)

    def reopen(self) -> ProvenanceRegister:
        """Close the ledger file and build a new register from what the file holds."""
        self.store.close()
        self.store = SqliteStore.open(self.path)
        self.opened.append(self.store)
        self.register = ProvenanceRegister(self.store, actor="provenance-register",
                                           rules=self.rules, clock=self.clock)
        return self.register

    def start_attempt(self, attempt: str = ATTEMPT, at: datetime = T0) -> None:
        """What the attempt harness writes (spec 10.1); the register only reads it."""
        stamp = utc_stamp(at)
        event = NewEvent.make(EventKind.ATTEMPT_INITIATED, {
            "task_class": "invoice", "attempt_id": attempt, "task_version": "1",
            "rules_version": "invoice/1", "functions": [], "indicators": [], "benchmarks": {},
            "control_ids": [], "sources": {}, "policy_access": {}, "checklist": [],
            "self_checks": [], "formula": "none", "verifier_version": "none",
            "artefact_sha256": None, "started_at": stamp, "deadline": stamp},
            actor="attempt-harness", at=at, attempt=attempt)
        self.store.append([event])

    def key(self, source_id: str) -> ComponentKey:
        # Deterministic per name, so a test failure reproduces byte for byte.
        seed = (source_id.encode() * 32)[:32]
        return self.keys.setdefault(source_id, ComponentKey.from_private_bytes(seed))

    def source(self, source_id: str, **overrides: Any) -> SourceRecord:
        fields: dict[str, Any] = {
            "id": source_id,
            "party": f"component {source_id}",
            "created_at": T0 - timedelta(days=1),
            "origin": Origin.INDEPENDENT_OPERATIONAL,
            "synthetic": False,
            "independence": "separate service; reads the bank feed, no path from the policy",
            "policy_access": PolicyAccess.NONE,
            "authentication": self.key(source_id).authentication,
        }
        fields.update(overrides)
        return self.register.register_source(SourceRecord(**fields))

    def signed(self, source_id: str, content: Any, attempt: str = ATTEMPT,
               issued_at: datetime | None = None) -> Confirmation:
        return sign_confirmation(self.key(source_id), source=source_id, attempt=attempt,
                                 content=content, issued_at=issued_at or T0 + timedelta(minutes=5))

    def submit(self, source_id: str, content: Any, **kw: Any) -> Any:
        return self.register.submit_confirmation(self.signed(source_id, content, **kw))

    def kinds(self) -> list[str]:
        return [str(ev.kind) for ev in self.all_events()]

    def all_events(self) -> list[Any]:
        from triz_ri_smart_ai_evaluator.ledger.events import Event
        from triz_ri_smart_ai_evaluator.ledger.merkle import leaf_hash

        return [Event(seq, body, leaf_hash(body)) for seq, body in self.store.scan()]


@pytest.fixture
def make_world(tmp_path: Path) -> Iterator[Callable[..., World]]:
    stores: list[SqliteStore] = []

    def make(rules: ProvenanceRules | None = None, name: str = "ledger.db") -> World:
        path = tmp_path / name
        store = SqliteStore.open(path)
        stores.append(store)
        clock = Clock()
        rules = rules or ProvenanceRules()
        register = ProvenanceRegister(store, actor="provenance-register", rules=rules,
                                      clock=clock)
        world = World(path, store, clock, rules, register)
        world.opened = stores
        return world

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    """A ledger with one started attempt and the evaluated policy's output recorded."""
    w = make_world()
    w.start_attempt()
    w.register.record_policy_output(ATTEMPT, POLICY_OUTPUT)
    return w

