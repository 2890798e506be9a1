"""The tamper suite (issue 3): over a thousand tamperings per backend, zero undetected.

The attacker owns the database: on SQLite he opens the file without the store's authorizer and
drops triggers as needed; on PostgreSQL he is a superuser who disables or drops the guards.
Detection is ``check_ledger`` with the log key and the notes the *witness* cosigned (mid-way
and at the end of the template) reporting a problem, and its report must locate the first
divergent event where that is determinable: the event or range the first event-level problem
names must contain the tampered position (a broken link at N names the link between N-1 and N,
see ``_tamper.LINK_NAMES_PAIR``; a root that differs names the range of events after the last
matching witness checkpoint), and a forged checkpoint must be named by its size.

Each case starts from a fresh copy of a small witnessed template: SQLite copies the file;
PostgreSQL tampers inside one transaction, verifies inside it as the reader role, and rolls
back.  Kinds (see ``_tamper.py``): UPDATE of the body (data, actor, kind, prev, seq,
non-canonical bytes, garbage) and of the indexed columns, DELETE, DELETE with renumbering,
TRUNCATE (with and without removing the checkpoints), reordering, INSERT OR REPLACE (ON
CONFLICT DO UPDATE), a dropped trigger, an owner rewriting the tail with every hash recomputed
(with and without re-signing the log's checkpoints), checkpoints signed by another key or with
a copied signature, a different root at the same size, a faked witness cosignature, and
damaged or deleted evidence.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.errors import IntegrityError
from triz_ri_smart_ai_evaluator.ledger.events import NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import check_ledger, witness_cosign
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.ledger.verify import Report
from triz_ri_smart_ai_evaluator.ledger.witness import WitnessStore

from . import _tamper as tm
from .conftest import drop_pg_ledger

CASES = tm.cases()
BACKENDS = ("sqlite", "postgres")
COSIGN_AT = 1_700_000_000


# -- templates ---------------------------------------------------------------------------------
@dataclass
class SqliteTemplate:
    db: Path
    template: tm.Template
    witness_dir: Path
    work: Path


@dataclass
class PgTemplate:
    conn: Any  # the administrator (a superuser), autocommit
    admin_dsn: str
    schema: str
    writer: str
    reader: str
    template: tm.Template
    witness_dir: Path


@pytest.fixture(scope="module")
def keys() -> tm.Keys:
    return tm.Keys()


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory, keys: tm.Keys) -> SqliteTemplate:
    base = tmp_path_factory.mktemp("tamper-sqlite")
    db = base / "template.db"
    witness = WitnessStore(base / "witness")
    witness_key = witness.init(tm.WITNESS_NAME)
    store = SqliteStore.open(db, policy=tm.log_policy(keys.log))
    tm.fill(store, 1, tm.WITNESS_SIZES[0])
    witness_cosign(store, witness, log_key=keys.log_key, now=COSIGN_AT)
    tm.fill(store, tm.WITNESS_SIZES[0] + 1, tm.N)
    witness_cosign(store, witness, log_key=keys.log_key, now=COSIGN_AT + 1)
    template = tm.Template(keys, witness_key, [n for _, n in witness.history(tm.ORIGIN)],
                           tm.rows_of(store), store.checkpoints())
    store.close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert [s for s, _ in template.checkpoints] == list(tm.CHECKPOINT_SIZES)
    assert len(template.witness_notes) == len(tm.WITNESS_SIZES)
    work = base / "work"
    work.mkdir()
    return SqliteTemplate(db, template, base / "witness", work)


@pytest.fixture(scope="module")
def pg_template(pg_admin_dsn: str, sqlite_template: SqliteTemplate, keys: tm.Keys
                ) -> Iterator[PgTemplate]:
    """The same template in a PostgreSQL schema of its own (same bytes, same witness notes)."""
    import secrets

    import psycopg

    from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore

    base = f"t_tamper_{secrets.token_hex(4)}"
    names = {"schema": base, "owner_role": f"{base}_owner", "writer_role": f"{base}_writer",
             "reader_role": f"{base}_reader"}
    roles = (names["owner_role"], names["writer_role"], names["reader_role"])
    conn = None
    try:
        PostgresStore.init_schema(pg_admin_dsn, **names)
        from psycopg.conninfo import make_conninfo

        store = PostgresStore.open(make_conninfo(pg_admin_dsn, user=names["writer_role"]),
                                   policy=tm.log_policy(keys.log), schema=base)
        tm.fill(store, 1, tm.N)
        lite = sqlite_template.template
        assert store.checkpoints() == lite.checkpoints
        assert tm.rows_of(store) == lite.rows
        store.close()
        conn = psycopg.connect(pg_admin_dsn, autocommit=True)
        yield PgTemplate(conn, pg_admin_dsn, base, names["writer_role"], names["reader_role"],
                         lite, sqlite_template.witness_dir)
    finally:
        if conn is not None:
            conn.close()
        drop_pg_ledger(pg_admin_dsn, base, roles)


def safe_verify(store: LedgerStore, **kwargs: Any) -> Report:
    """check_ledger; an exception out of it is a test failure (it must report, not raise)."""
    try:
        return check_ledger(store, **kwargs)
    except Exception as e:
        pytest.fail(f"check_ledger raised instead of reporting: {type(e).__name__}: {e}")


def verify(store: LedgerStore, t: tm.Template, extra_notes: tuple[str, ...] = ()) -> Report:
    """check_ledger against the witness's cosigned checkpoints."""
    return safe_verify(store, log_key=t.keys.log_key,
                       witness_notes=[*t.witness_notes, *extra_notes], witness_key=t.witness_key)


@contextlib.contextmanager
def sqlite_case(lite: SqliteTemplate) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A fresh copy of the template and the owner's connection to it (closed before yield
    returns control to verification)."""
    db = lite.work / "case.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(lite.db, db)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        yield db, conn
    finally:
        conn.close()


def run_sqlite(lite: SqliteTemplate, kind: str, position: int) -> tuple[Report, tm.Expect]:
    with sqlite_case(lite) as (db, conn):
        expect = tm.apply(kind, tm.SqliteAttacker(conn), lite.template, position)
    store = SqliteStore.open(db, read_only=True)
    try:
        return verify(store, lite.template, expect.extra_witness_notes), expect
    finally:
        store.close()


@contextlib.contextmanager
def pg_case(pg: PgTemplate) -> Iterator[tm.PostgresAttacker]:
    """One transaction on the template, always rolled back."""
    with pg.conn.transaction(force_rollback=True):
        yield tm.PostgresAttacker(pg.conn, pg.schema)


def pg_reader_store(pg: PgTemplate) -> LedgerStore:
    """The store, inside the attacker's transaction, reading as the reader role."""
    from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore

    pg.conn.execute(f'SET LOCAL ROLE "{pg.reader}"')
    return PostgresStore(pg.conn, pg.schema, None, "tamper-suite")


def run_pg(pg: PgTemplate, kind: str, position: int) -> tuple[Report, tm.Expect]:
    with pg_case(pg) as attacker:
        expect = tm.apply(kind, attacker, pg.template, position)
        report = verify(pg_reader_store(pg), pg.template, expect.extra_witness_notes)
    return report, expect


def run(request: pytest.FixtureRequest, backend: str, kind: str, position: int
        ) -> tuple[Report, tm.Expect]:
    if backend == "sqlite":
        return run_sqlite(request.getfixturevalue("sqlite_template"), kind, position)
    return run_pg(request.getfixturevalue("pg_template"), kind, position)


# -- the suite ---------------------------------------------------------------------------------
def test_the_suite_has_over_a_thousand_tamperings_per_backend() -> None:
    assert len(CASES) >= 1000
    kinds = {kind for kind, _ in CASES}
    assert kinds == {*tm.EVENT_KINDS, *tm.CHECKPOINT_KINDS, *tm.EVIDENCE_KINDS}


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_untouched_template_verifies(request: pytest.FixtureRequest, backend: str) -> None:
    if backend == "sqlite":
        lite = request.getfixturevalue("sqlite_template")
        with sqlite_case(lite) as (db, _):
            pass
        store: LedgerStore = SqliteStore.open(db, read_only=True)
        report = verify(store, lite.template)
        store.close()
    else:
        pg = request.getfixturevalue("pg_template")
        with pg_case(pg):
            report = verify(pg_reader_store(pg), pg.template)
    assert report.ok, report.problems
    assert report.size == tm.N
    assert report.witnessed_checked == len(tm.WITNESS_SIZES)
    assert report.checkpoints_checked == len(tm.CHECKPOINT_SIZES)
    assert report.evidence_checked == len(tm.EVIDENCE_POSITIONS)


@pytest.mark.parametrize(("kind", "position"), CASES, ids=[f"{k}@{p}" for k, p in CASES])
@pytest.mark.parametrize("backend", BACKENDS)
def test_tampering_is_detected_against_the_witness(
    request: pytest.FixtureRequest, backend: str, kind: str, position: int
) -> None:
    report, expect = run(request, backend, kind, position)
    tm.check_detected(report, expect, f"{backend} {kind}@{position}")


# -- what the witness refuses to cosign ---------------------------------------------------------
def _witness_copy(src: Path, dst: Path) -> WitnessStore:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return WitnessStore(dst)


@pytest.mark.parametrize("position", [1, 20, 24, 25, 40, 48])
@pytest.mark.parametrize("backend", BACKENDS)
def test_witness_refuses_to_cosign_a_rewritten_history(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str, position: int
) -> None:
    """The owner rewrites from ``position`` and re-signs with the log key: no cosignature."""
    def attempt(store: LedgerStore, t: tm.Template) -> None:
        witness = _witness_copy(request.getfixturevalue("sqlite_template").witness_dir,
                                tmp_path / "witness")
        with pytest.raises(IntegrityError, match=r"split view|consistency|rollback"):
            witness_cosign(store, witness, log_key=t.keys.log_key, now=COSIGN_AT + 9)
        assert len(witness.history(tm.ORIGIN)) == len(tm.WITNESS_SIZES)

    if backend == "sqlite":
        lite = request.getfixturevalue("sqlite_template")
        with sqlite_case(lite) as (db, conn):
            tm.apply("rewrite_tail_resigned", tm.SqliteAttacker(conn), lite.template, position)
        store: LedgerStore = SqliteStore.open(db, read_only=True)
        attempt(store, lite.template)
        store.close()
    else:
        pg = request.getfixturevalue("pg_template")
        with pg_case(pg) as attacker:
            tm.apply("rewrite_tail_resigned", attacker, pg.template, position)
            attempt(pg_reader_store(pg), pg.template)


def _append_signed(opener: Callable[[], LedgerStore]) -> None:
    store = opener()
    try:
        store.append([tm.template_event(1)], force_checkpoint=True)
    finally:
        store.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_refuses_to_sign_with_another_log_key(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """Known bug (3): a key with the log's name that did not sign the log's last checkpoint
    must not add checkpoints (they would carry the wrong key) - refused, nothing written."""
    t: tm.Template = request.getfixturevalue("sqlite_template").template
    forger = tm.log_policy(t.keys.log_forger)
    if backend == "sqlite":
        db = tmp_path / "l.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template").db, db)
        before = db.read_bytes()
        with pytest.raises(IntegrityError, match="log key"):
            _append_signed(lambda: SqliteStore.open(db, policy=forger))
        check = SqliteStore.open(db, read_only=True)
        assert check.size() == tm.N
        assert check.checkpoints() == t.checkpoints
        check.close()
        assert db.read_bytes() == before
    else:
        from psycopg.conninfo import make_conninfo

        from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore

        pg = request.getfixturevalue("pg_template")
        dsn = make_conninfo(pg.admin_dsn, user=pg.writer)
        with pytest.raises(IntegrityError, match="log key"):
            _append_signed(lambda: PostgresStore.open(dsn, policy=forger, schema=pg.schema))
        with pg_case(pg):
            store = pg_reader_store(pg)
            assert store.size() == tm.N
            assert store.checkpoints() == t.checkpoints


def test_witness_refuses_a_checkpoint_signed_by_another_log_key(
    sqlite_template: SqliteTemplate, tmp_path: Path
) -> None:
    """Bug (3) as the witness sees it: after cosigning a log's checkpoints, a checkpoint for the
    same origin signed by a different key with the log's name is not cosigned, even when its
    tree is a consistent extension.  (The owner appends honestly, then signs the checkpoint
    himself with a key of his own and asks the witness with that key.)"""
    from triz_ri_smart_ai_evaluator.ledger.checkpoint import Checkpoint, sign_note
    from triz_ri_smart_ai_evaluator.ledger.merkle import leaf_hash, root_from_leaf_hashes

    db = tmp_path / "l.db"
    shutil.copyfile(sqlite_template.db, db)
    t = sqlite_template.template
    store = SqliteStore.open(db)  # no policy: appends without signing
    store.append([tm.template_event(1)])
    leaves = [*t.leaves, leaf_hash(next(b for _, b in store.scan(tm.N + 1)))]
    store.close()
    body = Checkpoint(tm.ORIGIN, tm.N + 1, root_from_leaf_hashes(leaves)).to_body()
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO checkpoints VALUES (?, ?)",
                 (tm.N + 1, sign_note(body, t.keys.log_forger)))
    conn.commit()
    conn.close()
    witness = _witness_copy(sqlite_template.witness_dir, tmp_path / "witness")
    store = SqliteStore.open(db, read_only=True)
    try:
        with pytest.raises(IntegrityError):
            witness_cosign(store, witness, log_key=t.keys.log_forger.verifier, now=COSIGN_AT + 9)
    finally:
        store.close()
    assert len(witness.history(tm.ORIGIN)) == len(tm.WITNESS_SIZES)


# -- verify on honest ledgers with unusual content (no false positive, no crash) ------------------
def _ledger_with(tmp_path: Path, keys: tm.Keys, events: list[NewEvent]) -> SqliteStore:
    store = SqliteStore.open(tmp_path / "odd.db", policy=tm.log_policy(keys.log))
    store.append(events, force_checkpoint=True)
    return store


@pytest.mark.parametrize(
    "data",
    [
        {"a": 1, "kind": "evidence.stored"},
        {"note": {"kind": "evidence.stored"}},
        {"z": [{"x": 1, "kind": "evidence.stored"}]},
    ],
    ids=["flat", "nested", "in-list"],
)
def test_a_nested_evidence_kind_inside_data_is_not_an_evidence_event(
    tmp_path: Path, keys: tm.Keys, data: dict[str, Any]
) -> None:
    """Known bug (5): only the top-level kind makes an event an ``evidence.stored`` event."""
    event = NewEvent.make("verifier.decision", data, actor="reviewer", at=tm.AT, attempt="att-1")
    store = _ledger_with(tmp_path, keys, [tm.template_event(1), event])
    report = safe_verify(store, log_key=keys.log_key)
    store.close()
    assert report.ok, report.problems
    assert report.evidence_checked == 0


@pytest.mark.parametrize("digest", [123, ["ab" * 32], None, {"d": "ab"}, True, 1.5],
                         ids=["int", "list", "null", "object", "bool", "float"])
def test_a_non_string_evidence_digest_is_reported_not_a_crash(
    tmp_path: Path, keys: tm.Keys, digest: Any
) -> None:
    """Known bug (6): an evidence.stored event whose digest is not a string is a problem
    naming that event, never an exception out of verify."""
    honest = NewEvent.make("evidence.stored", {"what": "blob", "digest": "ab" * 32},
                           actor="harness", at=tm.AT)
    odd = tm.forged(honest, {"digest": digest})
    store = _ledger_with(tmp_path, keys, [tm.template_event(1), odd, tm.template_event(2)])
    report = safe_verify(store, log_key=keys.log_key)
    store.close()
    assert not report.ok
    assert report.first_divergence == "event 2", report.problems
    assert "digest" in report.problems[0], report.problems
