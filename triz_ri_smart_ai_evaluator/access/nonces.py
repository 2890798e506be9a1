"""Seen nonces and idempotent answers of signed trusted requests, kept in the ledger's database
(issue 11 item 2: a request captured before a restart must not be accepted after it).

One table ``nonces`` beside the ledger, keyed by (principal, nonce): a second use of a key
fails atomically on the primary key.  A row carries when it may be forgotten (``expires``: the
request's timestamp plus the 5-minute window, after which the timestamp check refuses it
anyway), and for an idempotent append (key ``request-id:<id>``) the digest of the signed request
and the first answer.

Why the ledger's own connection and not one of our own: the service runs every ledger job, the
authentication of a trusted request included, on one thread inside a group commit that holds
SQLite's write lock (``BEGIN IMMEDIATE``).  A second connection to the same file would wait on
that lock held by its own thread.  Through the ledger's connection the nonce and the answer are
part of the group's transaction: durable exactly when the events they guard are, and no extra
fsync.  On PostgreSQL the writer role has no table privileges; it calls the two SECURITY
DEFINER functions ``ledger_use_nonce`` and ``ledger_nonce_answer`` (postgres_schema.sql).

Any other store (the in-memory ones of the tests) gets a book in memory.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from typing import Any, Protocol

from ..errors import ExternalError
from ..ledger.postgres_store import PostgresStore
from ..ledger.sqlite_store import SqliteStore

#: expired rows are deleted at most this often (a DELETE on an index, in the same transaction)
PURGE_SECONDS = 60

_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS nonces (
    principal TEXT NOT NULL,
    nonce TEXT NOT NULL,
    expires INTEGER NOT NULL,
    request TEXT,
    answer BLOB,
    PRIMARY KEY (principal, nonce)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nonces_expires ON nonces (expires);
"""


class NonceBook(Protocol):
    """Used-once keys per principal.  ``now`` and ``expires`` are Unix seconds."""

    def use(self, principal: str, nonce: str, *, expires: int, now: int) -> bool:
        """Record a key; False when it is already recorded and not expired."""
        ...

    def record(self, principal: str, key: str, *, request: str, answer: bytes, expires: int,
               now: int) -> bool:
        """Record a key with the request's digest and its answer; False if already there."""
        ...

    def answer(self, principal: str, key: str, *, now: int) -> tuple[str, bytes] | None:
        """The (request digest, answer) recorded under a key, or None."""
        ...


class _Book:
    """``use`` and ``record`` over one ``_put`` (a plain key, or a key with its answer)."""

    def _put(self, principal: str, nonce: str, expires: int, now: int,
             request: str | None, answer: bytes | None) -> bool:
        raise NotImplementedError

    def use(self, principal: str, nonce: str, *, expires: int, now: int) -> bool:
        return self._put(principal, nonce, expires, now, None, None)

    def record(self, principal: str, key: str, *, request: str, answer: bytes, expires: int,
               now: int) -> bool:
        return self._put(principal, key, expires, now, request, answer)


class _Purging(_Book):
    def __init__(self) -> None:
        self._purged = 0

    def _due(self, now: int) -> bool:
        if now - self._purged < PURGE_SECONDS:
            return False
        self._purged = now
        return True


class SqliteNonces(_Purging):
    """The ``nonces`` table in the ledger's SQLite file, on the ledger's connection."""

    def __init__(self, conn: sqlite3.Connection, where: str) -> None:
        super().__init__()
        self._conn = conn
        self._where = where
        try:
            self._conn.executescript(_SQLITE_SCHEMA)
        except sqlite3.Error as e:
            raise ExternalError(f"{where}: cannot create the nonce table: {e}") from e

    def _put(self, principal: str, nonce: str, expires: int, now: int,
             request: str | None, answer: bytes | None) -> bool:
        try:
            if self._due(now):
                self._conn.execute("DELETE FROM nonces WHERE expires < ?", (now,))
            cur = self._conn.execute(
                "INSERT INTO nonces VALUES (?, ?, ?, ?, ?) ON CONFLICT (principal, nonce) "
                "DO UPDATE SET expires = excluded.expires, request = excluded.request, "
                "answer = excluded.answer WHERE nonces.expires < ?",
                (principal, nonce, expires, request, answer, now))
        except sqlite3.Error as e:
            raise ExternalError(f"{self._where}: recording a nonce failed: {e}") from e
        return cur.rowcount == 1

    def answer(self, principal: str, key: str, *, now: int) -> tuple[str, bytes] | None:
        try:
            row = self._conn.execute(
                "SELECT request, answer FROM nonces WHERE principal = ? AND nonce = ? "
                "AND expires >= ? AND answer IS NOT NULL", (principal, key, now)).fetchone()
        except sqlite3.Error as e:
            raise ExternalError(f"{self._where}: reading a nonce failed: {e}") from e
        return None if row is None else (str(row[0]), bytes(row[1]))


class PostgresNonces(_Purging):
    """The ``nonces`` table of a PostgreSQL ledger schema, through its writer functions."""

    def __init__(self, conn: Any, schema: str, where: str) -> None:
        from psycopg import sql  # noqa: PLC0415 - psycopg only for a PostgreSQL ledger

        super().__init__()
        self._conn = conn
        self._where = where
        name = sql.Identifier(schema)
        self._use = sql.SQL("SELECT {s}.ledger_use_nonce(%s, %s, %s, %s, %s, %s, %s)"
                            ).format(s=name).as_bytes(conn)
        self._read = sql.SQL("SELECT * FROM {s}.ledger_nonce_answer(%s, %s, %s)"
                             ).format(s=name).as_bytes(conn)

    def _call(self, query: bytes, params: tuple[Any, ...]) -> Any:
        import psycopg  # noqa: PLC0415

        try:
            return self._conn.execute(query, params).fetchone()
        except psycopg.Error as e:
            raise ExternalError(f"{self._where}: the nonce table: "
                                f"{str(e).strip().splitlines()[0]}") from e

    def _put(self, principal: str, nonce: str, expires: int, now: int,
             request: str | None, answer: bytes | None) -> bool:
        row = self._call(self._use, (principal, nonce, expires, now, request, answer,
                                     self._due(now)))
        return bool(row[0])

    def answer(self, principal: str, key: str, *, now: int) -> tuple[str, bytes] | None:
        row = self._call(self._read, (principal, key, now))
        return None if row is None or row[1] is None else (str(row[0]), bytes(row[1]))


class MemoryNonces(_Book):
    """A book in memory, for stores without a database (tests); lost on restart."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], tuple[int, str | None, bytes | None]] = {}
        self._lock = threading.Lock()

    def _put(self, principal: str, nonce: str, expires: int, now: int,
             request: str | None, answer: bytes | None) -> bool:
        with self._lock:
            old = self._rows.get((principal, nonce))
            if old is not None and old[0] >= now:
                return False
            self._rows[(principal, nonce)] = (expires, request, answer)
            return True

    def answer(self, principal: str, key: str, *, now: int) -> tuple[str, bytes] | None:
        with self._lock:
            row = self._rows.get((principal, key))
        if row is None or row[0] < now or row[1] is None or row[2] is None:
            return None
        return row[1], row[2]


_BOOKS: weakref.WeakKeyDictionary[Any, NonceBook] = weakref.WeakKeyDictionary()
_BOOKS_LOCK = threading.Lock()


def book_for(store: object) -> NonceBook:
    """The nonce book of a ledger store: one per store, shared by the authenticator and the
    trusted port.  Call it on the thread that uses the store.  Raises ExternalError when the
    table cannot be created or is missing (a PostgreSQL schema installed before issue 11:
    re-run the schema installation)."""
    with _BOOKS_LOCK:
        book = _BOOKS.get(store)
        if book is None:
            # The stores' connections are private to them; this module is the one other user,
            # for the reason in the module docstring.
            if isinstance(store, SqliteStore):
                book = SqliteNonces(store._conn, str(store.path))
            elif isinstance(store, PostgresStore):
                book = PostgresNonces(store._conn, store.schema, store.where)
            else:
                book = MemoryNonces()
            _BOOKS[store] = book
        return book
