"""Throw-away PostgreSQL ledgers for the benchmarks: the roles and schema are dropped again."""

from __future__ import annotations

import psycopg
from psycopg import sql


def admin_dsn() -> tuple[str | None, str]:
    """The local server's superuser connection string (as the ledger tests find it), or None
    and why not."""
    from tests.ledger.conftest import superuser_dsn  # noqa: PLC0415

    dsn, problems = superuser_dsn()
    if dsn is None:
        return None, ("no PostgreSQL superuser at 127.0.0.1:5432/test (start it with "
                      "scripts/ensure-postgres.sh): " + "; ".join(problems))
    return dsn, ""


def drop_throwaway_ledger(admin_dsn: str, names: dict[str, str]) -> None:
    """Drop a benchmark ledger's schema and its owner, writer and reader roles (idempotent).
    ``names`` is the keyword dict given to ``PostgresStore.init_schema``."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(names["schema"])))
        for key in ("owner_role", "writer_role", "reader_role"):
            role = names[key]
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
