"""A policy submission on PostgreSQL (issue 16 item 4): one write round trip, atomic, and the
same as on SQLite (spec 10.4: the attempt and what it submitted are logged together or not at
all; 9.3: the database re-checks the chain it is given).

The statements are counted on the wire, between the store and the real server
(``_pgwire.CountingProxy``), not by wrapping the store: what is asserted is what PostgreSQL
received.  A refusal is provoked the way it happens for real: someone with write access to the
database rewrote the last event, and the store that remembers it refuses to append after it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.access import (
    AccessGuard,
    Catalogue,
    PolicyPort,
    Principal,
    Role,
    load_matrix,
)
from triz_ri_smart_ai_evaluator.canonical import sha256_hex
from triz_ri_smart_ai_evaluator.errors import IntegrityError
from triz_ri_smart_ai_evaluator.ledger.checkpoint import NoteSigner, generate_signer
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import check_ledger
from triz_ri_smart_ai_evaluator.ledger.merkle import leaf_hash
from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy, LedgerStore
from triz_ri_smart_ai_evaluator.rules import load_catalogue

from ._pgwire import CountingProxy, counting
from ._tamper import PostgresAttacker, SqliteAttacker
from .conftest import PgLedger

CLASS = "document_step_faithfulness"
AT = "2026-12-06T10:00:00.000000Z"
ORIGIN = "submission.test.example/log"


@pytest.fixture
def signer() -> NoteSigner:
    return generate_signer(ORIGIN)


def _policy(signer: NoteSigner) -> CheckpointPolicy:
    return CheckpointPolicy(signer, ORIGIN, every_events=1000, every_seconds=3600.0,
                            clock=lambda: 100.0)


def _port(store: LedgerStore) -> PolicyPort:
    guard = AccessGuard(load_matrix(), store)
    return PolicyPort(guard, Principal("policy-a", Role.EVALUATED_POLICY),
                      catalogue=Catalogue(load_catalogue()))


def _submit(port: PolicyPort, n: int) -> str:
    return port.submit(CLASS, f"step 1: open the form\nstep {n}: submit it\n".encode(),
                       claims=[f"done {n}"], diagnostics=["a note"])


def _kinds(store: LedgerStore, start: int = 1) -> list[str]:
    # json.loads, not parse_body: after a tampering a body is no longer canonical
    return [json.loads(body)["kind"] for _, body in store.scan(start)]


def _event(n: int, attempt: str = "att-x") -> NewEvent:
    return NewEvent.make(EventKind.SOURCE_REGISTERED, {"source": {"n": n}}, actor="test", at=AT,
                         attempt=attempt)


@pytest.fixture
def counted_pg(pg_ledger: PgLedger, signer: NoteSigner
               ) -> Iterator[tuple[PostgresStore, CountingProxy]]:
    """A PostgreSQL store whose every message to the server passes a counting proxy."""
    with counting(pg_ledger.writer_dsn) as (proxy, dsn):
        store = PostgresStore.open(dsn, policy=_policy(signer), schema=pg_ledger.schema)
        try:
            yield store, proxy
        finally:
            store.close()


# -- one round trip for the write ------------------------------------------------------------
@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "in a group commit"])
def test_a_submission_is_one_write_round_trip(
    counted_pg: tuple[PostgresStore, CountingProxy], grouped: bool,
) -> None:
    store, proxy = counted_pg
    port = _port(store)
    _submit(port, 0)  # the first one publishes the rules and reads the whole (short) log
    for n in range(1, 4):
        mark = proxy.counts.snapshot()
        with store.group() if grouped else contextlib.nullcontext():
            attempt = _submit(port, n)
        statements, round_trips = proxy.counts.since(mark)
        writes = [s for s in statements if "ledger_append" in s or "ledger_put_evidence" in s
                  or "SAVEPOINT" in s.upper()]
        # The artefact, the claim, the note, attempt.initiated and the events naming them: one
        # call of ledger_append_evidence, nothing else that writes.
        assert len(writes) == 1, statements
        assert "ledger_append_evidence" in writes[0]
        # Reads: the log's new tail (one page) and the class's loop subject; a group adds its
        # BEGIN and COMMIT.
        assert round_trips <= 3 + 2 * grouped, statements
        assert _kinds(store)[-4:] == ["attempt.initiated", "evidence.stored", "policy.output",
                                      "policy.output"]
        assert store.attempt_events(attempt)[0].kind == "attempt.initiated"


def test_round_trips_per_submission_with_evidence_stay_flat_as_the_log_grows(
    counted_pg: tuple[PostgresStore, CountingProxy],
) -> None:
    """The instance index and the published-rules lookups read only the new tail: the
    hundredth submission costs what the second did."""
    store, proxy = counted_pg
    port = _port(store)
    costs = []
    for n in range(40):
        mark = proxy.counts.snapshot()
        _submit(port, n)
        costs.append(proxy.counts.since(mark)[1])
    assert max(costs[1:]) <= 3, costs


# -- atomic: evidence and events together or neither -------------------------------------------
def test_the_function_stores_no_evidence_when_it_refuses_the_batch(pg_ledger: PgLedger,
                                                                   signer: NoteSigner) -> None:
    """Called directly by the writer role with a batch the chain check refuses (its leaf is
    not the body's hash): the blob it was given is not kept (one transaction on the server)."""
    store = pg_ledger.open(policy=_policy(signer))
    store.append([_event(1)])
    blob = b"evidence that must not outlive its refused batch"
    conn = pg_ledger.connect(pg_ledger.writer)
    row = conn.execute(
        f"SELECT * FROM {pg_ledger.schema}.ledger_append_evidence("
        "%s, %s, ARRAY[2]::bigint[], ARRAY['\\x00'::bytea], ARRAY['k'], ARRAY['a'],"
        " ARRAY['{}'::bytea], 2, 'x', ''::bytea, 0, 0, NULL, NULL, NULL)",
        ([blob], [hashlib.sha256(blob).hexdigest()])).fetchone()
    assert row is not None
    assert (row[0], row[1]) == (None, "23000"), row  # refused, answered as data
    assert "leaf is not SHA-256" in row[2]
    admin = pg_ledger.connect()
    assert admin.execute(f"SELECT count(*) FROM {pg_ledger.schema}.evidence").fetchone() == (0,)
    assert admin.execute(f"SELECT count(*) FROM {pg_ledger.schema}.events").fetchone() == (1,)


def test_the_function_refuses_a_digest_that_is_not_the_blobs(pg_ledger: PgLedger,
                                                            signer: NoteSigner) -> None:
    store = pg_ledger.open(policy=_policy(signer))
    store.append([_event(1)])
    conn = pg_ledger.connect(pg_ledger.writer)
    row = conn.execute(
        f"SELECT * FROM {pg_ledger.schema}.ledger_append_evidence(%s, %s, NULL, NULL, NULL,"
        " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        ([b"blob"], ["0" * 64])).fetchone()
    assert row is not None
    assert (row[0], row[1]) == (None, "23000"), row
    assert "digest" in row[2]


@pytest.fixture(params=["sqlite", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path, signer: NoteSigner
           ) -> Iterator[tuple[str, LedgerStore, Any]]:
    """(backend, a store with the log key, an attacker who owns its database)."""
    if request.param == "sqlite":
        path = tmp_path / "ledger.db"
        store: LedgerStore = SqliteStore.open(path, policy=_policy(signer))
        conn = sqlite3.connect(path, isolation_level=None)  # each statement commits
        try:
            yield "sqlite", store, SqliteAttacker(conn)
        finally:
            store.close()
            conn.close()
        return
    pg: PgLedger = request.getfixturevalue("pg_ledger")
    yield "postgres", pg.open(policy=_policy(signer)), PostgresAttacker(pg.connect(), pg.schema)


def _rewrite_last_event(attacker: Any, store: LedgerStore) -> None:
    """The database's owner changes the text of the last event (guards off, then on again)."""
    seq, body = list(store.scan())[-1]
    fields = json.loads(body)
    changed = body.replace(b'"actor":', b'"actor": ', 1)
    assert changed != body
    attacker.upsert("events", {"seq": seq, "leaf": leaf_hash(changed), "kind": fields["kind"],
                               "attempt": fields["attempt"], "body": changed})
    attacker.reguard()


def _evidence(store: LedgerStore) -> set[str]:
    return set(store.evidence_digests())


def test_a_refused_append_with_evidence_stores_neither(opened: tuple[str, LedgerStore, Any]
                                                       ) -> None:
    backend, store, attacker = opened
    store.append_with_evidence([_event(1)], [b"kept"])
    _rewrite_last_event(attacker, store)
    size, evidence = store.size(), _evidence(store)
    with pytest.raises(IntegrityError):
        store.append_with_evidence([_event(2)], [b"never stored"])
    assert store.size() == size, backend
    assert _evidence(store) == evidence == {sha256_hex(b"kept")}, backend


def test_a_refused_submission_leaves_no_initiated_attempt(opened: tuple[str, LedgerStore, Any]
                                                          ) -> None:
    """spec 10.4: before, attempt.initiated was its own append and the artefact's a second one,
    so a refusal between them left an attempt whose artefact was never stored."""
    backend, store, attacker = opened
    port = _port(store)
    _submit(port, 0)
    _rewrite_last_event(attacker, store)
    before = _kinds(store).count("attempt.initiated"), _evidence(store)
    with pytest.raises(IntegrityError):
        _submit(port, 1)
    assert (_kinds(store).count("attempt.initiated"), _evidence(store)) == before, backend


def test_a_submission_is_logged_whole_or_not_at_all(opened: tuple[str, LedgerStore, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """spec 10.4: the database's owner rewrites the tail right after the attempt is logged.
    Before, attempt.initiated was an append of its own and the artefact a second one: the
    second was refused and left an attempt whose artefact was stored but never recorded.  Now
    the attempt and everything it submitted are one write, which is there whole or not at
    all."""
    backend, store, attacker = opened
    port = _port(store)
    _submit(port, 0)
    before = _kinds(store).count("attempt.initiated"), _evidence(store)
    tampered: list[int] = []

    def hook(real: Any) -> Any:
        def after(*args: Any, **kwargs: Any) -> list[int]:
            positions: list[int] = real(*args, **kwargs)
            if positions and not tampered and "attempt.initiated" in _kinds(store, positions[0]):
                tampered.append(positions[0])
                _rewrite_last_event(attacker, store)
            return positions
        return after

    for name in ("append", "append_with_evidence"):
        monkeypatch.setattr(store, name, hook(getattr(store, name)))
    try:
        attempt: str | None = _submit(port, 1)
    except IntegrityError:
        attempt = None
    assert tampered, backend
    initiated = _kinds(store).count("attempt.initiated")
    if attempt is None:  # refused: nothing of it was kept
        assert (initiated, _evidence(store)) == before, backend
    else:  # accepted: all of it was kept
        assert initiated == before[0] + 1, backend
        kinds = [json.loads(e.body)["kind"] for e in store.attempt_events(attempt)]
        assert kinds == ["attempt.initiated", "evidence.stored", "policy.output",
                         "policy.output"], backend
        named = {json.loads(e.body)["data"].get(k) for e in store.attempt_events(attempt)
                 for k in ("digest", "output")} - {None}
        assert len(named) == 3
        assert named <= _evidence(store), backend


# -- the same on both backends, and the ledger verifies -----------------------------------------
def test_sqlite_and_postgres_store_the_same_submission(opened: tuple[str, LedgerStore, Any],
                                                       signer: NoteSigner) -> None:
    backend, store, _ = opened
    port = _port(store)
    attempts = [_submit(port, n) for n in range(3)]
    kinds = _kinds(store)
    assert kinds == ["rules.published"] + ["attempt.initiated", "evidence.stored",
                                           "policy.output", "policy.output"] * 3, backend
    for n, attempt in enumerate(attempts):
        events = store.attempt_events(attempt)
        stored = events[1].data
        assert stored["what"] == "artefact"
        assert store.get_evidence(stored["digest"]) == (
            f"step 1: open the form\nstep {n}: submit it\n".encode())
        claim, note = events[2].data, events[3].data
        assert store.get_evidence(claim["output"]).decode() == f"done {n}"
        assert store.get_evidence(note["output"]).decode() == "a note"
    store.append([], force_checkpoint=True)
    report = check_ledger(store, log_key=signer.verifier)
    assert report.ok, json.dumps(report.to_dict())[:2000]


def test_append_with_evidence_on_both_backends_gives_the_same_positions(
    opened: tuple[str, LedgerStore, Any],
) -> None:
    backend, store, _ = opened
    assert store.append_with_evidence([_event(1), _event(2)], [b"a", b"b", b"a"]) == [1, 2]
    assert store.append_with_evidence([], [b"c"]) == []
    assert store.append_with_evidence([_event(3)], []) == [3]
    assert _evidence(store) == {sha256_hex(b) for b in (b"a", b"b", b"c")}, backend
    assert store.get_evidence(sha256_hex(b"b")) == b"b"



# -- a group commit sends its submissions as one call, without waiting per submission ----------
def test_a_group_of_submissions_is_one_write_and_a_few_round_trips(
    counted_pg: tuple[PostgresStore, CountingProxy],
) -> None:
    """Inside a group the store holds the append lock, so the log grows only by its own
    appends: the tail reads after the first are answered from what it wrote, and the group's
    appends go to the server as ONE call, sent without waiting (pipeline mode) and checked
    before COMMIT.  Sixteen submissions cost what one does."""
    store, proxy = counted_pg
    port = _port(store)
    _submit(port, 0)
    costs = {}
    for n in (1, 16):
        mark = proxy.counts.snapshot()
        with store.group():
            attempts = [_submit(port, k) for k in range(n)]
        statements, round_trips = proxy.counts.since(mark)
        writes = [s for s in statements if "ledger_append" in s or "ledger_put_evidence" in s]
        assert len(writes) == 1, statements
        assert "ledger_append_evidence" in writes[0]
        costs[n] = round_trips
        for attempt in attempts:
            assert [e.kind for e in store.attempt_events(attempt)] == [
                "attempt.initiated", "evidence.stored", "policy.output", "policy.output"]
    # the lock and the new tail (one), the appends' answers (one), COMMIT (one)
    assert costs[16] == costs[1] <= 4, costs
    assert check_ledger(store, log_key=store._sequencer.policy.signer.verifier).ok  # type: ignore[union-attr]


def test_reads_inside_a_group_see_the_appends_queued_before_them(pg_ledger: PgLedger,
                                                                 signer: NoteSigner) -> None:
    """An append queued in a group reaches the server before any later statement of the
    group: a read of the same group answers with it, and its evidence is there."""
    store = pg_ledger.open(policy=_policy(signer))
    port = _port(store)
    with store.group():
        first = _submit(port, 1)
        assert store.attempt_events(first)[0].kind == "attempt.initiated"
        digest = sha256_hex(b"step 1: open the form\nstep 1: submit it\n")
        assert store.get_evidence(digest) == b"step 1: open the form\nstep 1: submit it\n"
        end = store.attempt_events(first)[-1].seq
        second = _submit(port, 2)
        assert store.size() == end + 4
        assert [a for _, _, _, a in store.scan_indexed(end + 1)] == [second] * 4
    assert store.attempt_events(second)[0].seq == end + 1
    assert check_ledger(store, log_key=signer.verifier).ok
