"""Group commit on the SQLite ledger (``SqliteStore.group``) and the service's ledger worker
that uses it: one durable transaction for many appends, nothing acknowledged before COMMIT,
a failing append undone alone, a failed group undone whole; the ledger verifies afterwards."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.ledger.conftest import PgLedger
from triz_ri_smart_ai_evaluator.errors import ExternalError
from triz_ri_smart_ai_evaluator.ledger.events import NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import (
    LOG_VKEY_FILE,
    check_ledger,
    create_log_key,
    load_vkey,
    open_sqlite_ledger,
)
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.service.ledger_worker import LedgerWorker


def event(n: int) -> NewEvent:
    return NewEvent.make("comment.added", {"text": f"note {n}"}, actor="test",
                         at=datetime.now(UTC), attempt=f"a-{n % 3}")


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    create_log_key(tmp_path / "keys")
    return tmp_path / "keys"


def verified(db: Path, keys: Path) -> bool:
    store = open_sqlite_ledger(db, keys)
    try:
        store.append([event(-1)], force_checkpoint=True)
        return check_ledger(store, log_key=load_vkey(keys / LOG_VKEY_FILE)).ok
    finally:
        store.close()


def test_a_group_commits_everything_at_its_end(tmp_path: Path, keys: Path) -> None:
    db = tmp_path / "l.db"
    store = open_sqlite_ledger(db, keys)
    other = SqliteStore.open(db, read_only=True)
    try:
        with store.group():
            for n in range(10):
                store.append([event(n)])
            digest = store.put_evidence(b"inside the group")
            assert store.size() == 10  # the writer sees its own writes
            assert other.size() == 0  # nobody else does before COMMIT
        assert other.size() == 10
        assert other.get_evidence(digest) == b"inside the group"
    finally:
        other.close()
        store.close()
    assert verified(db, keys)


def test_a_group_that_raises_leaves_nothing(tmp_path: Path, keys: Path) -> None:
    db = tmp_path / "l.db"
    store = open_sqlite_ledger(db, keys)
    try:
        store.append([event(0)])

        def fail_inside_a_group() -> None:
            with store.group():
                store.append([event(1)])
                store.put_evidence(b"never committed")
                raise RuntimeError("the caller failed")

        with pytest.raises(RuntimeError):
            fail_inside_a_group()
        assert store.size() == 1
        assert list(store.evidence_digests()) == []
        store.append([event(2)])  # the store is usable afterwards
    finally:
        store.close()
    assert verified(db, keys)


class _FailOnce:
    """A connection proxy whose first head update fails, after the event rows were written."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.failed = False

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.startswith("UPDATE head") and not self.failed:
            self.failed = True
            raise sqlite3.OperationalError("disk I/O error (injected)")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def test_a_failing_append_inside_a_group_is_undone_alone(tmp_path: Path, keys: Path) -> None:
    db = tmp_path / "l.db"
    store = open_sqlite_ledger(db, keys)
    try:
        with store.group():
            store.append([event(1)])
            proxy = _FailOnce(store._conn)
            store._conn = proxy  # type: ignore[assignment]
            with pytest.raises(ExternalError, match="injected"):
                store.append([event(2), event(3)])
            assert proxy.failed
            store._conn = proxy._conn
            assert store.size() == 1  # the failed append's rows are gone with its savepoint
            store.append([event(4)])
        assert store.size() == 2
    finally:
        store.close()
    assert verified(db, keys)


def test_the_worker_answers_only_after_commit_and_groups_waiting_jobs(tmp_path: Path,
                                                                     keys: Path) -> None:
    db = tmp_path / "l.db"
    worker = LedgerWorker()
    try:
        worker.submit(lambda: setattr(worker, "store", open_sqlite_ledger(db, keys)),
                      grouped=False).result()
        gate = threading.Event()
        blocker = worker.submit(gate.wait)  # holds the thread while jobs queue up
        futures = [worker.submit(lambda n=n: worker.store.append([event(n)])) for n in range(20)]
        gate.set()
        blocker.result(timeout=10)
        positions = [f.result(timeout=10) for f in futures]
        assert sorted(p[0] for p in positions) == list(range(1, 21))
        failing = worker.submit(lambda: 1 / 0)
        after = worker.submit(lambda: worker.store.append([event(99)]))
        with pytest.raises(ZeroDivisionError):
            failing.result(timeout=10)
        assert after.result(timeout=10) == [21]
        worker.submit(worker.store.close, grouped=False).result()
    finally:
        worker.shutdown()
    assert verified(db, keys)


def test_a_group_whose_commit_fails_fails_every_job(tmp_path: Path, keys: Path) -> None:
    class FailingCommit:
        """A store whose group cannot commit (a full disk, a lost lock)."""

        def __init__(self) -> None:
            self.calls = 0

        def group(self):  # type: ignore[no-untyped-def]
            import contextlib

            @contextlib.contextmanager
            def broken():  # type: ignore[no-untyped-def]
                yield
                raise ExternalError("group commit failed: disk full")

            return broken()

    worker = LedgerWorker()
    try:
        worker.store = FailingCommit()
        gate = threading.Event()
        blocker = worker.submit(gate.wait)
        jobs = [worker.submit(lambda n=n: n) for n in range(5)]
        gate.set()
        for job in [blocker, *jobs]:
            with pytest.raises(ExternalError, match="disk full"):
                job.result(timeout=10)
    finally:
        worker.shutdown()


# -- PostgreSQL: the same semantics on the real local server ------------------------------------


def _pg_store(pg_ledger: PgLedger, keys: Path):  # type: ignore[no-untyped-def]
    from triz_ri_smart_ai_evaluator.ledger.log import load_log_signer
    from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy

    signer = load_log_signer(keys)
    return pg_ledger.open(policy=CheckpointPolicy(signer, signer.name, 1000, 60.0, lambda: 0.0))


def test_postgres_group_commits_at_its_end_and_follows_another_writer(
        pg_ledger: PgLedger, keys: Path) -> None:
    store, other = _pg_store(pg_ledger, keys), _pg_store(pg_ledger, keys)
    reader = pg_ledger.open(role=pg_ledger.reader)
    with store.group():
        assert store.append([event(1)]) == [1]
        assert store.append([event(2)]) == [2]
        digest = store.put_evidence(b"in the group")
        # the group's own appends are read back from inside the group
        assert [seq for seq, _ in store.scan(1)] == [1, 2]
        assert reader.size() == 0  # nothing visible before COMMIT
    assert reader.size() == 2
    assert reader.get_evidence(digest) == b"in the group"
    # Another writer moves the head between two groups: the next group takes the append lock,
    # reads what the other wrote, checks it links to what this store wrote, and follows it.
    assert other.append([event(3)]) == [3]
    with store.group():
        assert [seq for seq, _ in store.scan(2)] == [2, 3]
        assert store.append([event(4)]) == [4]
        assert store.size() == 4

    def fail_inside_a_group() -> None:
        with store.group():
            store.append([event(5)])
            raise RuntimeError("the caller failed")

    with pytest.raises(RuntimeError):
        fail_inside_a_group()
    assert reader.size() == 4
    assert store.append([event(6)], force_checkpoint=True) == [5]  # head rebuilt after it
    assert check_ledger(store, log_key=load_vkey(keys / LOG_VKEY_FILE)).ok


def test_postgres_a_refused_append_fails_its_whole_group(pg_ledger: PgLedger, keys: Path
                                                         ) -> None:
    """Appends in a group are sent without waiting for their answers (pipeline mode) and
    checked before COMMIT: one the ledger refuses rolls the whole group back, and every
    caller of the group gets the refusal; nothing of it is kept, and the store goes on."""
    store = _pg_store(pg_ledger, keys)
    reader = pg_ledger.open(role=pg_ledger.reader)
    store.append([event(1)])

    def group_with_a_refused_append() -> None:
        with store.group():
            store.append([event(2)])
            stale = store._head
            store.append([event(3)])
            store._head = stale  # a batch sealed after a head the ledger has left behind
            store.append([event(4)])
            store.append([event(5)])

    with pytest.raises(ExternalError, match="head moved"):
        group_with_a_refused_append()
    assert reader.size() == 1
    assert [seq for seq, _ in store.scan(1)] == [1]
    assert store.append([event(6)], force_checkpoint=True) == [2]
    assert check_ledger(store, log_key=load_vkey(keys / LOG_VKEY_FILE)).ok
