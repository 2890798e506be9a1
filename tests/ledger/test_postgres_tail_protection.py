"""Issue 11 item 3, PostgreSQL: the events after the last checkpoint are protected, by the head
an open store remembers and by the log key's signed head in the database for a store opened
after the tampering (which also leaves an alarm the next good start records).

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
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy, Head, sign_head

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
    event = NewEvent.make("comment.added", {"text": f"forged event {seq}"}, actor="runner-1",
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


# -- the signed head on disk (issue 11 item 3): a store opened after the tampering ----------
@pytest.fixture
def written(pg_ledger: PgLedger) -> tuple[PgLedger, CheckpointPolicy, PostgresAttacker]:
    """SIZE events written with the log key by a store that is then closed."""
    policy = _policy()
    store = pg_ledger.open(policy=policy)
    for p in range(1, SIZE + 1):
        store.append([template_event(p)])
    store.close()
    return pg_ledger, policy, PostgresAttacker(pg_ledger.connect(), pg_ledger.schema)


def _note(attacker: PostgresAttacker) -> str | None:
    rows = attacker.sql("SELECT note FROM {head}")
    return None if not rows or rows[0][0] is None else str(rows[0][0])


def _set_note(attacker: PostgresAttacker, note: str | None) -> None:
    """The owner, without the key, replaces (or removes) the signed head."""
    attacker.sql("UPDATE {head} SET note = ?", (note,))


@pytest.mark.parametrize(("name", "tamper"), TAMPERINGS, ids=[n for n, _ in TAMPERINGS])
def test_rewritten_tail_is_refused_by_a_store_opened_after_it(
    written: tuple[PgLedger, CheckpointPolicy, PostgresAttacker], name: str,
    tamper: Callable[[list[bytes]], list[bytes]],
) -> None:
    """No store was open to remember the head: the log key's signed head in the database is
    what the new store checks the tail against, before it appends or signs anything."""
    pg, policy, attacker = written
    _set_tail(attacker, tamper(_bodies(attacker)))
    before = _bodies(attacker)
    with pytest.raises(IntegrityError, match=r"signed head|event"):
        pg.open(policy=policy)
    assert _bodies(attacker) == before, name
    assert [size for (size,) in attacker.sql("SELECT size FROM {checkpoints}")] == [EVERY]


def test_forged_missing_or_foreign_signed_head_is_refused(
    written: tuple[PgLedger, CheckpointPolicy, PostgresAttacker],
) -> None:
    pg, policy, attacker = written
    genuine = _note(attacker)
    assert genuine is not None
    assert f"\n{SIZE}\n" in genuine
    other = _policy()  # another key: a note it signs is not this log's
    foreign = sign_head(Head.empty(), other.signer, ORIGIN)
    edited = genuine.replace(f"\n{SIZE}\n", f"\n{SIZE - 1}\n", 1)
    for note, why in ((None, "missing"), (foreign, "does not verify"),
                      (edited, "does not verify"), ("garbage", "does not verify")):
        _set_note(attacker, note)
        with pytest.raises(IntegrityError, match=why):
            pg.open(policy=policy)
    _set_note(attacker, genuine)
    store = pg.open(policy=policy)  # the four refusals are recorded as one alarm event
    last = json.loads(_bodies(attacker)[-1])
    assert last["kind"] == "ledger.tamper_detected"
    assert last["data"]["refused"].count("signed head") == 4
    assert store.append([template_event(SIZE + 2)]) == [SIZE + 2]


def test_an_older_signed_head_below_a_checkpoint_is_refused(pg_ledger: PgLedger) -> None:
    """Rolling the log back to a genuine older head (captured before the checkpoint) is seen:
    the checkpoint the log key signed is beyond it."""
    policy = _policy()
    store = pg_ledger.open(policy=policy)
    attacker = PostgresAttacker(pg_ledger.connect(), pg_ledger.schema)
    for p in range(1, EVERY):
        store.append([template_event(p)])
    old = _note(attacker)
    for p in range(EVERY, SIZE + 1):
        store.append([template_event(p)])
    store.close()
    _set_tail(attacker, _bodies(attacker)[: EVERY - 1])
    _set_note(attacker, old)
    with pytest.raises(IntegrityError, match="checkpoint"):
        pg_ledger.open(policy=policy)


def test_restored_ledger_records_the_alarm_on_the_next_good_start(
    written: tuple[PgLedger, CheckpointPolicy, PostgresAttacker],
) -> None:
    pg, policy, attacker = written
    original = _bodies(attacker)
    _set_tail(attacker, _delete_last(original))
    with pytest.raises(IntegrityError):
        pg.open(policy=policy)
    _set_tail(attacker, original)  # the operator restores the database
    store = pg.open(policy=policy)
    last = json.loads(_bodies(attacker)[-1])
    assert last["kind"] == "ledger.tamper_detected"
    assert "signed head" in last["data"]["refused"]
    assert last["data"]["size"] == SIZE
    assert store.size() == SIZE + 1
    # Recorded once: the next start finds no alarm left.
    pg.open(policy=policy)
    assert len(_bodies(attacker)) == SIZE + 1


def _append_then_fail(store: PostgresStore, event: NewEvent) -> None:
    with store.group():
        store.append([event])
        raise RuntimeError("rolled back")


def test_reopened_stores_and_groups_keep_the_signed_head_current(pg_ledger: PgLedger) -> None:
    policy = _policy()
    for round_ in range(3):
        store = pg_ledger.open(policy=policy)
        with store.group():
            store.append([template_event(10 * round_ + 1)])
            store.append([template_event(10 * round_ + 2)], force_checkpoint=round_ == 1)
        with pytest.raises(RuntimeError, match="rolled back"):
            _append_then_fail(store, template_event(10 * round_ + 3))
        store.close()
    store = pg_ledger.open(policy=policy)
    assert store.size() == 6
    assert store.append([template_event(99)]) == [7]
