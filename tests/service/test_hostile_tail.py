"""Issue 11 item 3 against a real ``triz-eval serve`` process: an owner of the database file
without the log key deletes or edits events after the last checkpoint.  The service refuses
(exit 3 on restart, an integrity error on append while running) before the next checkpoint is
signed, the witness never cosigns the tampered history, and once the operator restores the
database the next start records a ``ledger.tamper_detected`` event."""

from __future__ import annotations

import base64
import sqlite3
import subprocess
from pathlib import Path

from tests.ledger._tamper import PostgresAttacker, SqliteAttacker
from tests.ledger.conftest import PgLedger, pg_admin_dsn, pg_ledger  # noqa: F401 - fixtures
from triz_ri_smart_ai_evaluator.ledger.log import (
    check_ledger,
    load_vkey,
    open_sqlite_ledger,
    witness_cosign,
    witness_notes_for,
)
from triz_ri_smart_ai_evaluator.ledger.witness import WitnessStore

from ._server_process import TRIZ_EVAL, ServerProcess, init_server

PILOT_CLASS = "pilot_02_feedback_form"


def _submit(server: ServerProcess) -> int:
    with server.client() as http:
        answer = http.post("/v1/policy/attempts", headers={
            "Authorization": f"Bearer {server.tokens['policy-1']}"}, json={
            "class_id": PILOT_CLASS, "artefact_b64": base64.b64encode(b"<form/>").decode()})
    return answer.status_code


def _serve_and_submit(server: ServerProcess, n: int) -> None:
    """Start the service, submit ``n`` attempts (each acknowledged 201), stop it."""
    server.start()
    try:
        for _ in range(n):
            assert _submit(server) == 201
    finally:
        server.stop()


def _checkpoints(db: Path) -> list[int]:
    store = open_sqlite_ledger(db, read_only=True)
    try:
        return [size for size, _ in store.checkpoints()]
    finally:
        store.close()


def _delete_last(db: Path) -> None:
    """The owner of the file, no key: drop the guard, delete the last event, fix the head row."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        a = SqliteAttacker(conn)
        a.unguard("events")
        top = a.sql("SELECT max(seq) FROM {events}")[0][0]
        a.sql("DELETE FROM {events} WHERE seq = ?", (top,))
        a.reguard()
        a.sql("UPDATE {head} SET size = ?", (top - 1,))
    finally:
        conn.close()


def _copy_database(source: Path, target: Path) -> None:
    """A consistent copy through SQLite's backup API (the WAL included)."""
    for suffix in ("-wal", "-shm"):
        target.with_name(target.name + suffix).unlink(missing_ok=True)
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def _cosign(folder: Path, witness: WitnessStore) -> int:
    store = open_sqlite_ledger(folder / "ledger.db", read_only=True)
    try:
        return witness_cosign(store, witness, log_key=load_vkey(folder / "keys" / "log.vkey"))[0]
    finally:
        store.close()


def test_a_tail_deleted_while_stopped_is_refused_on_restart_and_never_cosigned(
        tmp_path: Path) -> None:
    folder = tmp_path / "svc"
    server = init_server(folder)
    witness = WitnessStore(tmp_path / "witness")
    wkey = witness.init("hostile.test/witness")
    _serve_and_submit(server, 3)
    db = folder / "ledger.db"
    signed = _checkpoints(db)
    cosigned = _cosign(folder, witness)
    assert cosigned == signed[-1]
    backup = tmp_path / "backup.db"
    _copy_database(db, backup)
    _delete_last(db)

    restart = subprocess.run(
        [str(TRIZ_EVAL), "serve", "--config", str(server.config), "--port", str(server.port)],
        capture_output=True, timeout=120, check=False)
    assert restart.returncode == 3, restart.stderr.decode(errors="replace")[-2000:]
    assert b"signed head" in restart.stderr
    assert _checkpoints(db) == signed  # nothing was signed over the tampered tail
    assert _cosign(folder, witness) == cosigned  # so the witness can only cosign the old size

    _copy_database(backup, db)  # the operator restores
    _serve_and_submit(server, 1)
    store = open_sqlite_ledger(db, read_only=True)
    try:
        kinds = [body for _, body in store.scan()]
        assert any(b'"kind":"ledger.tamper_detected"' in b for b in kinds)
        report = check_ledger(store, log_key=load_vkey(folder / "keys" / "log.vkey"),
                               witness_notes=witness_notes_for(witness, store_origin(folder)),
                               witness_key=wkey)
        assert report.ok, report.problems
    finally:
        store.close()


def store_origin(folder: Path) -> str:
    return load_vkey(folder / "keys" / "log.vkey").name


def test_a_tail_deleted_while_running_is_refused_before_the_next_checkpoint(
        tmp_path: Path) -> None:
    folder = tmp_path / "svc"
    server = init_server(folder)
    server.start()
    try:
        for _ in range(3):
            assert _submit(server) == 201
        signed = _checkpoints(folder / "ledger.db")
        _delete_last(folder / "ledger.db")
        assert _submit(server) == 500  # an integrity error: nothing appended
        assert _checkpoints(folder / "ledger.db") == signed
    finally:
        server.stop()


def test_postgres_tail_deleted_while_stopped_is_refused_on_restart_and_alarmed(
        tmp_path: Path, pg_ledger: PgLedger) -> None:  # noqa: F811
    """The same attack on a PostgreSQL ledger: the owner deletes the last event and rewinds the
    head table while the service is stopped; the restart exits 3 on the log key's signed head
    in the database, and once the row is put back the next start records the alarm."""
    folder = tmp_path / "svc"
    server = init_server(folder, edit={
        "ledger": {"postgres": pg_ledger.writer_dsn, "schema": pg_ledger.schema}})
    _serve_and_submit(server, 3)
    attacker = PostgresAttacker(pg_ledger.connect(), pg_ledger.schema)
    last = attacker.sql("SELECT seq, leaf, kind, attempt, body FROM {events} "
                        "ORDER BY seq DESC LIMIT 1")[0]
    head = attacker.sql("SELECT size, last_leaf, peaks FROM {head}")[0]
    before = attacker.sql("SELECT leaf FROM {events} WHERE seq = ?", (last[0] - 1,))[0][0]
    attacker.unguard("events", "head")
    attacker.sql("DELETE FROM {events} WHERE seq = ?", (last[0],))
    attacker.sql("UPDATE {head} SET size = ?, last_leaf = ?", (last[0] - 1, bytes(before).hex()))
    attacker.reguard()

    restart = subprocess.run(
        [str(TRIZ_EVAL), "serve", "--config", str(server.config), "--port", str(server.port)],
        capture_output=True, timeout=120, check=False)
    assert restart.returncode == 3, restart.stderr.decode(errors="replace")[-2000:]
    assert b"signed head" in restart.stderr
    assert b"Traceback" not in restart.stderr

    attacker.unguard("events", "head")  # the operator restores the row and the head
    attacker.sql("INSERT INTO {events} (seq, leaf, kind, attempt, body) VALUES (?, ?, ?, ?, ?)",
                 last)
    attacker.sql("UPDATE {head} SET size = ?, last_leaf = ?, peaks = ?", head)
    attacker.reguard()
    _serve_and_submit(server, 1)
    kinds = [k for (k,) in attacker.sql("SELECT kind FROM {events} ORDER BY seq")]
    assert kinds.count("ledger.tamper_detected") == 1
