"""The embedded ledger backend: one SQLite file, append-only by triggers and an authorizer.

The database's protections stop accidents and the evaluated policy; they cannot stop whoever owns
the file (a trigger can be dropped).  What makes a rewrite detectable is the chain, the Merkle
tree and the checkpoints cosigned by a witness (``verify.py``), never these triggers alone.

Durability: WAL with ``synchronous=FULL``; an append is one ``BEGIN IMMEDIATE`` transaction, so
concurrent writers in several processes are serialised and the chain never forks, and an event
is acknowledged only after its commit is on disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import EvaluatorError, ExternalError, InputError, IntegrityError
from .events import GENESIS_PREV, Event, EventKind, NewEvent, prev_in_body
from .merkle import HASH_SIZE, MerkleAccumulator, leaf_hash
from .payloads import LedgerTamperDetected
from .store import Batch, CheckpointPolicy, Head, Sequencer, open_head, sign_head

_PROTECTED = ("events", "evidence", "checkpoints")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    leaf BLOB NOT NULL,
    kind TEXT NOT NULL,
    attempt TEXT,
    body BLOB NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS events_attempt ON events(attempt) WHERE attempt IS NOT NULL;
CREATE TABLE IF NOT EXISTS evidence (
    digest TEXT PRIMARY KEY,
    data BLOB NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS checkpoints (
    size INTEGER PRIMARY KEY,
    note TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size INTEGER NOT NULL,
    last_leaf TEXT NOT NULL,
    peaks BLOB NOT NULL,
    cp_size INTEGER NOT NULL,
    cp_time REAL NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS signed_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    note TEXT NOT NULL
) STRICT;
"""
#: Beside the database: why the store last refused its tail (issue 11), recorded in the ledger
#: as an alarm event on the next start whose tail verifies (after the operator restored it).
ALARM_SUFFIX = ".alarm"
_SIDE_FILES = ("", "-wal", "-shm", "-journal")



def _triggers() -> str:
    parts = []
    for table in _PROTECTED:
        for op in ("UPDATE", "DELETE"):
            parts.append(
                f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'ledger table {table} is append-only'); END;"
            )
    return "\n".join(parts)


def _authorizer(
    action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None
) -> int:
    """Refuse, on the writer's own connection, anything but reading and appending."""
    if action in (sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE) and arg1 in _PROTECTED:
        return sqlite3.SQLITE_DENY
    if action in (
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_DROP_TRIGGER,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_ALTER_TABLE,
        sqlite3.SQLITE_DROP_VIEW,
    ):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and arg1 in ("writable_schema", "recursive_triggers"):
        return sqlite3.SQLITE_DENY if arg2 is not None else sqlite3.SQLITE_OK
    return sqlite3.SQLITE_OK


def _chmod_private(path: Path) -> None:
    """Mode 0600 for the database and the files SQLite keeps beside it (issue 11)."""
    for suffix in _SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path.with_name(path.name + suffix), 0o600)


def _pack(peaks: Sequence[bytes]) -> bytes:
    return b"".join(peaks)


def _unpack(blob: bytes) -> tuple[bytes, ...]:
    return tuple(blob[i : i + HASH_SIZE] for i in range(0, len(blob), HASH_SIZE))


def _enable_wal(conn: sqlite3.Connection, *, within: float = 30.0) -> None:
    """Switch to WAL.  Writers racing to create the same file can get "database is locked"
    at once from this pragma (SQLite does not always wait on its busy handler for a journal
    mode change), so retry for a bounded time before giving up."""
    deadline = time.monotonic() + within
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


class SqliteStore:
    """A ledger in one SQLite file.  Open with ``SqliteStore.open(path)``."""

    def __init__(self, conn: sqlite3.Connection, path: Path, policy: CheckpointPolicy | None):
        self._conn = conn
        self.path = path
        self._sequencer = Sequencer(policy)
        self._grouped = False
        # Issue 11: the head this process last verified or wrote, and its signed note.  Every
        # append checks the stored log still ends there before it seals anything after it.
        self._verified: Head | None = None
        self._note: str | None = None
        self._pending: tuple[Head, str | None] | None = None
        self._group_checked = False

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        policy: CheckpointPolicy | None = None,
        create: bool = True,
        read_only: bool = False,
        unsafe_resign_head: bool = False,
    ) -> SqliteStore:
        """Open (or create) a ledger file.  With a ``policy`` (the log key) the events after the
        last checkpoint are verified against the signed head first (issue 11).

        ``unsafe_resign_head`` signs whatever the file now holds as the head instead: only for
        a ledger written before signed heads, or a key holder who deliberately takes the file
        as it is; it gives up the protection of the unwitnessed tail.

        Raises InputError when it does not exist and ``create`` is false, IntegrityError when the
        file is not a ledger database or its tail does not match the signed head.
        """
        if not path.exists() and (read_only or not create):
            raise InputError(f"{path}: no ledger database here")
        try:
            if read_only:
                conn = sqlite3.connect(
                    f"file:{path}?mode=ro", uri=True, timeout=30, isolation_level=None
                )
            else:
                # Issue 11: the database, its WAL and shared memory are the owner's alone.
                # The file is made 0600 before SQLite opens it (SQLite gives its WAL and
                # shared-memory files the database's mode), never through the process umask:
                # that is shared by every thread, and a sandbox stage being built on another
                # thread would lose its read bits (issue 16).
                os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
                os.chmod(path, 0o600)
                conn = sqlite3.connect(path, timeout=30, isolation_level=None)
                _enable_wal(conn)
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                _chmod_private(path)
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("PRAGMA recursive_triggers=ON")
                conn.executescript(_SCHEMA + _triggers())
                conn.execute(
                    "INSERT OR IGNORE INTO head VALUES (1, 0, ?, x'', 0, 0.0)", ("0" * 64,)
                )
                conn.set_authorizer(_authorizer)
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("SELECT count(*) FROM events").fetchone()
        except sqlite3.DatabaseError as e:
            raise IntegrityError(f"{path}: not a readable ledger database ({e})") from e
        except OSError as e:
            raise ExternalError(f"{path}: cannot open the ledger file ({e.strerror})") from e
        store = cls(conn, path, policy)
        try:
            store._sequencer.verify_signer(store.checkpoints(), str(path))
            if policy is not None and not read_only:
                if unsafe_resign_head:
                    store._resign_head()
                store._start()
        except BaseException:
            conn.close()
            raise
        return store

    # -- the signed head (issue 11) -----------------------------------------------------
    def _resign_head(self) -> None:
        policy = self._sequencer.policy
        assert policy is not None
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                top = self._conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
                note = sign_head(self._rebuild_head(top[0]), policy.signer, policy.origin)
                self._conn.execute("INSERT OR REPLACE INTO signed_head (id, note) VALUES (1, ?)",
                                   (note,))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as e:
            raise self._unreadable(e) from e

    def _start(self) -> None:
        """Verify the tail against the signed head now, and record the alarm left by an
        earlier refusal once the tail verifies again.  Raises IntegrityError."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._checked_head()
            finally:
                self._conn.execute("ROLLBACK")
        except sqlite3.DatabaseError as e:
            raise self._unreadable(e) from e
        alarm = self.path.with_name(self.path.name + ALARM_SUFFIX)
        try:
            reason = alarm.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as e:
            reason = f"unreadable alarm file ({e})"
        now = datetime.now(UTC)
        tamper = LedgerTamperDetected(refused=reason[:2000], size=self._verified_size())
        self.append([NewEvent.make(EventKind.LEDGER_TAMPER_DETECTED, tamper, actor="ledger",
                                   at=now)], force_checkpoint=True)
        alarm.unlink(missing_ok=True)

    def _verified_size(self) -> int:
        return self._verified.size if self._verified is not None else 0

    def _refuse(self, message: str) -> IntegrityError:
        """An IntegrityError for a tail that does not match the signed head; the reason is
        kept beside the database for the alarm event of the next good start."""
        text = f"{self.path}: {message}; refusing to append or sign (restore the database)"
        with contextlib.suppress(OSError):
            fd = os.open(self.path.with_name(self.path.name + ALARM_SUFFIX),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(datetime.now(UTC).isoformat() + " " + message + "\n")
        self._verified = self._note = None
        return IntegrityError(text)

    def _check_chain(self, first: int, first_leaf: str | None, last: int, last_leaf: str) -> None:
        """Rows ``first..last`` are contiguous, each links to the one before, row ``first``
        has ``first_leaf`` (when given) and row ``last`` has ``last_leaf``.  By the chain, that
        pins every row in between.  Raises IntegrityError."""
        if last == 0:
            return
        prev: str | None = GENESIS_PREV if first == 0 else None
        expected = max(first, 1)
        for seq, body in self.scan(expected, last):
            if seq != expected:
                raise self._refuse(f"event {expected} is missing")
            link = prev_in_body(body)
            if link is None:
                raise self._refuse(f"event {seq} is not a sealed event")
            leaf = leaf_hash(body).hex()
            if seq == first and first_leaf is not None and leaf != first_leaf:
                raise self._refuse(f"event {seq} differs from the signed head")
            if prev is not None and link != prev:
                raise self._refuse(f"event {seq} does not link to event {seq - 1}")
            prev, expected = leaf, seq + 1
        if expected != last + 1:
            raise self._refuse(f"events {expected}..{last} under the signed head are missing")
        if prev != last_leaf:
            raise self._refuse(f"event {last} differs from the signed head")

    def _checked_head(self) -> Head:
        """The head to seal after, verified against the log key's signed head: incrementally
        (one row) when this process wrote the head, the rows since when another writer did,
        the tail since the last checkpoint on the first append.  Inside the write
        transaction.  Raises IntegrityError."""
        policy = self._sequencer.policy
        top = self._conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
        row = self._conn.execute("SELECT note FROM signed_head WHERE id = 1").fetchone()
        note = None if row is None else str(row[0])
        if policy is None:
            # Without the key nothing is signed; a keyed store then refuses what was added.
            return self._head()
        if note is None:
            if self.checkpoints():
                raise self._refuse("the signed head is missing")
            # Never signed (written without the key): there is nothing to protect yet.
            return self._rebuild_head(top) if top else Head.empty()
        mine = self._verified
        if mine is not None and note == self._note:
            head = mine
            self._check_chain(head.size, head.last_leaf, head.size, head.last_leaf)
        else:
            try:
                head = open_head(note, policy.signer.verifier, policy.origin)
            except IntegrityError as e:
                raise self._refuse(f"the signed head does not verify ({e.diagnostics()})") from e
            if mine is not None:
                if head.size < mine.size:
                    raise self._refuse(f"the signed head went back from {mine.size} "
                                       f"to {head.size}")
                self._check_chain(mine.size, mine.last_leaf, head.size, head.last_leaf)
            else:
                start = min(head.last_checkpoint_size, head.size)
                self._check_chain(start, None, head.size, head.last_leaf)
        if top != head.size:
            raise self._refuse(f"the log has {top} events, the signed head {head.size}")
        self._verified, self._note = head, note
        return head

    # -- writing ----------------------------------------------------------------------
    def _head(self) -> Head:
        row = self._conn.execute(
            "SELECT size, last_leaf, peaks, cp_size, cp_time FROM head WHERE id = 1"
        ).fetchone()
        top = self._conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
        if row is None or row[0] != top:
            return self._rebuild_head(top)
        return Head(row[0], row[1], _unpack(row[2]), row[3], row[4])

    def _rebuild_head(self, top: int) -> Head:
        """The cached head disagrees with the events (never in normal operation): recompute."""
        acc = MerkleAccumulator()
        last = "0" * 64
        for _, body in self.scan():
            leaf = leaf_hash(body)
            acc.append(leaf)
            last = leaf.hex()
        cp = self._conn.execute("SELECT coalesce(max(size), 0) FROM checkpoints").fetchone()[0]
        if acc.size != top:
            raise IntegrityError(f"{self.path}: events are not contiguous (size {top})")
        return Head(acc.size, last, acc.peaks, cp, 0.0)

    def append(self, events: Sequence[NewEvent], *, force_checkpoint: bool = False) -> list[int]:
        """Append ``events`` in one durable transaction (inside :meth:`group`, one savepoint of
        the group's transaction).  Raises ExternalError on a busy or failing database,
        IntegrityError if the stored log is inconsistent."""
        return self.append_with_evidence(events, (), force_checkpoint=force_checkpoint)

    def append_with_evidence(self, events: Sequence[NewEvent], evidence: Sequence[bytes], *,
                             force_checkpoint: bool = False) -> list[int]:
        """Store ``evidence`` and append ``events`` in the same transaction (or savepoint):
        a refused append keeps no blob either (spec 10.4).  Raises like :meth:`append`."""
        conn = self._conn
        blobs = {hashlib.sha256(data).hexdigest(): data for data in evidence}
        begin, commit, undo = (
            ("SAVEPOINT append", "RELEASE append", ("ROLLBACK TO append", "RELEASE append"))
            if self._grouped else ("BEGIN IMMEDIATE", "COMMIT", ("ROLLBACK",))
        )
        try:
            conn.execute(begin)
            try:
                if blobs:
                    conn.executemany("INSERT OR IGNORE INTO evidence (digest, data) VALUES (?, ?)",
                                     blobs.items())
                batch = self._write(events, force_checkpoint)
                conn.execute(commit)
            except BaseException:
                self._pending = None
                for statement in undo:
                    conn.execute(statement)
                raise
            if self._pending is not None:
                self._verified, self._note = self._pending
                self._pending = None
        except sqlite3.IntegrityError as e:
            raise IntegrityError(f"{self.path}: append refused: {e}") from e
        except sqlite3.DatabaseError as e:
            raise self._unreadable(e) from e
        except sqlite3.Error as e:
            raise ExternalError(f"{self.path}: append failed: {e}") from e
        return [e.seq for e in batch.events]

    def _write(self, events: Sequence[NewEvent], force_checkpoint: bool) -> Batch:
        conn = self._conn
        # Inside a group the write lock is held from BEGIN IMMEDIATE to COMMIT: once the head
        # was checked in this transaction, no other writer can have moved it.
        in_group = self._grouped and self._group_checked and self._verified is not None
        head = self._verified if in_group and self._verified is not None else (
            self._checked_head())
        if self._grouped:
            self._group_checked = True
        batch = self._sequencer.seal(head, events, force_checkpoint=force_checkpoint)
        if batch.checkpoint is not None and head.size > head.last_checkpoint_size:
            # Before the log key signs a root over them, the rows since the last checkpoint
            # must still be the ones the signed head pins (once per checkpoint: cheap).
            self._check_chain(head.last_checkpoint_size, None, head.size, head.last_leaf)
        conn.executemany(
            "INSERT INTO events (seq, leaf, kind, attempt, body) VALUES (?, ?, ?, ?, ?)",
            [(e.seq, e.leaf, new.kind, new.attempt, e.body)
             for e, new in zip(batch.events, events, strict=True)],
        )
        if batch.checkpoint is not None:
            conn.execute("INSERT INTO checkpoints VALUES (?, ?)", batch.checkpoint)
        h = batch.head
        conn.execute(
            "UPDATE head SET size=?, last_leaf=?, peaks=?, cp_size=?, cp_time=? WHERE id = 1",
            (h.size, h.last_leaf, _pack(h.peaks), h.last_checkpoint_size,
             h.last_checkpoint_time),
        )
        policy = self._sequencer.policy
        if policy is not None:
            if self._grouped:
                # One signature per group commit, written just before its COMMIT.
                self._pending = (h, None)
            else:
                note = sign_head(h, policy.signer, policy.origin)
                conn.execute("INSERT OR REPLACE INTO signed_head (id, note) VALUES (1, ?)",
                             (note,))
                self._pending = (h, note)
        return batch

    def _sign_group_head(self) -> None:
        """Before a group's COMMIT: sign the head its appends reached, once."""
        policy = self._sequencer.policy
        head = self._verified
        if policy is None or head is None or self._note is not None:
            return
        note = sign_head(head, policy.signer, policy.origin)
        self._conn.execute("INSERT OR REPLACE INTO signed_head (id, note) VALUES (1, ?)",
                           (note,))
        self._note = note

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """Group commit: every append and evidence write inside is part of ONE durable
        transaction, committed (one fsync) when the block ends, or rolled back whole if it
        raises.  Each append inside is its own savepoint, so one that fails leaves nothing.
        Nothing written inside is durable, or visible to other connections, before the end of
        the block: a caller acknowledges what it wrote only after the block.  Nests (an inner
        group joins the outer one).  Raises ExternalError or IntegrityError like append."""
        if self._grouped:
            yield
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise ExternalError(f"{self.path}: cannot start a group commit: {e}") from e
        self._grouped = True
        self._group_checked = False
        try:
            yield
            self._sign_group_head()
        except BaseException:
            self._grouped = False
            self._verified = self._note = None  # what we wrote is gone: re-check next time
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise
        self._grouped = False
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as e:
            self._verified = self._note = None
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise ExternalError(f"{self.path}: group commit failed: {e}") from e

    def put_evidence(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        try:
            self._conn.execute(
                "INSERT OR IGNORE INTO evidence (digest, data) VALUES (?, ?)", (digest, data)
            )
        except sqlite3.Error as e:
            raise ExternalError(f"{self.path}: storing evidence failed: {e}") from e
        return digest

    # -- reading ----------------------------------------------------------------------
    # Every read turns a damaged file into IntegrityError naming it (issue 3: a corrupt
    # database gives a clear error, never a traceback); a busy database stays ExternalError.
    def _unreadable(self, e: sqlite3.DatabaseError) -> EvaluatorError:
        if isinstance(e, sqlite3.OperationalError) and "malformed" not in str(e):
            return ExternalError(f"{self.path}: reading the ledger failed: {e}")
        return IntegrityError(f"{self.path}: not a readable ledger database ({e})")

    def _all(self, query: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(query, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise self._unreadable(e) from e

    def _pages(self, query: str, params: Sequence[object]) -> Iterator[Any]:
        try:
            cur = self._conn.execute(query, params)
            while True:
                rows = cur.fetchmany(4096)
                if not rows:
                    return
                yield from rows
        except sqlite3.DatabaseError as e:
            raise self._unreadable(e) from e

    def size(self) -> int:
        return int(self._all("SELECT coalesce(max(seq), 0) FROM events")[0][0])

    def scan(self, start: int = 1, end: int | None = None) -> Iterator[tuple[int, bytes]]:
        return self._pages(
            "SELECT seq, body FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq",
            (start, end if end is not None else 2**62),
        )

    def scan_indexed(
        self, start: int = 1, end: int | None = None
    ) -> Iterator[tuple[int, bytes, str, str | None]]:
        return self._pages(
            "SELECT seq, body, kind, attempt FROM events WHERE seq >= ? AND seq <= ? "
            "ORDER BY seq",
            (start, end if end is not None else 2**62),
        )

    def attempt_events(self, attempt: str) -> list[Event]:
        rows = self._all("SELECT seq, body FROM events WHERE attempt = ? ORDER BY seq", (attempt,))
        return [Event(seq, body, leaf_hash(body)) for seq, body in rows]

    def get_evidence(self, digest: str) -> bytes:
        rows = self._all("SELECT data FROM evidence WHERE digest = ?", (digest,))
        if not rows:
            raise IntegrityError(f"evidence {digest[:16]}... is not stored")
        data = bytes(rows[0][0])
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(f"evidence {digest[:16]}... does not match its digest (damaged)")
        return data

    def evidence_digests(self) -> Iterator[str]:
        for (digest,) in self._pages("SELECT digest FROM evidence ORDER BY digest", ()):
            yield digest

    def checkpoints(self) -> list[tuple[int, str]]:
        return [
            (int(size), str(note))
            for size, note in self._all("SELECT size, note FROM checkpoints ORDER BY size")
        ]

    def close(self) -> None:
        self._conn.close()
