"""Shared fixtures of the ledger tests.

PostgreSQL (issue 3): the tests run against the real server on this machine, 127.0.0.1:5432 with
trust authentication, database ``test``; ``scripts/ensure-postgres.sh`` starts it and CI runs
that script first.  ``TRIZ_TEST_PG_ADMIN_DSN`` overrides the administrator's connection string.
When the server cannot be reached the tests FAIL, never skip: a guard that silently goes
untested is how an immutable log stops being one.

Each ``pg_ledger`` gets its own schema and its own three roles (random names), created with
``PostgresStore.init_schema`` and dropped again by the administrator afterwards, so runs in
parallel or one after the other never see each other's rows.  psycopg is imported lazily: the
other ledger tests do not need it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from triz_ri_smart_ai_evaluator.ledger.checkpoint import generate_signer
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy

if TYPE_CHECKING:
    from pathlib import Path

    import psycopg

    from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore

PG_ADMIN_CANDIDATES = (
    "postgresql://postgres@127.0.0.1:5432/test",
    "postgresql://root@127.0.0.1:5432/test",
)


@dataclass
class PgLedger:
    """One throw-away ledger schema, its roles, and connections to it as each of them."""

    admin_dsn: str
    schema: str
    owner: str
    writer: str
    reader: str
    _stores: list[PostgresStore] = field(default_factory=list)
    _conns: list[psycopg.Connection[Any]] = field(default_factory=list)

    @property
    def names(self) -> dict[str, str]:
        """Keyword arguments naming this ledger for ``PostgresStore.init_schema``."""
        return {"schema": self.schema, "owner_role": self.owner, "writer_role": self.writer,
                "reader_role": self.reader}

    def dsn(self, role: str) -> str:
        """The administrator's connection string with another role (trust authentication)."""
        from psycopg.conninfo import make_conninfo

        return make_conninfo(self.admin_dsn, user=role)

    @property
    def writer_dsn(self) -> str:
        return self.dsn(self.writer)

    @property
    def reader_dsn(self) -> str:
        return self.dsn(self.reader)

    def open(self, *, policy: CheckpointPolicy | None = None, role: str | None = None
             ) -> PostgresStore:
        """A store on this ledger as the writer (or ``role``), closed after the test."""
        from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore

        store = PostgresStore.open(self.dsn(role or self.writer), policy=policy,
                                   schema=self.schema)
        self._stores.append(store)
        return store

    def connect(self, role: str | None = None) -> psycopg.Connection[Any]:
        """An autocommit connection as ``role`` (default: the administrator), closed after."""
        import psycopg

        conn = psycopg.connect(self.dsn(role) if role else self.admin_dsn, autocommit=True)
        self._conns.append(conn)
        return conn

    def close_all(self) -> None:
        for store in self._stores:
            store.close()
        for conn in self._conns:
            conn.close()


def superuser_dsn() -> tuple[str | None, list[str]]:
    """A superuser connection string for the local server (TRIZ_TEST_PG_ADMIN_DSN first), or
    None with what each candidate answered.  The benchmarks use it too."""
    import psycopg

    env = os.environ.get("TRIZ_TEST_PG_ADMIN_DSN")
    problems = []
    for dsn in (env,) if env else PG_ADMIN_CANDIDATES:
        try:
            with psycopg.connect(dsn, connect_timeout=5) as conn:
                row = conn.execute(
                    "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                ).fetchone()
        except psycopg.Error as e:
            problems.append(f"{dsn}: {' '.join(str(e).split())}")
            continue
        if row and row[0]:
            return dsn, problems
        problems.append(f"{dsn}: not a superuser")
    return None, problems


@pytest.fixture(scope="session")
def pg_admin_dsn() -> str:
    """A superuser connection string for the local test server; fails the test if none works."""
    dsn, problems = superuser_dsn()
    if dsn is None:
        pytest.fail(
            "PostgreSQL is not reachable as a superuser at 127.0.0.1:5432/test with trust "
            "authentication (" + "; ".join(problems) + "). Start it with "
            "`bash scripts/ensure-postgres.sh` (CI runs it before the tests) or set "
            "TRIZ_TEST_PG_ADMIN_DSN.",
            pytrace=False,
        )
    return dsn


def drop_pg_ledger(admin_dsn: str, schema: str, roles: tuple[str, ...]) -> None:
    """Drop a test ledger's schema and roles as the administrator (idempotent)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        for role in roles:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if exists:
                conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture
def pg_ledger(pg_admin_dsn: str) -> Iterator[PgLedger]:
    """A fresh, initialised ledger schema with its own owner, writer and reader roles."""
    from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore

    base = f"t_ledger_{secrets.token_hex(4)}"
    ledger = PgLedger(pg_admin_dsn, base, f"{base}_owner", f"{base}_writer", f"{base}_reader")
    try:
        PostgresStore.init_schema(pg_admin_dsn, **ledger.names)
        yield ledger
    finally:
        ledger.close_all()
        drop_pg_ledger(pg_admin_dsn, ledger.schema, (ledger.owner, ledger.writer, ledger.reader))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    """A signed SQLite ledger in the test's folder (a test module may define its own)."""
    signer = generate_signer("ledger.test/log")
    s = SqliteStore.open(tmp_path / "ledger.db", policy=CheckpointPolicy(signer, signer.name))
    yield s
    s.close()
