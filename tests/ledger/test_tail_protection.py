"""Issue 11 item 3: the events after the last checkpoint are protected by a signed head.

Someone who owns the database file but not the log key (``SqliteAttacker``) deletes or edits
events after the last checkpoint.  The store must refuse to append or sign after them (in the
same process and after a restart), the witness must never cosign the tampered history, and the
next good start after a restore records an alarm event.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.ledger._tamper import ORIGIN, SqliteAttacker, forged, template_event
from triz_ri_smart_ai_evaluator.errors import IntegrityError
from triz_ri_smart_ai_evaluator.ledger.checkpoint import NoteSigner, generate_signer
from triz_ri_smart_ai_evaluator.ledger.events import GENESIS_PREV, NewEvent, seal
from triz_ri_smart_ai_evaluator.ledger.log import (
    check_ledger,
    witness_cosign,
    witness_notes_for,
)
from triz_ri_smart_ai_evaluator.ledger.merkle import MerkleAccumulator
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy
from triz_ri_smart_ai_evaluator.ledger.witness import WitnessStore

EVERY = 8


@pytest.fixture
def signer() -> NoteSigner:
    return generate_signer(ORIGIN)


@pytest.fixture
def make_store(tmp_path: Path, signer: NoteSigner) -> Iterator[Callable[..., SqliteStore]]:
    opened: list[SqliteStore] = []

    def make(*, clock: Callable[[], float] = lambda: 1.0, seconds: float = 1e9) -> SqliteStore:
        policy = CheckpointPolicy(signer, ORIGIN, EVERY, seconds, clock)
        store = SqliteStore.open(tmp_path / "ledger.db", policy=policy)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def fill(store: SqliteStore, start: int, end: int) -> None:
    for p in range(start, end + 1):
        store.append([template_event(p)])


def attacker(tmp_path: Path) -> SqliteAttacker:
    return SqliteAttacker(sqlite3.connect(tmp_path / "ledger.db", isolation_level=None))


def delete_tail(a: SqliteAttacker, first: int) -> None:
    """Delete events from ``first`` on and make the cached head row agree (a careful owner)."""
    a.unguard("events")
    a.sql("DELETE FROM {events} WHERE seq >= ?", (first,))
    a.reguard()
    rows = a.sql("SELECT body FROM {events} ORDER BY seq")
    acc = MerkleAccumulator()
    last = GENESIS_PREV
    for (body,) in rows:
        leaf = seal_leaf(body)
        acc.append(leaf)
        last = leaf.hex()
    a.sql("UPDATE {head} SET size = ?, last_leaf = ?, peaks = ?",
          (acc.size, last, b"".join(acc.peaks)))


def seal_leaf(body: bytes) -> bytes:
    from triz_ri_smart_ai_evaluator.ledger.merkle import leaf_hash

    return leaf_hash(body)


def reseal_tail(a: SqliteAttacker, first: int, change: dict[str, object]) -> None:
    """Edit event ``first`` and re-seal every event after it with a consistent chain and
    head row: everything an owner without the key can do."""
    rows = a.sql("SELECT seq, body FROM {events} ORDER BY seq")
    acc = MerkleAccumulator()
    prev = GENESIS_PREV
    a.unguard("events")
    for seq, stored in rows:
        body = stored
        if seq >= first:
            fields = json.loads(body)
            data = dict(fields["data"], **(change if seq == first else {}))
            honest = NewEvent.make(fields["kind"], fields["data"], actor=fields["actor"],
                                   at=fields["at"], attempt=fields["attempt"])
            new = forged(honest, data)  # as the owner writes it, past NewEvent.make
            event = seal(new, seq=seq, prev=prev)
            a.sql("UPDATE {events} SET body = ?, leaf = ? WHERE seq = ?",
                  (event.body, event.leaf, seq))
            body = event.body
        leaf = seal_leaf(body)
        acc.append(leaf)
        prev = leaf.hex()
    a.reguard()
    a.sql("UPDATE {head} SET size = ?, last_leaf = ?, peaks = ?",
          (acc.size, prev, b"".join(acc.peaks)))


def test_deleted_tail_is_refused_after_a_restart(make_store: Callable[..., SqliteStore],
                                                 tmp_path: Path) -> None:
    store = make_store()
    fill(store, 1, 12)  # checkpoint at 8; 9..12 are the unprotected tail
    store.close()
    delete_tail(attacker(tmp_path), 11)
    with pytest.raises(IntegrityError, match="signed head"):
        make_store()


def test_edited_and_resealed_tail_is_refused_after_a_restart(
        make_store: Callable[..., SqliteStore], tmp_path: Path) -> None:
    store = make_store()
    fill(store, 1, 12)
    store.close()
    reseal_tail(attacker(tmp_path), 10, {"value": "9999"})
    with pytest.raises(IntegrityError):
        make_store()


def test_deleted_tail_is_refused_by_the_running_store(make_store: Callable[..., SqliteStore],
                                                      tmp_path: Path) -> None:
    store = make_store()
    fill(store, 1, 12)
    delete_tail(attacker(tmp_path), 12)
    with pytest.raises(IntegrityError):
        store.append([template_event(12)])
    assert [size for size, _ in store.checkpoints()] == [8]


def test_tail_edit_in_the_middle_is_caught_before_the_checkpoint_is_signed(
        make_store: Callable[..., SqliteStore], tmp_path: Path) -> None:
    store = make_store()
    fill(store, 1, 13)
    a = attacker(tmp_path)
    a.unguard("events")
    a.sql("UPDATE {events} SET body = CAST(replace(CAST(body AS TEXT), '\"value\":\"70\"', "
          "'\"value\":\"71\"') AS BLOB) WHERE seq = 10")
    assert b'"value":"71"' in a.sql("SELECT body FROM {events} WHERE seq = 10")[0][0]
    a.reguard()
    with pytest.raises(IntegrityError):
        fill(store, 14, 16)  # the checkpoint at 16 would cover event 10
    assert [size for size, _ in store.checkpoints()] == [8]


def test_forged_signed_head_is_refused(make_store: Callable[..., SqliteStore],
                                       tmp_path: Path) -> None:
    store = make_store()
    fill(store, 1, 12)
    store.close()
    a = attacker(tmp_path)
    delete_tail(a, 11)
    forger = generate_signer(ORIGIN)
    from triz_ri_smart_ai_evaluator.ledger.store import Head, sign_head

    row = a.sql("SELECT size, last_leaf, peaks FROM {head}")[0]
    peaks = tuple(row[2][i : i + 32] for i in range(0, len(row[2]), 32))
    forged = sign_head(Head(row[0], row[1], peaks, 8, 1.0), forger, ORIGIN)
    a.sql("UPDATE signed_head SET note = ?", (forged,))
    with pytest.raises(IntegrityError, match="does not verify"):
        make_store()


def test_missing_signed_head_is_refused(make_store: Callable[..., SqliteStore],
                                        tmp_path: Path) -> None:
    store = make_store()
    fill(store, 1, 12)
    store.close()
    a = attacker(tmp_path)
    delete_tail(a, 11)
    a.sql("DELETE FROM signed_head")
    with pytest.raises(IntegrityError, match="missing"):
        make_store()


def test_witness_never_cosigns_the_tampered_tail(make_store: Callable[..., SqliteStore],
                                                 signer: NoteSigner, tmp_path: Path) -> None:
    witness = WitnessStore(tmp_path / "witness")
    wkey = witness.init("witness.test/w")
    store = make_store()
    fill(store, 1, 8)
    witness_cosign(store, witness, log_key=signer.verifier)
    fill(store, 9, 12)
    store.close()
    reseal_tail(attacker(tmp_path), 9, {"value": "0"})
    with pytest.raises(IntegrityError):
        make_store()
    reader = SqliteStore.open(tmp_path / "ledger.db", read_only=True)
    try:
        # Nothing new was signed: the witness can only cosign the untampered size again.
        assert witness_cosign(reader, witness, log_key=signer.verifier)[0] == 8
        latest = witness.latest(ORIGIN)
        assert latest is not None
        assert latest.size == 8
        assert [size for size, _ in reader.checkpoints()] == [8]
        report = check_ledger(reader, log_key=signer.verifier,
                               witness_notes=witness_notes_for(witness, ORIGIN), witness_key=wkey,
                               check_evidence=False)
        assert report.ok
        assert (report.witnessed_size, report.size) == (8, 12)
    finally:
        reader.close()


def test_restored_ledger_records_an_alarm_on_the_next_start(
        make_store: Callable[..., SqliteStore], tmp_path: Path) -> None:
    store = make_store()
    fill(store, 1, 12)
    store.close()
    backup = tmp_path / "backup.db"
    shutil.copy(tmp_path / "ledger.db", backup)
    a = attacker(tmp_path)
    delete_tail(a, 10)
    a.conn.close()
    with pytest.raises(IntegrityError):
        make_store()
    assert (tmp_path / "ledger.db.alarm").exists()
    shutil.copy(backup, tmp_path / "ledger.db")
    store = make_store()
    last = json.loads(next(iter(store.scan(13, 13)))[1])
    assert last["kind"] == "ledger.tamper_detected"
    assert "signed head" in last["data"]["refused"]
    assert not (tmp_path / "ledger.db.alarm").exists()
    fill(store, 14, 15)
    assert store.size() == 15


def test_two_writers_with_the_key_never_trip_the_check(
        make_store: Callable[..., SqliteStore]) -> None:
    a, b = make_store(), make_store()
    for p in range(1, 30):
        (a if p % 3 else b).append([template_event(p)])
    assert a.size() == b.size() == 29


def test_a_rolled_back_group_leaves_the_store_usable(
        make_store: Callable[..., SqliteStore]) -> None:
    store = make_store()
    fill(store, 1, 5)
    def fails() -> None:
        with store.group():
            store.append([template_event(6)])
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fails()
    fill(store, 6, 9)
    assert store.size() == 9


def test_events_appended_without_the_key_are_refused_by_the_keyed_store(
        make_store: Callable[..., SqliteStore], tmp_path: Path) -> None:
    fill(make_store(), 1, 3)
    keyless = SqliteStore.open(tmp_path / "ledger.db")
    try:
        keyless.append([template_event(4)])
    finally:
        keyless.close()
    with pytest.raises(IntegrityError, match="the log has 4 events, the signed head 3"):
        make_store()


def test_checkpoint_on_a_short_timer(make_store: Callable[..., SqliteStore]) -> None:
    now = [100.0]
    store = make_store(clock=lambda: now[0], seconds=10.0)
    fill(store, 1, 3)  # the first append signs at once (no checkpoint yet)
    now[0] += 11
    fill(store, 4, 4)
    assert [size for size, _ in store.checkpoints()] == [1, 4]
    assert CheckpointPolicy(generate_signer(ORIGIN), ORIGIN).every_seconds <= 10.0


def test_a_group_commit_signs_its_head_once_and_its_tail_stays_protected(
        make_store: Callable[..., SqliteStore], tmp_path: Path) -> None:
    """The service's group commit signs the head its appends reached once, before COMMIT;
    a tail deleted after it is refused like any other."""
    store = make_store()
    fill(store, 1, 9)  # checkpoint at 8
    with store.group():
        for n in range(10, 14):
            store.append([template_event(n)])
    store.append([template_event(14)])  # after the group: the signed head still matches
    store.close()
    reopened = make_store()
    assert reopened.size() == 14
    reopened.close()
    delete_tail(attacker(tmp_path), 12)
    with pytest.raises(IntegrityError, match="signed head"):
        make_store()
