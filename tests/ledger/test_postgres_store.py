"""The PostgreSQL ledger backend against the real server (issue 3; spec 1.17, 9.2, 9.3, 10.4).

What is checked: the same bytes as the SQLite backend; checkpoints per policy; the writer role
can change no table directly; the triggers stop even the owner and a superuser; the append
function refuses any broken chain whoever calls it; the application refuses to run as a
superuser; two processes appending at once never fork the chain; evidence is checked on read.
The server is required: see ``conftest.py`` (the tests fail, never skip, without it).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerrors

from triz_ri_smart_ai_evaluator.errors import ExternalError, InputError, IntegrityError
from triz_ri_smart_ai_evaluator.ledger import postgres_store
from triz_ri_smart_ai_evaluator.ledger.checkpoint import (
    Checkpoint,
    NoteSigner,
    generate_signer,
    open_note,
    parse_private_key,
)
from triz_ri_smart_ai_evaluator.ledger.events import GENESIS_PREV, EventKind, NewEvent, prev_in_body
from triz_ri_smart_ai_evaluator.ledger.merkle import leaf_hash, root_from_leaf_hashes
from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy, Head, Sequencer

from .conftest import PgLedger

AT = "2024-05-01T12:00:00.000000Z"
ORIGIN = "ledger.test.example/log"
TABLES = ("events", "evidence", "checkpoints", "head")
A_COLUMN = {"events": "seq", "evidence": "digest", "checkpoints": "size", "head": "size"}


def make_events(n: int, *, start: int = 0, tag: str = "t") -> list[NewEvent]:
    """Events with non-ASCII text, a nested ``prev`` key and attempts on some of them."""
    return [
        NewEvent.make(
            EventKind.SOURCE_REGISTERED,
            {"source": {"i": i, "tag": tag,
                        "text": "na\u00efve \u2013 \u00fcn\u00efcode \u2713",
                        "nested": {"prev": "not-the-link"}}},
            actor="runner-1",
            at=AT,
            attempt=f"att-{i % 3}" if i % 4 else None,
        )
        for i in range(start, start + n)
    ]


def fixed_policy(signer: NoteSigner, *, every_events: int = 4) -> CheckpointPolicy:
    return CheckpointPolicy(signer, ORIGIN, every_events=every_events, every_seconds=3600.0,
                            clock=lambda: 100.0)


def check_chain(bodies: list[tuple[int, bytes]]) -> list[bytes]:
    """Positions 1..n, every prev the previous leaf; returns the leaves."""
    leaves: list[bytes] = []
    prev = GENESIS_PREV
    for index, (seq, body) in enumerate(bodies, start=1):
        assert seq == index
        assert prev_in_body(body) == prev, f"event {seq}: prev link broken"
        leaves.append(leaf_hash(body))
        prev = leaves[-1].hex()
    return leaves


def check_checkpoints(checkpoints: list[tuple[int, str]], leaves: list[bytes],
                      signer: NoteSigner) -> None:
    for size, note in checkpoints:
        body, names = open_note(note, [signer.verifier])
        assert names == [signer.name]
        checkpoint = Checkpoint.from_body(body)
        assert (checkpoint.origin, checkpoint.size) == (ORIGIN, size)
        assert checkpoint.root == root_from_leaf_hashes(leaves[:size])


def stored_head(ledger: PgLedger) -> Head:
    row = ledger.connect().execute(
        f"SELECT size, last_leaf, peaks, cp_size, cp_time FROM {ledger.schema}.head"
    ).fetchone()
    assert row is not None
    peaks = tuple(bytes(row[2])[i : i + 32] for i in range(0, len(row[2]), 32))
    return Head(row[0], row[1], peaks, row[3], row[4])


# -- same semantics as SQLite ---------------------------------------------------------------
def test_same_bytes_positions_and_checkpoints_as_sqlite(pg_ledger: PgLedger, tmp_path: Any) -> None:
    policy = fixed_policy(generate_signer("ledger.test.example"))
    pg = pg_ledger.open(policy=policy)
    lite = SqliteStore.open(tmp_path / "ledger.db", policy=policy)
    batches = [make_events(1), make_events(3, start=1), [], make_events(5, start=4),
               make_events(1, start=9)]
    for number, batch in enumerate(batches):
        force = number in (2, 4)  # the first has nothing new to checkpoint
        assert pg.append(batch, force_checkpoint=force) == lite.append(
            batch, force_checkpoint=force)
    assert pg.size() == lite.size() == 10
    assert list(pg.scan()) == list(lite.scan())
    assert list(pg.scan(3, 7)) == list(lite.scan(3, 7))
    assert list(pg.scan(11)) == []
    assert pg.checkpoints() == lite.checkpoints()
    assert [size for size, _ in pg.checkpoints()] == [4, 9, 10]
    for attempt in ("att-0", "att-1", "att-2", "att-none"):
        assert pg.attempt_events(attempt) == lite.attempt_events(attempt)
    # The stored leaf column is the Merkle leaf of the stored body.
    rows = pg_ledger.connect(pg_ledger.reader).execute(
        f"SELECT seq, leaf, body FROM {pg_ledger.schema}.events ORDER BY seq").fetchall()
    assert [(s, bytes(leaf)) for s, leaf, _ in rows] == [
        (s, leaf_hash(bytes(body))) for s, body in lite.scan()]
    lite.close()


def test_scan_and_digests_page_through_long_results(pg_ledger: PgLedger,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_store, "_PAGE", 3)
    store = pg_ledger.open()
    store.append(make_events(10))
    assert [seq for seq, _ in store.scan()] == list(range(1, 11))
    assert [seq for seq, _ in store.scan(2, 9)] == list(range(2, 10))
    digests = sorted(store.put_evidence(bytes([i])) for i in range(7))
    assert list(store.evidence_digests()) == digests


def test_checkpoints_are_signed_per_policy(pg_ledger: PgLedger) -> None:
    signer = generate_signer("ledger.test.example")
    now = [0.0]
    policy = CheckpointPolicy(signer, ORIGIN, every_events=5, every_seconds=60.0,
                              clock=lambda: now[0])
    store = pg_ledger.open(policy=policy)
    store.append(make_events(3))
    assert store.checkpoints() == []
    store.append(make_events(2, start=3))  # 5 events: due by count
    now[0] = 30.0
    store.append(make_events(1, start=5))  # neither due by count nor by time
    now[0] = 61.0
    store.append(make_events(1, start=6))  # due by time
    store.append([], force_checkpoint=True)  # nothing new since the last checkpoint
    store.append(make_events(1, start=7), force_checkpoint=True)
    assert [size for size, _ in store.checkpoints()] == [5, 7, 8]
    check_checkpoints(store.checkpoints(), check_chain(list(store.scan())), signer)
    assert stored_head(pg_ledger).last_checkpoint_time == 61.0


def test_two_stores_in_one_process_take_turns(pg_ledger: PgLedger) -> None:
    """Each store caches the head it wrote; the other's appends make it stale: retried, no fork."""
    first, second = pg_ledger.open(), pg_ledger.open()
    for i in range(6):
        store = first if i % 3 else second
        assert store.append(make_events(2, start=2 * i)) == [2 * i + 1, 2 * i + 2]
    leaves = check_chain(list(first.scan()))
    head = stored_head(pg_ledger)
    assert (head.size, head.last_leaf) == (12, leaves[-1].hex())
    assert second.append(make_events(1, start=12)) == [13]


# -- roles and privileges (9.2) -----------------------------------------------------------------
def _statement(op: str, table: str, schema: str) -> str:
    column = A_COLUMN[table]
    return {
        "insert": f"INSERT INTO {schema}.{table} DEFAULT VALUES",
        "update": f"UPDATE {schema}.{table} SET {column} = {column}",
        "delete": f"DELETE FROM {schema}.{table}",
        "truncate": f"TRUNCATE {schema}.{table}",
        "select": f"SELECT * FROM {schema}.{table}",
        "disable triggers": f"ALTER TABLE {schema}.{table} DISABLE TRIGGER ALL",
    }[op]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize(
    "op", ["insert", "update", "delete", "truncate", "select", "disable triggers"])
def test_writer_cannot_touch_tables_directly(pg_ledger: PgLedger, op: str, table: str) -> None:
    store = pg_ledger.open()
    store.append(make_events(2), force_checkpoint=True)
    store.put_evidence(b"evidence")
    conn = pg_ledger.connect(pg_ledger.writer)
    with pytest.raises(pgerrors.InsufficientPrivilege):
        conn.execute(_statement(op, table, pg_ledger.schema))
    assert store.size() == 2


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TABLE {s}.intruder (i int)",
        "CREATE FUNCTION {s}.intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "SET ROLE {owner}",
        "SELECT {s}.refuse_change()",
    ],
)
def test_writer_cannot_create_objects_or_become_the_owner(pg_ledger: PgLedger,
                                                           statement: str) -> None:
    conn = pg_ledger.connect(pg_ledger.writer)
    with pytest.raises(pgerrors.InsufficientPrivilege):
        conn.execute(statement.format(s=pg_ledger.schema, owner=pg_ledger.owner))


WRITER_ONLY_CALLS = {
    "ledger_head": "SELECT * FROM {s}.ledger_head()",
    "ledger_append": "SELECT {s}.ledger_append(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
                     " NULL, NULL, NULL, NULL, NULL)",
    "ledger_put_evidence": "SELECT {s}.ledger_put_evidence('x')",
}


@pytest.mark.parametrize("function", sorted(WRITER_ONLY_CALLS))
def test_reader_reads_but_cannot_write(pg_ledger: PgLedger, function: str) -> None:
    pg_ledger.open().append(make_events(3))
    reader = pg_ledger.open(role=pg_ledger.reader)
    assert [seq for seq, _ in reader.scan()] == [1, 2, 3]
    conn = pg_ledger.connect(pg_ledger.reader)
    assert conn.execute(f"SELECT count(*) FROM {pg_ledger.schema}.events").fetchone() == (3,)
    with pytest.raises(pgerrors.InsufficientPrivilege):
        conn.execute(WRITER_ONLY_CALLS[function].format(s=pg_ledger.schema))
    with pytest.raises(ExternalError, match="permission denied"):
        reader.append(make_events(1))


def test_roles_functions_and_grants_are_as_designed(pg_ledger: PgLedger) -> None:
    conn = pg_ledger.connect()
    roles = dict(conn.execute(
        "SELECT rolname, ARRAY[rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls,"
        " rolcanlogin] FROM pg_roles WHERE rolname = ANY(%s)",
        ([pg_ledger.owner, pg_ledger.writer, pg_ledger.reader],)).fetchall())
    flags = [False] * 5
    assert roles == {pg_ledger.owner: [*flags, False], pg_ledger.writer: [*flags, True],
                     pg_ledger.reader: [*flags, True]}
    owners = conn.execute(
        "SELECT DISTINCT relowner::regrole::text FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s", (pg_ledger.schema,)).fetchall()
    assert owners == [(pg_ledger.owner,)]
    functions = conn.execute(
        "SELECT p.proname, p.prosecdef, p.proconfig, p.proowner::regrole::text,"
        " has_function_privilege(%s, p.oid, 'EXECUTE'),"
        " has_function_privilege(%s, p.oid, 'EXECUTE'),"
        " EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a"
        "         WHERE a.grantee = 0)"
        " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s",
        (pg_ledger.writer, pg_ledger.reader, pg_ledger.schema)).fetchall()
    # issue 11: the writer records a nonce (replay protection) and reads its first answer
    writes = {"ledger_head", "ledger_append", "ledger_append_evidence", "ledger_put_evidence",
              "ledger_use_nonce",
              "ledger_nonce_answer", "ledger_sign_head", "ledger_raise_alarm",
              "ledger_take_alarms"}
    reads = {"ledger_size", "ledger_scan", "ledger_scan_indexed", "ledger_attempt_events",
             "ledger_evidence",
             "ledger_evidence_digests", "ledger_checkpoints", "ledger_signed_head"}
    guards = {"refuse_change", "head_forward_only"}
    assert {f[0] for f in functions} == writes | reads | guards
    for name, secdef, config, owner, writer_may, reader_may, public_may in functions:
        assert owner == pg_ledger.owner
        assert config == ["search_path=pg_catalog, pg_temp"], name
        assert secdef == (name not in guards), name
        assert writer_may == (name in writes | reads), name
        assert reader_may == (name in reads), name
        assert not public_may, name
    for role in (pg_ledger.writer, pg_ledger.reader):
        # issue 11: the head (with its signed note) is readable; alarms by nobody but the owner
        for table in (*TABLES, "head", "alarms"):
            privileges = conn.execute(
                "SELECT has_table_privilege(%s, %s, 'INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,"
                "TRIGGER'), has_table_privilege(%s, %s, 'SELECT')",
                (role, f"{pg_ledger.schema}.{table}", role, f"{pg_ledger.schema}.{table}"),
            ).fetchone()
            assert privileges == (False, role == pg_ledger.reader and table != "alarms")


def test_init_schema_is_idempotent_and_repairs_role_attributes(pg_ledger: PgLedger) -> None:
    store = pg_ledger.open()
    store.append(make_events(2))
    store.put_evidence(b"kept")
    pg_ledger.connect().execute(f"ALTER ROLE {pg_ledger.writer} CREATEDB BYPASSRLS")
    PostgresStore.init_schema(pg_ledger.admin_dsn, **pg_ledger.names)
    PostgresStore.init_schema(pg_ledger.admin_dsn, **pg_ledger.names)
    row = pg_ledger.connect().execute(
        "SELECT rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname = %s",
        (pg_ledger.writer,)).fetchone()
    assert row == (False, False)
    assert store.append(make_events(1, start=2)) == [3]
    assert store.size() == 3
    check_chain(list(store.scan()))
    assert store.get_evidence(store.put_evidence(b"kept")) == b"kept"


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ({"schema": "Bad-Name"}, "identifier"),
        ({"writer_role": "same_role", "reader_role": "same_role"}, "four different names"),
    ],
)
def test_init_schema_rejects_bad_names(pg_admin_dsn: str, names: dict[str, str],
                                       message: str) -> None:
    with pytest.raises(InputError, match=message):
        PostgresStore.init_schema(pg_admin_dsn, **names)


def test_refuses_to_open_as_a_superuser(pg_ledger: PgLedger) -> None:
    with pytest.raises(InputError, match="never runs as a superuser"):
        PostgresStore.open(pg_ledger.admin_dsn, schema=pg_ledger.schema)


def test_refuses_a_role_that_can_write_tables_directly(pg_ledger: PgLedger) -> None:
    pg_ledger.connect().execute(
        f"GRANT INSERT ON {pg_ledger.schema}.events TO {pg_ledger.reader}")
    with pytest.raises(InputError, match="can change ledger tables directly"):
        PostgresStore.open(pg_ledger.reader_dsn, schema=pg_ledger.schema)


def test_refuses_a_missing_schema(pg_ledger: PgLedger) -> None:
    with pytest.raises(InputError, match="no ledger schema"):
        PostgresStore.open(pg_ledger.writer_dsn, schema="no_such_ledger_schema")


@pytest.mark.parametrize("call", ["open", "init_schema"])
def test_unreachable_server_is_an_external_error_on_one_line(call: str) -> None:
    dsn = "postgresql://someone:secretpassword@127.0.0.1:1/test"
    attempt = PostgresStore.open if call == "open" else PostgresStore.init_schema
    with pytest.raises(ExternalError) as caught:
        attempt(dsn)
    message = caught.value.message
    assert "\n" not in message
    assert "127.0.0.1:1" in message
    assert "secretpassword" not in message


# -- the triggers stop even the owner and a superuser (1.17) --------------------------------------
@pytest.fixture
def filled(pg_ledger: PgLedger) -> PgLedger:
    store = pg_ledger.open(policy=fixed_policy(generate_signer("ledger.test.example")))
    store.append(make_events(3), force_checkpoint=True)
    store.put_evidence(b"evidence")
    return pg_ledger


@pytest.mark.parametrize("who", ["superuser", "owner", "superuser as replica"])
@pytest.mark.parametrize("table", ["events", "evidence", "checkpoints"])
@pytest.mark.parametrize("op", ["update", "delete", "truncate"])
def test_triggers_refuse_changes_by_owner_and_superuser(filled: PgLedger, who: str, table: str,
                                                        op: str) -> None:
    conn = filled.connect()
    if who == "owner":
        conn.execute(f"SET ROLE {filled.owner}")
    if who == "superuser as replica":  # would switch off ordinary triggers: ours are ALWAYS
        conn.execute("SET session_replication_role = replica")
    with pytest.raises(pgerrors.RaiseException, match="append-only"):
        conn.execute(_statement(op, table, filled.schema))
    counts = filled.connect(filled.reader).execute(
        f"SELECT (SELECT count(*) FROM {filled.schema}.events),"
        f" (SELECT count(*) FROM {filled.schema}.evidence),"
        f" (SELECT count(*) FROM {filled.schema}.checkpoints)").fetchone()
    assert counts == (3, 1, 1)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("DELETE FROM {s}.head", "append-only"),
        ("TRUNCATE {s}.head", "append-only"),
        ("UPDATE {s}.head SET size = size - 1", "only moves forward"),
        ("UPDATE {s}.head SET cp_size = 0", "only moves forward"),
    ],
)
def test_head_only_moves_forward(filled: PgLedger, statement: str, message: str) -> None:
    conn = filled.connect()
    conn.execute(f"SET ROLE {filled.owner}")
    with pytest.raises(pgerrors.RaiseException, match=message):
        conn.execute(statement.format(s=filled.schema))


def test_a_tampered_tail_stops_the_next_append(filled: PgLedger) -> None:
    """Someone who disables the triggers can delete; the next append notices (9.3)."""
    conn = filled.connect()
    s = filled.schema
    conn.execute(f"ALTER TABLE {s}.events DISABLE TRIGGER append_only")
    conn.execute(f"DELETE FROM {s}.events WHERE seq = 3")
    conn.execute(f"ALTER TABLE {s}.events ENABLE ALWAYS TRIGGER append_only")
    with pytest.raises(IntegrityError, match="head says 3 events but 2 are stored"):
        filled.open().append(make_events(1, start=3))


# -- ledger_append re-checks the chain whoever calls it (9.3) -------------------------------------
def _call(conn: psycopg.Connection[Any], schema: str, params: list[Any]) -> None:
    conn.execute(
        f"SELECT {schema}.ledger_append(%s::bigint[], %s::bytea[], %s::text[], %s::text[],"
        " %s::bytea[], %s, %s, %s, %s, %s::float8, %s, %s, %s)", params)


def _sealed(head: Head, events: list[NewEvent], policy: CheckpointPolicy | None = None
            ) -> list[Any]:
    batch = Sequencer(policy).seal(head, events)
    return list(PostgresStore._append_params([(batch, events)]))


def _broken(case: str, head: Head) -> list[Any]:
    """Parameters of a call after ``head`` that must be refused, broken as ``case`` says."""
    events = make_events(2, start=head.size)
    params = _sealed(head, events)
    seqs, leafs, kinds, attempts, bodies = (list(p) for p in params[:5])
    if case == "wrong prev":
        bodies[0] = events[0].body(seq=head.size + 1, prev="ab" * 32)
        leafs[0] = leaf_hash(bodies[0])
    elif case == "wrong leaf":
        leafs[1] = bytes(32)
    elif case == "gap in seq":
        seqs[1] = head.size + 3
        bodies[1] = events[1].body(seq=head.size + 3, prev=leafs[0].hex())
        leafs[1] = leaf_hash(bodies[1])
    elif case == "body seq differs":
        seqs[0] = head.size + 1
        bodies[0] = events[0].body(seq=head.size + 7, prev=head.last_leaf)
        leafs[0] = leaf_hash(bodies[0])
    elif case == "kind column lies":
        kinds[0] = "comment.added"
    elif case == "attempt column lies":
        attempts[0] = "att-other"
    elif case == "not json":
        bodies[0] = b"\xff not json"
        leafs[0] = leaf_hash(bodies[0])
    elif case == "arrays differ":
        kinds = kinds[:1]
    elif case == "head leaf wrong":
        params[6] = "cd" * 32
    elif case == "head peaks wrong":
        params[7] = b""
    elif case == "checkpoint of another size":
        params[8], params[10], params[11] = head.size + 1, head.size + 1, "note\n"
    params[:5] = [seqs, leafs, kinds, attempts, bodies]
    return params


BROKEN = {  # case: (SQLSTATE, what the refusal says)
    "wrong prev": ("23000", "is not the previous leaf"),
    "wrong leaf": ("23000", r"leaf is not SHA-256\(0x00 \|\| body\)"),
    "gap in seq": ("23000", "does not continue the log"),
    "body seq differs": ("23000", "differ from the body"),
    "kind column lies": ("23000", "differ from the body"),
    "attempt column lies": ("23000", "differ from the body"),
    "not json": ("22021", "invalid byte sequence"),
    "arrays differ": ("23000", "differ in length"),
    "head leaf wrong": ("23000", "new head does not follow"),
    "head peaks wrong": ("23000", "new head does not follow"),
    "checkpoint of another size": ("23000", "checkpoint must be of the new head"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_ledger_append_refuses_a_broken_chain(pg_ledger: PgLedger, case: str) -> None:
    store = pg_ledger.open()
    store.append(make_events(3))
    conn = pg_ledger.connect(pg_ledger.writer)
    sqlstate, message = BROKEN[case]
    with pytest.raises(psycopg.Error, match=message) as caught:
        _call(conn, pg_ledger.schema, _broken(case, stored_head(pg_ledger)))
    assert caught.value.sqlstate == sqlstate
    assert store.size() == 3
    assert store.append(make_events(1, start=3)) == [4]  # the honest writer carries on
    check_chain(list(store.scan()))


def test_ledger_append_refuses_a_replayed_call(pg_ledger: PgLedger) -> None:
    conn = pg_ledger.connect(pg_ledger.writer)
    first = _sealed(Head.empty(), make_events(2))
    _call(conn, pg_ledger.schema, first)
    _call(conn, pg_ledger.schema, _sealed(stored_head(pg_ledger), make_events(1, start=2)))
    with pytest.raises(pgerrors.SerializationFailure, match="head moved"):
        _call(conn, pg_ledger.schema, first)  # the same call again: sealed after an old head
    replay = list(first)
    replay[5], replay[6] = 3 + 2, first[6]  # claims to follow the stored head: seq check
    with pytest.raises(pgerrors.IntegrityConstraintViolation, match="does not continue"):
        _call(conn, pg_ledger.schema, replay)
    assert [seq for seq, _ in pg_ledger.open().scan()] == [1, 2, 3]


def test_a_refusal_reaches_the_caller_as_an_integrity_error(
    pg_ledger: PgLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pg_ledger.open()
    store.append(make_events(1))
    real = PostgresStore._append_params

    def corrupt(batches: Any, note: Any = None) -> tuple[Any, ...]:
        params = list(real(batches, note))
        params[1] = [bytes(32)] * len(params[1])
        return tuple(params)

    monkeypatch.setattr(PostgresStore, "_append_params", staticmethod(corrupt))
    with pytest.raises(IntegrityError, match="leaf is not SHA-256"):
        store.append(make_events(1, start=1))
    monkeypatch.undo()
    assert store.append(make_events(1, start=1)) == [2]


# -- concurrency: two processes never fork the chain (9.3) ----------------------------------------
def _writer_process(dsn: str, schema: str, key: str, worker: int, barrier: Any) -> None:
    signer = parse_private_key(key)
    store = PostgresStore.open(dsn, schema=schema, policy=fixed_policy(signer, every_events=25))
    barrier.wait(timeout=60)
    done, size = 0, 1
    while done < 200:
        batch = make_events(min(size, 200 - done), start=done, tag=f"w{worker}")
        store.append(batch)
        done += len(batch)
        size = size % 7 + 1
    store.close()


def test_two_processes_appending_concurrently_keep_one_chain(pg_ledger: PgLedger) -> None:
    signer = generate_signer("ledger.test.example")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    workers = [
        ctx.Process(target=_writer_process, args=(pg_ledger.writer_dsn, pg_ledger.schema,
                                                  signer.private_key_text(), w, barrier))
        for w in (1, 2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=180)
    assert [worker.exitcode for worker in workers] == [0, 0]
    store = pg_ledger.open()
    bodies = list(store.scan())
    assert len(bodies) == store.size() == 400
    leaves = check_chain(bodies)
    for tag in ("w1", "w2"):
        mine = [json.loads(body)["data"]["source"]["i"] for _, body in bodies
                if json.loads(body)["data"]["source"]["tag"] == tag]
        assert mine == list(range(200))
    checkpoints = store.checkpoints()
    sizes = [0] + [size for size, _ in checkpoints]
    assert all(25 <= b - a <= 31 for a, b in itertools.pairwise(sizes)), sizes  # batches <= 7
    assert sizes[-1] > 400 - 25
    check_checkpoints(checkpoints, leaves, signer)
    head = stored_head(pg_ledger)
    assert (head.size, head.last_leaf) == (400, leaves[-1].hex())


# -- evidence -----------------------------------------------------------------------------------
def test_evidence_round_trip(pg_ledger: PgLedger) -> None:
    store = pg_ledger.open()
    items = [b"", b"one", bytes(range(256)) * 4096]
    digests = [store.put_evidence(item) for item in items]
    assert store.put_evidence(b"one") == digests[1]  # content-addressed: stored once
    assert [store.get_evidence(d) for d in digests] == items
    assert list(store.evidence_digests()) == sorted(digests)
    with pytest.raises(IntegrityError, match="not stored"):
        store.get_evidence("0" * 64)


def test_damaged_evidence_is_detected(pg_ledger: PgLedger) -> None:
    store = pg_ledger.open()
    digest = store.put_evidence(b"the original measurement")
    conn = pg_ledger.connect()
    s = pg_ledger.schema
    with pytest.raises(pgerrors.RaiseException):
        conn.execute(f"UPDATE {s}.evidence SET data = 'forged'")
    conn.execute(f"ALTER TABLE {s}.evidence DISABLE TRIGGER append_only")
    conn.execute(f"UPDATE {s}.evidence SET data = 'forged' WHERE digest = %s", (digest,))
    conn.execute(f"ALTER TABLE {s}.evidence ENABLE ALWAYS TRIGGER append_only")
    with pytest.raises(IntegrityError, match="damaged"):
        store.get_evidence(digest)
