"""Issue 11 item 3, PostgreSQL: an open store protects the events after the last checkpoint.

A PostgreSQL owner or superuser (``PostgresAttacker``) deletes or edits events after the last
checkpoint and fixes the ``head`` table to match.  The open store remembers the head it last
wrote or verified, so its next append is refused (IntegrityError naming what changed) and no
checkpoint is signed over the rewritten tail.  Honest writers through two stores still work.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.ledger._tamper import ORIGIN, PostgresAttacker, template_event
from triz_ri_smart_ai_evaluator.errors import IntegrityError
from triz_ri_smart_ai_evaluator.ledger.checkpoint import generate_signer
from triz_ri_smart_ai_evaluator.ledger.events import GENESIS_PREV, NewEvent, prev_in_body, seal
from triz_ri_smart_ai_evaluator.ledger.merkle import MerkleAccumulator, leaf_hash
from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy

from .conftest import PgLedger

EVERY = 8
SIZE = 11  # checkpoint at 8; the unprotected tail is 9..11


def _policy() -> CheckpointPolicy:
    return CheckpointPolicy(generate_signer(ORIGIN), ORIGIN, every_events=EVERY,
                            every_seconds=1e9, clock=lambda: 1.0)


def _bodies(attacker: PostgresAttacker) -> list[bytes]:
    return [bytes(b) for (b,) in attacker.sql("SELECT body FROM {events} ORDER BY seq")]


def _set_tail(attacker: PostgresAttacker, bodies: list[bytes], *, peaks: bool = True) -> None:
    """Replace the events table by ``bodies`` (1..n) from the first that differs, and make the
    head table agree with them (its Merkle frontier too, unless ``peaks`` is false): what an
    owner without the log key can do."""
    old = _bodies(attacker)
    attacker.unguard("events", "head")
    first = next((i for i, (a, b) in enumerate(zip(old, bodies, strict=False)) if a != b),
                 min(len(old), len(bodies)))
    attacker.sql("DELETE FROM {events} WHERE seq > ?", (first,))
    for seq, body in enumerate(bodies[first:], start=first + 1):
        kind = body.split(b'"kind":"', 1)[1].split(b'"', 1)[0].decode()
        attacker.sql("INSERT INTO {events} (seq, leaf, kind, attempt, body) VALUES (?, ?, ?, ?, ?)",
                     (seq, leaf_hash(body), kind, _attempt(body), body))
    acc = MerkleAccumulator.from_state(0, ())
    for body in bodies:
        acc.append(leaf_hash(body))
    last = leaf_hash(bodies[-1]).hex() if bodies else GENESIS_PREV
    attacker.sql("UPDATE {head} SET size = ?, last_leaf = ?", (len(bodies), last))
    if peaks:
        attacker.sql("UPDATE {head} SET peaks = ?", (b"".join(acc.peaks),))
    attacker.reguard()


def _attempt(body: bytes) -> str | None:
    value = json.loads(body)["attempt"]
    return None if value is None else str(value)


def _forged(seq: int, prev: str) -> bytes:
    event = NewEvent.make("measurement.raw", {"i": seq, "value": "forged"}, actor="runner-1",
                          at="2025-03-01T12:00:00.000000Z", attempt="att-1")
    return seal(event, seq=seq, prev=prev).body


def _reseal_from(bodies: list[bytes], first: int) -> list[bytes]:
    """``bodies`` with event ``first`` forged and every later one re-chained after it."""
    out = bodies[: first - 1]
    for seq in range(first, len(bodies) + 1):
        prev = leaf_hash(out[-1]).hex() if out else GENESIS_PREV
        if seq == first:
            out.append(_forged(seq, prev))
        else:
            out.append(_reseal_body(bodies[seq - 1], prev))
    return out


def _reseal_body(body: bytes, prev: str) -> bytes:
    old_prev = prev_in_body(body)
    assert old_prev is not None
    at = body.rfind(b',"prev":"')
    return body[:at] + body[at:].replace(old_prev.encode(), prev.encode(), 1)


def _delete_last(b: list[bytes]) -> list[bytes]:
    return b[:-1]


def _delete_tail(b: list[bytes]) -> list[bytes]:
    return b[:EVERY]  # the head table rewound to the last checkpoint


def _edit_last(b: list[bytes]) -> list[bytes]:
    return _reseal_from(b, SIZE)


def _edit_first_of_tail(b: list[bytes]) -> list[bytes]:
    return _reseal_from(b, EVERY + 1)


def _delete_and_replace_last(b: list[bytes]) -> list[bytes]:
    return [*b[:-1], _forged(SIZE, leaf_hash(b[-2]).hex())]


TAMPERINGS: list[tuple[str, Callable[[list[bytes]], list[bytes]]]] = [
    ("delete the last event", _delete_last),
    ("delete the tail, head rewound to the checkpoint", _delete_tail),
    ("edit the last event", _edit_last),
    ("edit the tail from its first event", _edit_first_of_tail),
    ("replace the last event", _delete_and_replace_last),
]


@pytest.fixture
def opened(pg_ledger: PgLedger) -> tuple[PgLedger, PostgresStore, PostgresAttacker]:
    store = pg_ledger.open(policy=_policy())
    for p in range(1, SIZE + 1):
        store.append([template_event(p)])
    assert [size for size, _ in store.checkpoints()] == [EVERY]
    return pg_ledger, store, PostgresAttacker(pg_ledger.connect(), pg_ledger.schema)


@pytest.mark.parametrize(("name", "tamper"), TAMPERINGS, ids=[n for n, _ in TAMPERINGS])
@pytest.mark.parametrize("force", [False, True], ids=["append", "checkpoint"])
def test_rewritten_tail_is_refused_by_the_open_store(
    opened: tuple[PgLedger, PostgresStore, PostgresAttacker], name: str,
    tamper: Callable[[list[bytes]], list[bytes]], force: bool,
) -> None:
    _, store, attacker = opened
    _set_tail(attacker, tamper(_bodies(attacker)))
    before = _bodies(attacker)
    for _ in range(2):  # refused again: the store does not forget what it wrote
        with pytest.raises(IntegrityError, match=r"event|head"):
            store.append([template_event(SIZE + 1)], force_checkpoint=force)
    assert _bodies(attacker) == before, name
    assert [size for size, _ in store.checkpoints()] == [EVERY]


def test_edit_inside_the_tail_is_refused_before_a_checkpoint(
    opened: tuple[PgLedger, PostgresStore, PostgresAttacker],
) -> None:
    """An edited event in the middle of the tail (its successor no longer links to it) is not
    seen by the one-row check of an append, but before the log key signs a root over it."""
    _, store, attacker = opened
    bodies = _bodies(attacker)
    bodies[EVERY] = _forged(EVERY + 1, leaf_hash(bodies[EVERY - 1]).hex())  # event 9
    _set_tail(attacker, bodies, peaks=False)  # the head row itself is left as it was
    store.append([template_event(SIZE + 1)])  # one row checked: not seen yet
    with pytest.raises(IntegrityError, match=f"event {EVERY + 2} does not link"):
        store.append([template_event(SIZE + 2)], force_checkpoint=True)
    assert [size for size, _ in store.checkpoints()] == [EVERY]
    assert store.size() == SIZE + 1


def test_honest_writers_through_two_stores_take_turns(pg_ledger: PgLedger) -> None:
    policy = _policy()
    a, b = pg_ledger.open(policy=policy), pg_ledger.open(policy=policy)
    positions = []
    for p, store in zip(range(1, 3 * EVERY + 2), itertools.cycle([a, b, b, a]), strict=False):
        positions += store.append([template_event(p)])
    positions += a.append([template_event(3 * EVERY + 2), template_event(3 * EVERY + 3)],
                          force_checkpoint=True)
    assert positions == list(range(1, 3 * EVERY + 4))
    assert [s for s, _ in a.checkpoints()] == [EVERY, 2 * EVERY, 3 * EVERY, 3 * EVERY + 3]
    prev = GENESIS_PREV
    for seq, body in a.scan():
        assert prev_in_body(body) == prev, seq
        prev = leaf_hash(body).hex()


def test_uncontended_append_stays_one_statement(pg_ledger: PgLedger,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The tail check of an append rides in the append's own statement (throughput)."""
    store = pg_ledger.open(policy=_policy())
    store.append([template_event(1)])
    sent: list[bytes] = []
    execute = store._conn.execute

    def spy(query: bytes, *args: Any, **kwargs: Any) -> Any:
        sent.append(query)
        return execute(query, *args, **kwargs)

    monkeypatch.setattr(store._conn, "execute", spy)
    assert store.append([template_event(2), template_event(3)]) == [2, 3]
    assert len(sent) == 1
    assert b"ledger_scan" in sent[0]
