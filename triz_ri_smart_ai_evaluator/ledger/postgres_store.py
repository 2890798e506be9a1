"""The PostgreSQL ledger backend, for scale: the same semantics as :mod:`.sqlite_store`.

The immutable log (spec 1.17, 10.4) must be one the evaluated policy cannot rewrite (9.2), kept
by a trusted component (9.3).  Here that is enforced by roles, not by the application's goodwill:

* an administrator runs :meth:`PostgresStore.init_schema` once; it creates a NOLOGIN *owner*
  role that owns the tables and functions, a LOGIN *writer* role for the application and a LOGIN
  read-only *reader* role for verification and auditors (``postgres_schema.sql``);
* the writer has no privilege on any table: it may only call SECURITY DEFINER functions, and
  ``ledger_append`` re-checks every position, leaf hash and chain link before it inserts;
* row triggers and statement-level TRUNCATE triggers refuse UPDATE, DELETE and TRUNCATE even for
  the owner and superusers, until someone deliberately disables them - which the chain, the
  Merkle tree and the witnessed checkpoints then expose (``verify``);
* :meth:`PostgresStore.open` refuses to run as a superuser, as the owner or as any role that
  can write the tables directly.

Events are sealed by the shared, pure :class:`~.store.Sequencer`, so both backends store
byte-identical bodies.  An append is one transaction under a transaction-level advisory lock,
committed with ``synchronous_commit = on``: concurrent writers in several processes are
serialised, the chain never forks, and an event is acknowledged only once it is durable.  A
store remembers the head it wrote, so an uncontended append is a single round trip; when
another writer got there first the database says so (SQLSTATE 40001) and the store re-reads the
head under the lock (see :meth:`PostgresStore.append`).

Issue 11 item 3: the events after the last checkpoint are signed by nothing yet, and an owner or
superuser can disable the guards.  So an open store also remembers the head it last wrote or
verified and checks, before it seals anything after the database's head, that the head did not
go back, that the row at the remembered size still has the remembered leaf and that rows other
writers appended since link to it; before the log key signs a checkpoint it re-walks the chain
from the last checkpoint.  A store opened later has no memory of it, so every append also
stores the log key's signature of the new head in the head row (``head.note``) and a
store opened with the key verifies the database against it before anything else: the signed
head's size, last leaf and Merkle frontier are the head table's, the rows since the last
checkpoint chain to it and the last checkpoint is the one it names.  A refusal leaves an alarm
in the database; the next start that verifies records it as a ``ledger.tamper_detected`` event.
What the store alone cannot see is a rollback of events, head and signed head together to an
earlier genuine state after the last checkpoint: the witness's cosignatures bound that loss.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ..errors import EvaluatorError, ExternalError, InputError, IntegrityError
from .events import GENESIS_PREV, Event, EventKind, NewEvent, prev_in_body
from .merkle import HASH_SIZE, MerkleAccumulator, leaf_hash
from .payloads import LedgerTamperDetected
from .store import Batch, CheckpointPolicy, Head, Sequencer, open_head, sign_head

DEFAULT_SCHEMA = "triz_ledger"
DEFAULT_OWNER = "triz_ledger_owner"
DEFAULT_WRITER = "triz_ledger_writer"
DEFAULT_READER = "triz_ledger_reader"

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_PAGE = 4096  # rows per round trip when scanning
_TO_THE_END = 2**62  # a scan's end past any log: to the end as the database answers
_QUEUED_BYTES = 8 << 20  # evidence a group queues before it sends its appends early
_TABLES = ("events", "evidence", "checkpoints", "head", "alarms")
# Every statement the store sends; {s} is the schema.  Built once per store (see __init__).
_QUERIES = {
    "head": "SELECT size, last_leaf, peaks, cp_size, cp_time FROM {s}.ledger_head()",
    # Evidence and events in one call (issue 16 item 4), answering (size, refused_state,
    # refused_message): a refusal comes back as data, undone on the server (see the schema).
    "append_evidence": "SELECT {s}.ledger_append_evidence(%b::bytea[], %b::text[],"
                       " %b::bigint[], %b::bytea[], %b::text[], %b::text[], %b::bytea[],"
                       " %b::bigint, %b::text, %b::bytea, %b::bigint, %b::float8, %b::bigint,"
                       " %b::text, %b::text)",
    # The same only if the row at the remembered size still has the remembered leaf (issue
    # 11): one indexed read in the same round trip; no row back means nothing was called.
    "append_evidence_after": "SELECT {s}.ledger_append_evidence(%b::bytea[], %b::text[],"
                             " %b::bigint[], %b::bytea[], %b::text[], %b::text[], %b::bytea[],"
                             " %b::bigint, %b::text, %b::bytea, %b::bigint, %b::float8,"
                             " %b::bigint, %b::text, %b::text)"
                             " FROM {s}.ledger_scan(%b, %b, 1) AS r"
                             " WHERE r.seq = %b AND sha256('\\x00'::bytea || r.body) = %b",
    "put_evidence": "SELECT {s}.ledger_put_evidence(%b)",
    "size": "SELECT {s}.ledger_size()",
    "scan": "SELECT seq, body FROM {s}.ledger_scan(%b, %b, %b)",
    "scan_indexed": "SELECT seq, body, kind, attempt FROM {s}.ledger_scan_indexed(%b, %b, %b)",
    "attempt": "SELECT seq, body FROM {s}.ledger_attempt_events(%b)",
    "evidence": "SELECT {s}.ledger_evidence(%b)",
    "digests": "SELECT d FROM {s}.ledger_evidence_digests(%b, %b) AS d",
    "checkpoints": "SELECT size, note FROM {s}.ledger_checkpoints()",
    "signed_head": "SELECT {s}.ledger_signed_head()",
    "sign_head": "SELECT {s}.ledger_sign_head(%b)",
    "raise_alarm": "SELECT {s}.ledger_raise_alarm(%b)",
    "take_alarms": "SELECT r FROM {s}.ledger_take_alarms() AS r",
}


def _lock_key(schema: str) -> int:
    """The advisory-lock key of one ledger schema (a signed 64-bit integer)."""
    digest = hashlib.sha256(b"triz-ri-ledger\x00" + schema.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _check_name(name: str, what: str) -> str:
    if not _NAME.fullmatch(name):
        raise InputError(f"{what} {name!r} must be a lower-case SQL identifier")
    return name


def _where(dsn: str) -> str:
    """host:port/dbname as user, for messages: never the password."""
    try:
        d = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "PostgreSQL (unparsable connection string)"
    return (f"{d.get('user', '?')}@{d.get('host', 'localhost')}:{d.get('port', 5432)}"
            f"/{d.get('dbname', '?')}")


def _one_line(e: BaseException) -> str:
    primary = getattr(getattr(e, "diag", None), "message_primary", None)
    return " ".join(str(primary or e or type(e).__name__).split())


def _error(e: psycopg.Error, what: str) -> EvaluatorError:
    """Refusals by the ledger's own checks (SQLSTATE classes 22, 23 and plain RAISE) are
    IntegrityError: never retried.  Everything else is ExternalError."""
    return _refusal(e.sqlstate or "", _one_line(e), what)


def _refusal(state: str, message: str, what: str) -> EvaluatorError:
    """:func:`_error` for a refusal the database returned as data (SQLSTATE and message)."""
    message = " ".join(message.split()) or state
    if state[:2] in ("22", "23") or state == "P0001":
        return IntegrityError(f"{what} refused by the ledger: {message}")
    return ExternalError(f"{what} failed: {message}")


class _HeadMoved(ExternalError):
    """ledger_append's "the head moved" (SQLSTATE 40001, serialization_failure): the batch
    was sealed after another head; nothing was written, seal again after the stored one."""


def _refused(row: tuple[Any, ...] | None, what: str) -> EvaluatorError | None:
    """The refusal ``ledger_append_evidence`` answered in ``row`` (its one composite column:
    size, SQLSTATE, message), or None when it appended.  Raises ExternalError for no answer."""
    if row is None or not isinstance(row[0], tuple) or len(row[0]) != 3:
        raise ExternalError(f"{what}: the ledger gave no answer to the append")
    size, state, message = row[0]
    if state is None and size is not None:
        return None
    if state == "40001":
        return _HeadMoved(f"{what}: the ledger head moved")
    return _refusal(str(state), str(message or ""), what)


def _connect(dsn: str) -> psycopg.Connection[tuple[Any, ...]]:
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=10,
                               application_name="triz-ri-ledger")
    except psycopg.Error as e:
        raise ExternalError(f"cannot connect to {_where(dsn)}: {_one_line(e)}") from e


def _pack(peaks: Sequence[bytes]) -> bytes:
    return b"".join(peaks)


def _unpack(blob: bytes) -> tuple[bytes, ...]:
    return tuple(blob[i : i + HASH_SIZE] for i in range(0, len(blob), HASH_SIZE))


def schema_sql(schema: str, *, writer_role: str, reader_role: str) -> str:
    """The DDL of one ledger schema (``postgres_schema.sql`` with its names filled in)."""
    text = resources.files(__package__).joinpath("postgres_schema.sql").read_text("utf-8")
    for key, name in (("schema", schema), ("writer", writer_role), ("reader", reader_role)):
        text = text.replace(f"@{key}@", '"' + _check_name(name, key) + '"')
    return text.replace("@lock_key@", str(_lock_key(schema)))


class PostgresStore:
    """A ledger in one PostgreSQL schema.  Open with ``PostgresStore.open(dsn)`` as the writer."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]], schema: str,
                 policy: CheckpointPolicy | None, where: str) -> None:
        self._conn = conn
        self.schema = schema
        self.where = where
        self._sequencer = Sequencer(policy)
        self._head: Head | None = None  # the head this store wrote last (see append)
        # Issue 11: the head this store last wrote or verified.  Kept after a refusal (so the
        # refusal repeats); put back to the group's start when a group rolls back.
        self._verified: Head | None = None
        self._grouped = False
        # Inside a group commit, once the append lock is held (see _lock): the head it was
        # taken at, the appends sent but not yet answered (see _settle) and the rows from the
        # head this store had verified up to its newest append, known exactly while the lock
        # is held (nobody else can append), so the group's tail reads need no round trip.
        self._locked: Head | None = None
        self._queued: list[tuple[Batch, Sequence[NewEvent]]] = []  # sealed, not yet sent
        self._queued_blobs: dict[str, bytes] = {}
        self._pending: list[tuple[psycopg.Cursor[tuple[Any, ...]], str]] = []  # sent
        self._recent: list[tuple[int, bytes]] = []
        self._alarm: str | None = None  # a refusal to leave in the database (see _refuse)
        name = sql.Identifier(schema)
        self._q = {key: sql.SQL(text).format(s=name).as_bytes(conn)
                   for key, text in _QUERIES.items()}

    # -- administration ---------------------------------------------------------------
    @classmethod
    def init_schema(
        cls, admin_dsn: str, *, schema: str = DEFAULT_SCHEMA, owner_role: str = DEFAULT_OWNER,
        writer_role: str = DEFAULT_WRITER, reader_role: str = DEFAULT_READER,
    ) -> None:
        """Create (or bring up to date) the roles, the schema and its guards.  Idempotent.

        Run once by an administrator (a superuser, or a CREATEROLE role): the application
        never gets these rights.  The writer and reader roles are created without a password;
        set one (or use certificate or peer authentication) as the deployment requires.
        Raises InputError for a bad name or an existing role or schema that does not fit,
        ExternalError when the database fails.
        """
        names = {_check_name(n, w) for n, w in ((schema, "schema"), (owner_role, "owner role"),
                                              (writer_role, "writer role"),
                                              (reader_role, "reader role"))}
        if len(names) != 4:
            raise InputError("schema, owner, writer and reader must have four different names")
        ddl = schema_sql(schema, writer_role=writer_role, reader_role=reader_role)
        ident = sql.Identifier
        with _connect(admin_dsn) as conn:
            try:
                with conn.transaction():
                    # Roles are cluster-wide: serialise concurrent runs of this set-up.
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(""),))
                    row = conn.execute("SELECT current_setting('server_encoding')").fetchone()
                    if row is None or row[0] != "UTF8":  # bodies are UTF-8 JSON, read as jsonb
                        raise InputError(f"{_where(admin_dsn)}: the ledger needs a UTF8 database")
                    for role, login in ((owner_role, False), (writer_role, True),
                                        (reader_role, True)):
                        cls._ensure_role(conn, role, login=login)
                    for role in (writer_role, reader_role):
                        row = conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')",
                                           (role, owner_role)).fetchone()
                        if row is None or row[0]:
                            raise InputError(f"role {role} must not be a member of {owner_role}")
                    row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = "
                                       "current_user").fetchone()
                    if not (row and row[0]):  # a CREATEROLE admin must be able to SET ROLE
                        conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(ident(owner_role)))
                    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {} AUTHORIZATION {}").format(
                        ident(schema), ident(owner_role)))
                    row = conn.execute("SELECT nspowner::regrole::text FROM pg_namespace "
                                       "WHERE nspname = %s", (schema,)).fetchone()
                    if row is None or row[0] != owner_role:
                        raise InputError(f"schema {schema} exists and is not owned by {owner_role}")
                    # Everything else is created by, and so owned by, the owner role.
                    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(ident(owner_role)))
                    conn.execute(ddl.encode())
                    conn.execute("RESET ROLE")
            except psycopg.Error as e:
                raise ExternalError(f"ledger schema set-up on {_where(admin_dsn)} failed: "
                                    f"{_one_line(e)}") from e

    @staticmethod
    def _ensure_role(conn: psycopg.Connection[tuple[Any, ...]], role: str, *, login: bool) -> None:
        row = conn.execute(
            "SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls,"
            " rolcanlogin FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        attrs = ("LOGIN" if login else "NOLOGIN") + (
            " NOSUPERUSER NOCREATEROLE NOCREATEDB NOREPLICATION NOBYPASSRLS")
        if row is None:
            conn.execute(sql.SQL("CREATE ROLE {} " + attrs).format(sql.Identifier(role)))
        elif row[0] or row[1] != login:
            conn.execute(sql.SQL("ALTER ROLE {} " + attrs).format(sql.Identifier(role)))

    # -- opening ----------------------------------------------------------------------
    @classmethod
    def open(
        cls, dsn: str, *, policy: CheckpointPolicy | None = None, schema: str = DEFAULT_SCHEMA,
        unsafe_resign_head: bool = False,
    ) -> PostgresStore:
        """Connect as the application's writer (or the reader, for reading only).  With a
        ``policy`` (the log key) the database is first verified against the signed head and an
        alarm left by an earlier refusal is recorded (issue 11).  ``unsafe_resign_head`` signs
        whatever the database now holds instead: only for a ledger written before signed
        heads, by a key holder who takes it as it is.

        Raises IntegrityError when the tail does not match the signed head; InputError when
        the role is a superuser, owns the ledger or can write its tables directly (9.2: the
        application never holds those rights) or when there is no ledger schema; ExternalError
        when the server cannot be reached.
        """
        _check_name(schema, "schema")
        where = _where(dsn)
        conn = _connect(dsn)
        try:
            row = conn.execute(
                "SELECT r.rolsuper OR r.rolbypassrls, n.oid IS NOT NULL,"
                " coalesce(pg_has_role(current_user, n.nspowner, 'MEMBER'), false),"
                " coalesce(bool_or(has_table_privilege(c.oid, 'INSERT,UPDATE,DELETE,TRUNCATE')),"
                " false), current_user::text"
                " FROM pg_roles AS r LEFT JOIN pg_namespace AS n ON n.nspname = %s"
                " LEFT JOIN pg_class AS c ON c.relnamespace = n.oid AND c.relname = ANY(%s)"
                " WHERE r.rolname = current_user GROUP BY 1, 2, 3, 5",
                (schema, list(_TABLES)),
            ).fetchone()
            assert row is not None
            superuser, exists, owner, writes, user = row
            if superuser:
                raise InputError(f"{where}: refusing to run the ledger as superuser {user}: the "
                                 "application never runs as a superuser (spec 9.2)")
            if not exists:
                raise InputError(f"{where}: no ledger schema {schema}; an administrator runs "
                                 "PostgresStore.init_schema first")
            if owner or writes:
                raise InputError(f"{where}: role {user} can change ledger tables directly; the "
                                 "application must connect as the writer role (spec 9.2)")
            found = conn.execute("SELECT to_regproc(%s) IS NOT NULL",
                                 (f"{schema}.ledger_append_evidence",)).fetchone()
            if not (found and found[0]):
                raise InputError(f"{where}: ledger schema {schema} predates "
                                 "ledger_append_evidence; an administrator runs "
                                 "PostgresStore.init_schema again to bring it up to date")
            # Durability is a property of the session too: acknowledge only flushed commits.
            conn.execute("SET synchronous_commit = on")
        except psycopg.Error as e:
            conn.close()
            raise ExternalError(f"{where}: opening the ledger failed: {_one_line(e)}") from e
        except BaseException:
            conn.close()
            raise
        store = cls(conn, schema, policy, where)
        try:
            store._sequencer.verify_signer(store.checkpoints(), where)
            if policy is not None:
                store._start(resign=unsafe_resign_head)
        except BaseException:
            conn.close()
            raise
        return store

    # -- the signed head (issue 11) -----------------------------------------------------
    def _start(self, *, resign: bool) -> None:
        """Verify the database against the log key's signed head, then record the alarms an
        earlier refusal left.  Raises IntegrityError."""
        policy = self._sequencer.policy
        assert policy is not None
        try:
            try:
                with self._conn.transaction():
                    db = self._locked_head()
                    if resign:
                        self._walk(0, None, db.size, db.last_leaf)
                        self._execute("sign_head", (sign_head(db, policy.signer, policy.origin),))
                    self._verified = self._signed_head(db, policy)
            finally:
                self._flush_alarm()
            with self.group():
                alarms = [str(r[0]) for r in self._rows("take_alarms", (), "reading alarms")]
                if alarms:
                    self.append([NewEvent.make(
                        EventKind.LEDGER_TAMPER_DETECTED,
                        LedgerTamperDetected(refused="; ".join(alarms)[:2000],
                                             size=self._verified.size),
                        actor="ledger", at=datetime.now(UTC))], force_checkpoint=True)
        except psycopg.Error as e:
            raise _error(e, f"{self.where}: opening the ledger") from e

    def _signed_head(self, db: Head, policy: CheckpointPolicy) -> Head:
        """``db`` (read under the append lock) checked against the signed head: the same size,
        last leaf and frontier, the rows since the last checkpoint chaining to it, and the
        last checkpoint the one it names.  Raises IntegrityError."""
        note = self._value("signed_head", (), "reading the signed head")
        last_cp = max((size for size, _ in self.checkpoints()), default=0)
        if note is None:
            if last_cp:
                raise self._refuse("the signed head is missing")
            # Never signed (written without the key): nothing to protect yet.
            self._walk(0, None, db.size, db.last_leaf)
            return db
        try:
            head = open_head(str(note), policy.signer.verifier, policy.origin)
        except IntegrityError as e:
            raise self._refuse(f"the signed head does not verify ({e.diagnostics()})") from e
        if (db.size, db.last_leaf, db.peaks) != (head.size, head.last_leaf, head.peaks):
            raise self._refuse(f"the ledger head ({db.size} events) is not the signed head "
                               f"({head.size} events)")
        if last_cp != head.last_checkpoint_size:
            raise self._refuse(f"the last checkpoint is at {last_cp} events, the signed head "
                               f"names one at {head.last_checkpoint_size}")
        self._walk(min(head.last_checkpoint_size, head.size), None, head.size, head.last_leaf)
        return head

    def _locked_head(self) -> Head:
        """The database's head, read after taking the append lock (inside a transaction)."""
        row = self._conn.cursor(binary=True).execute(self._q["head"]).fetchone()
        if row is None:
            raise IntegrityError(f"{self.where}: ledger {self.schema} has no head")
        return self._head_from(row)

    @staticmethod
    def _head_from(row: tuple[Any, ...]) -> Head:
        return Head(int(row[0]), str(row[1]), _unpack(bytes(row[2])), int(row[3]),
                    float(row[4]))

    def _execute(self, query: str, params: Sequence[Any]) -> None:
        self._flush()
        self._conn.cursor(binary=True).execute(self._q[query], params)

    def _flush_alarm(self) -> None:
        """Leave the reason of a refusal in the database, outside any transaction (so that the
        rollback of the refused one keeps it).  Best effort: the refusal stands regardless."""
        if self._alarm is None or self._grouped:
            return
        reason, self._alarm = self._alarm, None
        with contextlib.suppress(psycopg.Error):
            self._execute("raise_alarm", (f"{datetime.now(UTC).isoformat()} {reason}",))

    def _note_for(self, head: Head) -> str | None:
        """The log key's signature of ``head``, stored by the append that reaches it (inside
        a group too: the note rides in the head row's own UPDATE, cheaper than a statement of
        its own at the group's end)."""
        policy = self._sequencer.policy
        if policy is None:
            return None
        return sign_head(head, policy.signer, policy.origin)

    # -- writing ----------------------------------------------------------------------
    def append(self, events: Sequence[NewEvent], *, force_checkpoint: bool = False) -> list[int]:
        """Append ``events`` in one durable transaction; return their positions (see
        :meth:`append_with_evidence`, which this is without evidence)."""
        return self.append_with_evidence(events, (), force_checkpoint=force_checkpoint)

    def append_with_evidence(self, events: Sequence[NewEvent], evidence: Sequence[bytes], *,
                             force_checkpoint: bool = False) -> list[int]:
        """Store ``evidence`` and append ``events`` in one durable transaction; return their
        positions.

        Fast path: seal after the head this store wrote last and send one
        ``ledger_append_evidence`` call (one round trip, inside a group commit too: the
        function undoes a refused batch itself and answers the refusal as data, so no
        savepoint is sent around it).  It stores the blobs, checking each digest, and calls
        ``ledger_append``, which takes the append lock and refuses, with a retryable SQLSTATE
        40001, a batch sealed after any head but the stored one, so a stale head costs a
        retry, never a fork.  Slow path (first append, or another writer moved the head):
        ``ledger_head()`` takes the lock inside a transaction, so the head cannot move before
        the call runs.  Either way the database re-checks the chain itself (9.3).  Raises
        IntegrityError when the database refuses the batch (then neither the blobs nor the
        events are kept: spec 10.4), ExternalError when it fails.
        """
        blobs = {hashlib.sha256(data).hexdigest(): data for data in evidence}
        if self._grouped:
            return self._append_grouped(events, blobs, force_checkpoint)
        head, self._head = self._head, None
        try:
            return self._append(head, events, blobs, force_checkpoint)
        finally:
            self._flush_alarm()

    def _append(self, head: Head | None, events: Sequence[NewEvent], blobs: dict[str, bytes],
                force_checkpoint: bool) -> list[int]:
        what = f"{self.where}: append"
        try:
            if head is not None:
                batch = self._sequencer.seal(head, events, force_checkpoint=force_checkpoint)
                if batch.checkpoint is not None:
                    head = None  # sign only under the lock, after re-walking the tail
                else:
                    head = self._append_after(head, batch, events, blobs)
            if head is None:
                with self._conn.transaction():
                    head = self._checked_head(self._locked_head())
                    batch = self._sequencer.seal(head, events, force_checkpoint=force_checkpoint)
                    if batch.checkpoint is not None and head.size > head.last_checkpoint_size:
                        # Before the log key signs a root over them, the rows since the last
                        # checkpoint must still chain to the head (once per checkpoint).
                        self._walk(head.last_checkpoint_size, None, head.size, head.last_leaf)
                    params = self._evidence_params(blobs) + self._append_params(
                        [(batch, events)], self._note_for(batch.head))
                    row = self._conn.execute(self._q["append_evidence"], params,
                                             binary=True).fetchone()
                    refused = _refused(row, what)
                    if refused is not None:  # under the lock the head cannot have moved
                        raise refused
        except psycopg.Error as e:
            raise _error(e, what) from e
        self._head = self._verified = batch.head
        return [e.seq for e in batch.events]

    def _append_grouped(self, events: Sequence[NewEvent], blobs: dict[str, bytes],
                        force_checkpoint: bool) -> list[int]:
        """An append inside a group commit, sealed after the head the group holds the append
        lock on.  It is queued, not sent: the group's queued appends go to the database as ONE
        ``ledger_append_evidence`` call (:meth:`_flush`) before the next statement of the
        group, at a checkpoint, or at the group's end, without waiting for the answer
        (psycopg pipeline mode); every answer is checked before the group commits
        (:meth:`_settle`), and one refusal fails the whole group.  So a group of n
        submissions costs the server one call, and this thread one head signature, not n.
        The positions returned are final once the group has committed."""
        what = f"{self.where}: append"
        try:
            head = self._lock()
            batch = self._sequencer.seal(head, events, force_checkpoint=force_checkpoint)
            if batch.checkpoint is not None and head.size > head.last_checkpoint_size:
                # As outside a group: before the log key signs a root over them, the rows
                # since the last checkpoint must still chain to the head.  The appends queued
                # so far are sent and answered first, so that a refused one is reported as
                # itself, not as a missing row.
                self._settle()
                self._walk(head.last_checkpoint_size, None, head.size, head.last_leaf)
        except psycopg.Error as e:
            raise _error(e, what) from e
        self._queued.append((batch, events))
        self._queued_blobs.update(blobs)
        self._head = self._verified = batch.head
        self._recent.extend((e.seq, e.body) for e in batch.events)
        if batch.checkpoint is not None or (
                sum(map(len, self._queued_blobs.values())) > _QUEUED_BYTES):
            self._flush()  # a checkpoint is of the head a call ends at
        return [e.seq for e in batch.events]

    def _flush(self) -> None:
        """Send the queued appends as one call, without waiting for its answer."""
        if not self._queued:
            return
        queued, self._queued = self._queued, []
        blobs, self._queued_blobs = self._queued_blobs, {}
        what = f"{self.where}: append"
        try:
            cursor = self._conn.cursor(binary=True)
            cursor.execute(self._q["append_evidence"], self._evidence_params(blobs)
                           + self._append_params(queued, self._note_for(queued[-1][0].head)))
        except psycopg.Error as e:
            raise _error(e, what) from e
        self._pending.append((cursor, what))

    def _lock(self) -> Head:
        """Inside a group: take the append lock (once per group) and return the head the
        next append follows.  The head read under the lock is checked like the slow path's
        (:meth:`_checked_head`); the rows since the head this store last verified come back
        in the same round trip and are kept in ``_recent``.  Raises IntegrityError."""
        if self._locked is not None:
            assert self._head is not None
            return self._head
        mine = self._verified
        if mine is None:  # a store's first group: walk from the last checkpoint, as outside
            head = self._checked_head(self._locked_head())
            self._recent = []
        else:
            heads = self._conn.cursor(binary=True)
            heads.execute(self._q["head"])
            tail = self._conn.cursor(binary=True)
            tail.execute(self._q["scan"], (max(mine.size, 1), _TO_THE_END, _PAGE))
            row = heads.fetchone()  # the two statements answer in one round trip
            if row is None:
                raise IntegrityError(f"{self.where}: ledger {self.schema} has no head")
            db = self._head_from(row)
            rows = [(int(seq), bytes(body)) for seq, body in tail.fetchall()]
            complete = len(rows) < _PAGE  # under the lock these are the rows to its head
            head = self._checked_head(db, rows if complete else None)
            self._recent = [r for r in rows if r[0] >= mine.size] if complete else []
            if mine.size == 0:
                self._recent = []
        self._locked = self._head = self._verified = head
        return head

    def _settle(self) -> None:
        """Check the answer of every append sent in this group (one round trip for all of
        them).  Raises the first refusal: the group then rolls back whole."""
        self._flush()
        pending, self._pending = self._pending, []
        for cursor, what in pending:
            refused = _refused(cursor.fetchone(), what)
            if refused is not None:
                raise refused

    def _append_after(self, head: Head, batch: Batch, events: Sequence[NewEvent],
                      blobs: dict[str, bytes]) -> Head | None:
        """The fast path: one round trip that stores and appends only if the database still
        ends at ``head`` and its last row still has ``head``'s leaf.  None when it did not
        append (the head moved, or the tail check found another row: the slow path re-reads
        and checks it).  Raises IntegrityError or ExternalError for any other refusal."""
        params = self._evidence_params(blobs) + self._append_params(
            [(batch, events)], self._note_for(batch.head))
        if head.size:
            query = "append_evidence_after"
            params += (head.size, head.size, head.size, bytes.fromhex(head.last_leaf))
        else:
            query = "append_evidence"
        row = self._conn.execute(self._q[query], params, binary=True).fetchone()
        if row is None:
            return None
        refused = _refused(row, f"{self.where}: append")
        if refused is None:
            return head
        if isinstance(refused, _HeadMoved):
            return None
        raise refused

    def _refuse(self, message: str) -> IntegrityError:
        """An IntegrityError for a tail that does not match; the reason is left in the
        database once the refused transaction has ended (:meth:`_flush_alarm`)."""
        self._alarm = message
        return IntegrityError(f"{self.where}: {message}; refusing to append or sign (someone "
                              f"with write access to {self.schema} changed the tail)")

    def _checked_head(self, db: Head, rows: list[tuple[int, bytes]] | None = None) -> Head:
        """``db``, the head read under the append lock, checked against the head this store
        last wrote or verified (issue 11): it did not go back, the remembered last row is
        unchanged and the rows since link to it (only those are read).  On a store's first
        append, the tail since the last checkpoint must chain to ``db``.  Raises
        IntegrityError naming what changed.  ``rows``: the rows from the remembered head's
        (or 1) to the end, read under the lock, instead of reading them here."""
        mine = self._verified
        if mine is None:
            self._walk(min(db.last_checkpoint_size, db.size), None, db.size, db.last_leaf)
            return db
        if db.size < mine.size:
            raise self._refuse(f"the ledger head went back from {mine.size} to {db.size} events")
        leaves = self._walk(mine.size, mine.last_leaf, db.size, db.last_leaf, rows)
        acc = MerkleAccumulator.from_state(mine.size, mine.peaks)
        for leaf in leaves:
            acc.append(leaf)
        if acc.peaks != db.peaks:
            raise self._refuse(f"the Merkle frontier in the head at {db.size} events does not "
                               "follow the events")
        if db.last_checkpoint_size < mine.last_checkpoint_size:
            raise self._refuse(f"the head's last checkpoint went back from "
                               f"{mine.last_checkpoint_size} to {db.last_checkpoint_size}")
        return db

    def _walk(self, first: int, first_leaf: str | None, last: int, last_leaf: str,
              rows: list[tuple[int, bytes]] | None = None) -> list[bytes]:
        """Rows ``first..last`` are contiguous, each links to the one before, row ``first``
        has ``first_leaf`` (when given) and row ``last`` has ``last_leaf``: by the chain that
        pins every row in between.  Returns the leaves of rows ``first+1..last``.  Raises
        IntegrityError."""
        leaves: list[bytes] = []
        if last == 0:
            if last_leaf != GENESIS_PREV:
                raise self._refuse("the empty ledger's head names a last event")
            return leaves
        prev: str | None = GENESIS_PREV if first == 0 else None
        expected = max(first, 1)
        for seq, body in self._scan_db(expected, last) if rows is None else rows:
            if seq > last:
                break
            if seq != expected:
                raise self._refuse(f"event {expected} is missing")
            leaf = leaf_hash(body)
            if seq == first and first_leaf is not None and leaf.hex() != first_leaf:
                raise self._refuse(f"event {seq} differs from the one this store "
                                   "wrote or verified")
            if prev is not None and prev_in_body(body) != prev:
                raise self._refuse(f"event {seq} does not link to event {seq - 1}")
            if seq > first:
                leaves.append(leaf)
            prev, expected = leaf.hex(), seq + 1
        if expected != last + 1:
            raise self._refuse(f"the ledger head says {last} events but {expected - 1} are "
                               "stored")
        if prev != last_leaf:
            raise self._refuse(f"event {last} is not the last event the ledger head names")
        return leaves

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """Group commit: every append and evidence write inside is part of ONE transaction,
        committed when the block ends or rolled back whole if it raises; each append inside is
        a savepoint.  Nothing inside is durable or visible to others before the end of the
        block.  The append lock is held from the first append to the end, so keep groups
        short.  Nests.  Raises ExternalError or IntegrityError like append."""
        if self._grouped:
            yield
            return
        self._grouped = True
        start = self._verified
        try:
            with self._conn.pipeline(), self._conn.transaction():
                yield
                self._settle()
        except psycopg.Error as e:
            self._head = None  # what this store wrote last may not have been committed
            self._verified = start
            raise _error(e, f"{self.where}: group commit") from e
        except BaseException:
            self._head, self._verified = None, start
            raise
        finally:
            self._grouped = False
            self._locked, self._pending, self._recent = None, [], []
            self._queued, self._queued_blobs = [], {}
            self._flush_alarm()

    @staticmethod
    def _evidence_params(blobs: dict[str, bytes]) -> tuple[list[bytes], list[str]]:
        """The first two arguments of ``ledger_append_evidence``: the blobs, their digests."""
        return list(blobs.values()), list(blobs)

    @staticmethod
    def _append_params(batches: Sequence[tuple[Batch, Sequence[NewEvent]]],
                       note: str | None = None) -> tuple[Any, ...]:
        """The arguments of ``ledger_append`` for consecutive ``batches`` (each sealed after
        the one before; only the last may carry a checkpoint); ``note`` is the signed head
        of the last."""
        h, cp = batches[-1][0].head, batches[-1][0].checkpoint
        sealed = [e for batch, _ in batches for e in batch.events]
        new = [n for _, events in batches for n in events]
        return (
            [e.seq for e in sealed], [e.leaf for e in sealed],
            [n.kind for n in new], [n.attempt for n in new],
            [e.body for e in sealed],
            h.size, h.last_leaf, _pack(h.peaks), h.last_checkpoint_size,
            h.last_checkpoint_time, cp[0] if cp else None, cp[1] if cp else None, note,
        )

    def put_evidence(self, data: bytes) -> str:
        """Store content-addressed evidence; return its SHA-256 hex digest (computed by the
        database and checked here)."""
        digest = hashlib.sha256(data).hexdigest()
        stored = self._value("put_evidence", (data,), "storing evidence")
        if stored != digest:
            raise IntegrityError(f"{self.where}: the ledger stored evidence under {stored!r}")
        return digest

    # -- reading ----------------------------------------------------------------------
    def _rows(self, query: str, params: Sequence[Any], what: str) -> list[tuple[Any, ...]]:
        self._flush()  # in a group, the database answers after the appends queued before
        try:
            return self._conn.cursor(binary=True).execute(self._q[query], params).fetchall()
        except psycopg.Error as e:
            raise _error(e, f"{self.where}: {what}") from e

    def _value(self, query: str, params: Sequence[Any], what: str) -> Any:
        rows = self._rows(query, params, what)
        return rows[0][0] if rows else None

    def size(self) -> int:
        if self._locked is not None and self._head is not None:
            return self._head.size  # nobody else can append while the group holds the lock
        return int(self._value("size", (), "reading the size"))

    def scan(self, start: int = 1, end: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(seq, body) in order, from ``start`` up to ``end`` inclusive (by default the size at
        the call: the rows up to it never change, so the pages form one consistent view).

        Inside a group this takes the append lock first (:meth:`_lock`), so the log cannot
        grow but by this store's own appends until the group ends, and serves the rows it
        knows exactly (``_recent``) without a round trip."""
        if self._grouped:
            self._lock()
            recent = self._recent
            if recent and recent[0][0] <= start:
                stop = recent[-1][0] if end is None else end
                yield from recent[start - recent[0][0] : max(stop - recent[0][0] + 1, 0)]
                return
        yield from self._scan_db(start, end)

    def _scan_db(self, start: int, end: int | None) -> Iterator[tuple[int, bytes]]:
        last = self.size() if end is None else end
        nxt = start
        while nxt <= last:
            rows = self._rows("scan", (nxt, last, _PAGE), "scanning events")
            for seq, body in rows:
                yield int(seq), bytes(body)
            if len(rows) < _PAGE:
                return
            nxt = int(rows[-1][0]) + 1

    def scan_indexed(
        self, start: int = 1, end: int | None = None
    ) -> Iterator[tuple[int, bytes, str, str | None]]:
        """(seq, body, kind column, attempt column) in order, like ``scan``."""
        last = self.size() if end is None else end
        nxt = start
        while nxt <= last:
            rows = self._rows("scan_indexed", (nxt, last, _PAGE), "scanning events")
            for seq, body, kind, attempt in rows:
                yield int(seq), bytes(body), str(kind), attempt
            if len(rows) < _PAGE:
                return
            nxt = int(rows[-1][0]) + 1

    def attempt_events(self, attempt: str) -> list[Event]:
        rows = self._rows("attempt", (attempt,), "reading attempt events")
        return [Event(int(seq), bytes(body), leaf_hash(bytes(body))) for seq, body in rows]

    def get_evidence(self, digest: str) -> bytes:
        """The evidence with this digest.  Raises IntegrityError if it is missing or damaged."""
        data = self._value("evidence", (digest,), "reading evidence")
        if data is None:
            raise IntegrityError(f"evidence {digest[:16]}... is not stored")
        data = bytes(data)
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(f"evidence {digest[:16]}... does not match its digest (damaged)")
        return data

    def evidence_digests(self) -> Iterator[str]:
        after = ""
        while True:
            rows = self._rows("digests", (after, _PAGE), "listing evidence")
            for (digest,) in rows:
                yield str(digest)
            if len(rows) < _PAGE:
                return
            after = str(rows[-1][0])

    def checkpoints(self) -> list[tuple[int, str]]:
        rows = self._rows("checkpoints", (), "reading checkpoints")
        return [(int(size), str(note)) for size, note in rows]

    def close(self) -> None:
        self._conn.close()
