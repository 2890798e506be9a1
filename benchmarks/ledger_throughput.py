"""Ledger throughput on this machine (issue 3): appends, verification, proof sizes, PostgreSQL.

In one run it prints, next to the targets of issue 3:

* durable appends/s on SQLite in batches of 500 (signed checkpoint every 1,000 events), and raw
  SQLite inserts of the very same rows (seq, leaf, kind, attempt, body read back from the ledger
  just written) into an identical fresh schema, same PRAGMAs (WAL, synchronous=FULL), same batch
  size and one commit per batch; their ratio;
* single-event durable appends/s (one transaction and one fsync per event);
* full verification in entries/s (chain, roots at every signed checkpoint, evidence check on),
  best of 3, with the default worker count and with one worker;
* inclusion and consistency proof sizes for n = 1e3, 1e5 and N against 32 x ceil(log2 n) bytes;
* PostgreSQL single and batched appends/s through ``PostgresStore`` (a throw-away schema and
  roles on the local server, dropped afterwards).

Only the appends are timed; building the events, reading rows back and storing evidence blobs
are not.  Run:

    .venv/bin/python benchmarks/ledger_throughput.py [--n 200000] [--json] [--no-pg]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import secrets
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triz_ri_smart_ai_evaluator.ledger.checkpoint import NoteSigner, generate_signer
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import PARALLEL_FROM, check_ledger
from triz_ri_smart_ai_evaluator.ledger.merkle import (
    consistency_proof_from,
    inclusion_proof_from,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import _SCHEMA, SqliteStore, _triggers
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy

try:  # the PostgreSQL backend is optional for this script: its part is skipped without it
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from benchmarks._pg import admin_dsn, drop_throwaway_ledger
    from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore

    PG_IMPORT_ERROR = None
except ImportError as _e:
    PG_IMPORT_ERROR = str(_e)

ORIGIN = "bench.triz-eval.local/ledger"
BATCH = 500
CHECKPOINT_EVERY = 1000

TARGETS = {
    "sqlite_batched_per_s": 30_000,
    "sqlite_vs_raw_ratio": 0.8,
    "verify_entries_per_s": 300_000,
    "pg_single_per_s": 3_000,
    "pg_batched_per_s": 10_000,
}


# -- events ----------------------------------------------------------------------------------


def _digest(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def build_events(n: int, seed: int = 20261202) -> tuple[list[NewEvent], dict[str, bytes]]:
    """N realistic events (about 300-byte bodies): for each attempt, original measurements of
    indicators, checklist items and self-checks, an evidence record, indicators, the award and
    a comment.  Returns the events and the evidence blobs their ``evidence.stored`` events name.
    """
    rng = random.Random(seed)
    t0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    indicators = [("delivery", "smtp_receiver", 40), ("field_fidelity", "smtp_receiver", 160),
                  ("negative_rejection", "smtp_receiver", 40), ("regression", "regression_probe",
                                                                 4)]
    items = ["secrets_not_disclosed", "no_false_success", "within_permitted_scope",
             "end_to_end_delivery"]
    events: list[NewEvent] = []
    blobs: dict[str, bytes] = {}
    attempt = 0
    while len(events) < n:
        attempt += 1
        aid = f"att-{attempt:08d}"
        at = t0 + timedelta(seconds=attempt)
        for ind, source, den in indicators:
            events.append(NewEvent.make(
                EventKind.MEASUREMENT_RAW,
                {"what": "indicator", "id": ind, "value": f"{rng.randint(0, den)}/{den}",
                 "source": source, "evidence": [_digest(f"{aid}:{ind}")]},
                actor=source, at=at, attempt=aid))
        for item in items:
            events.append(NewEvent.make(
                EventKind.MEASUREMENT_RAW,
                {"what": "checklist", "id": item, "state": rng.choice(["passed"] * 9 + ["failed"]),
                 "degree": None, "source": "harness", "evidence": [_digest(f"{aid}:{item}")]},
                actor="harness", at=at, attempt=aid))
        blob = json.dumps({"attempt": aid, "smtp_log": rng.randbytes(96).hex()}).encode()
        digest = hashlib.sha256(blob).hexdigest()
        blobs[digest] = blob
        events.append(NewEvent.make(
            EventKind.EVIDENCE_STORED,
            {"digest": digest, "evidence_id": "smtp_export", "produced_by": "smtp_receiver",
             "media_type": "application/json"},
            actor="smtp_receiver", at=at, attempt=aid))
        events.append(NewEvent.make(
            EventKind.INDICATORS_COMPUTED,
            {"performance": {ind: f"0.{rng.randint(10**5, 10**6 - 1)}" for ind, _, _ in
                             indicators}, "quality_k": "1", "below_minimum": []},
            actor="evaluator", at=at, attempt=aid))
        events.append(NewEvent.make(
            EventKind.AWARD_DECISION,
            {"outcome": "partial", "value": f"1.{rng.randint(0, 10**8)}", "held": "0",
             "final": None, "training_use": False, "reasons": []},
            actor="evaluator", at=at, attempt=aid))
        events.append(NewEvent.make(
            EventKind.COMMENT_ADDED, {"text": "reviewed; nothing unusual in the SMTP log"},
            actor="reviewer", at=at, attempt=aid))
    del events[n:]
    named = {json.loads(e.data_bytes)["digest"] for e in events
             if e.kind == EventKind.EVIDENCE_STORED.value}
    return events, {d: b for d, b in blobs.items() if d in named}


def policy_for(signer: NoteSigner) -> CheckpointPolicy:
    return CheckpointPolicy(signer, ORIGIN, every_events=CHECKPOINT_EVERY, every_seconds=60.0,
                            clock=time.time)


# -- SQLite ----------------------------------------------------------------------------------


def sqlite_batched(path: Path, events: Sequence[NewEvent], signer: NoteSigner) -> float:
    """Seconds to append ``events`` durably in batches of BATCH (fresh ledger)."""
    store = SqliteStore.open(path, policy=policy_for(signer))
    try:
        t = time.perf_counter()
        for i in range(0, len(events), BATCH):
            store.append(events[i : i + BATCH])
        return time.perf_counter() - t
    finally:
        store.close()


def read_rows(path: Path) -> list[tuple[int, bytes, str, str | None, bytes]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT seq, leaf, kind, attempt, body FROM events ORDER BY seq")
        return [(s, bytes(leaf), k, a, bytes(b)) for s, leaf, k, a, b in rows]


def sqlite_raw(path: Path, rows: Sequence[tuple[Any, ...]]) -> float:
    """Seconds to insert the same rows with executemany, one BEGIN IMMEDIATE ... COMMIT per
    batch, into the ledger's own schema with the ledger's PRAGMAs."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA recursive_triggers=ON")
        conn.executescript(_SCHEMA + _triggers())
        conn.execute("PRAGMA busy_timeout=30000")
        sql = "INSERT INTO events (seq, leaf, kind, attempt, body) VALUES (?, ?, ?, ?, ?)"
        t = time.perf_counter()
        for i in range(0, len(rows), BATCH):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, rows[i : i + BATCH])
            conn.execute("COMMIT")
        return time.perf_counter() - t
    finally:
        conn.close()


def sqlite_single(path: Path, events: Sequence[NewEvent], signer: NoteSigner) -> float:
    store = SqliteStore.open(path, policy=policy_for(signer))
    try:
        t = time.perf_counter()
        for e in events:
            store.append([e])
        return time.perf_counter() - t
    finally:
        store.close()


def verification(path: Path, signer: NoteSigner, workers: int | None) -> tuple[float, Any]:
    """Best-of-3 seconds of a full verification, and its report."""
    best, report = math.inf, None
    for _ in range(3):
        store = SqliteStore.open(path, read_only=True)
        try:
            t = time.perf_counter()
            report = check_ledger(store, log_key=signer.verifier, check_evidence=True,
                                   workers=workers)
            best = min(best, time.perf_counter() - t)
        finally:
            store.close()
        if not report.ok:
            raise SystemExit(f"verification failed: {report.problems[:3]}")
    return best, report


# -- proofs ----------------------------------------------------------------------------------


def subtree_hasher(leaves: Sequence[bytes]) -> Callable[[int, int], bytes]:
    """MTH(D[start:end]) memoised over the RFC 6962 split, so many proofs share the work."""

    @cache
    def mth(start: int, end: int) -> bytes:
        if end - start == 1:
            return leaves[start]
        k = 1 << ((end - start - 1).bit_length() - 1)
        return node_hash(mth(start, start + k), mth(start + k, end))

    return mth


def proof_sizes(leaves: Sequence[bytes], n: int, rng: random.Random) -> dict[str, Any]:
    """Largest inclusion and consistency proof (bytes) over a sample of indices / old sizes,
    every proof checked with the RFC 9162 verifiers."""
    mth = subtree_hasher(leaves[:n])
    root = mth(0, n)
    sample = 1000 if n <= 1000 else 300
    indices = {0, n - 1, n // 2} | {rng.randrange(n) for _ in range(sample)}
    olds = {1, n - 1} | {rng.randrange(1, n) for _ in range(sample)}
    olds |= {(1 << b) + d for b in range(n.bit_length()) for d in (-1, 1)
             if 0 < (1 << b) + d < n}
    if n <= 1000:
        indices, olds = set(range(n)), set(range(1, n))
    inc_max = 0
    for i in sorted(indices):
        proof = inclusion_proof_from(mth, i, n)
        verify_inclusion(leaves[i], index=i, size=n, proof=proof, root=root)
        inc_max = max(inc_max, 32 * len(proof))
    con_max = 0
    for m in sorted(olds):
        proof = consistency_proof_from(mth, m, n)
        verify_consistency(old_size=m, new_size=n, old_root=mth(0, m), new_root=root, proof=proof)
        con_max = max(con_max, 32 * len(proof))
    bound = 32 * math.ceil(math.log2(n))
    return {"n": n, "bound_bytes": bound, "consistency_rfc6962_bound_bytes": bound + 32,
            "inclusion_max_bytes": inc_max,
            "inclusion_indices_checked": len(indices), "consistency_max_bytes": con_max,
            "consistency_old_sizes_checked": len(olds)}


# -- PostgreSQL ------------------------------------------------------------------------------


def postgres(events: Sequence[NewEvent], rows: Sequence[tuple[Any, ...]], signer: NoteSigner, *,
             single: int, batched: int) -> dict[str, Any]:
    """Single and batched appends/s through PostgresStore on a throw-away schema, and, for
    scale, raw INSERTs of the same rows (autocommit one by one; executemany per batch of BATCH
    in one transaction) into a plain table with the same columns, same server settings."""
    if PG_IMPORT_ERROR is not None:
        return {"skipped": f"PostgreSQL backend not importable ({PG_IMPORT_ERROR}); "
                           "psycopg and triz_ri_smart_ai_evaluator/ledger/postgres_store.py "
                           "are needed"}
    admin, why = admin_dsn()
    if admin is None:
        return {"skipped": why}
    with psycopg.connect(admin, connect_timeout=5) as conn:
        row = conn.execute("SELECT current_setting('server_version'), "
                           "current_setting('synchronous_commit'), "
                           "current_setting('fsync')").fetchone()
    assert row is not None
    server = {"version": row[0], "synchronous_commit": row[1], "fsync": row[2]}
    base = f"bench_ledger_{secrets.token_hex(4)}"
    names = {"schema": base, "owner_role": f"{base}_owner", "writer_role": f"{base}_writer",
             "reader_role": f"{base}_reader"}
    out: dict[str, Any] = {"server": server, "schema": base}
    try:
        PostgresStore.init_schema(admin, **names)
        writer = make_conninfo(admin, user=names["writer_role"])
        store = PostgresStore.open(writer, policy=policy_for(signer), schema=base)
        try:
            t = time.perf_counter()
            for e in events[:single]:
                store.append([e])
            dt = time.perf_counter() - t
            out["single"] = {"events": single, "seconds": dt, "per_s": single / dt}
            chunk = events[single : single + batched]
            t = time.perf_counter()
            for i in range(0, len(chunk), BATCH):
                store.append(chunk[i : i + BATCH])
            dt = time.perf_counter() - t
            out["batched"] = {"events": len(chunk), "batch": BATCH, "seconds": dt,
                              "per_s": len(chunk) / dt}
            out["stored"] = store.size()
            out["checkpoints"] = len(store.checkpoints())
        finally:
            store.close()
        out.update(_postgres_raw(admin, base, rows, single=single, batched=len(chunk)))
    finally:
        drop_throwaway_ledger(admin, names)
    return out


def _postgres_raw(admin: str, schema: str, rows: Sequence[tuple[Any, ...]], *, single: int,
                  batched: int) -> dict[str, Any]:
    table = sql.Identifier(schema, "raw_events")
    insert = sql.SQL("INSERT INTO {} (seq, leaf, kind, attempt, body) VALUES (%s, %s, %s, %s, %s)"
                     ).format(table)
    out: dict[str, Any] = {}
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute(sql.SQL("CREATE TABLE {} (seq bigint PRIMARY KEY, leaf bytea NOT NULL, "
                             "kind text NOT NULL, attempt text, body bytea NOT NULL)"
                             ).format(table))
        conn.execute(sql.SQL("CREATE INDEX ON {} (attempt, seq) WHERE attempt IS NOT NULL"
                             ).format(table))
        t = time.perf_counter()
        for row in rows[:single]:
            conn.execute(insert, row)
        dt = time.perf_counter() - t
        out["raw_single"] = {"events": single, "seconds": dt, "per_s": single / dt}
        chunk = rows[single : single + batched]
        t = time.perf_counter()
        with conn.cursor() as cur:
            for i in range(0, len(chunk), BATCH):
                with conn.transaction():
                    cur.executemany(insert, chunk[i : i + BATCH])
        dt = time.perf_counter() - t
        out["raw_batched"] = {"events": len(chunk), "seconds": dt, "per_s": len(chunk) / dt}
    return out


# -- report ----------------------------------------------------------------------------------


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}/s"


def render(r: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str, str]] = []

    def add(what: str, value: str, target: str = "", ok: bool | None = None) -> None:
        rows.append((what, value, target, "" if ok is None else ("yes" if ok else "NO")))

    s = r["sqlite"]
    add(f"SQLite durable appends, batches of {BATCH} (best of {s['rounds']})",
        fmt_rate(s["batched_per_s"]), f">= {TARGETS['sqlite_batched_per_s']:,}/s",
        s["batched_per_s"] >= TARGETS["sqlite_batched_per_s"])
    add("raw SQLite executemany of the same rows", fmt_rate(s["raw_per_s"]))
    add("ledger / raw", f"{s['ratio']:.2f}x", f">= {TARGETS['sqlite_vs_raw_ratio']}x",
        s["ratio"] >= TARGETS["sqlite_vs_raw_ratio"])
    add(f"SQLite single-event durable appends ({s['single_events']:,} events)",
        fmt_rate(s["single_per_s"]))
    v = r["verify"]
    add(f"verification, default ({v['default_workers']} worker processes), best of 3",
        fmt_rate(v["per_s"]), f">= {TARGETS['verify_entries_per_s']:,}/s",
        v["per_s"] >= TARGETS["verify_entries_per_s"])
    add("verification, one worker, best of 3", fmt_rate(v["one_worker_per_s"]),
        f">= {TARGETS['verify_entries_per_s']:,}/s",
        v["one_worker_per_s"] >= TARGETS["verify_entries_per_s"])
    for p in r["proofs"]:
        add(f"inclusion proof, n = {p['n']:,} (max of {p['inclusion_indices_checked']:,})",
            f"{p['inclusion_max_bytes']} B", f"<= {p['bound_bytes']} B",
            p["inclusion_max_bytes"] <= p["bound_bytes"])
        add(f"consistency proof, n = {p['n']:,} (max of {p['consistency_old_sizes_checked']:,})",
            f"{p['consistency_max_bytes']} B", f"<= {p['bound_bytes']} B",
            p["consistency_max_bytes"] <= p["bound_bytes"])
    pg = r["postgres"]
    if "skipped" in pg:
        add("PostgreSQL", "skipped: " + pg["skipped"])
    else:
        add(f"PostgreSQL single appends ({pg['single']['events']:,} events)",
            fmt_rate(pg["single"]["per_s"]), f">= {TARGETS['pg_single_per_s']:,}/s",
            pg["single"]["per_s"] >= TARGETS["pg_single_per_s"])
        add("raw PostgreSQL single-row INSERT commits, same rows",
            fmt_rate(pg["raw_single"]["per_s"]))
        add(f"PostgreSQL batched appends ({pg['batched']['events']:,} in {BATCH}s)",
            fmt_rate(pg["batched"]["per_s"]), f">= {TARGETS['pg_batched_per_s']:,}/s",
            pg["batched"]["per_s"] >= TARGETS["pg_batched_per_s"])
        add(f"raw PostgreSQL executemany, {BATCH} per transaction, same rows",
            fmt_rate(pg["raw_batched"]["per_s"]))
    widths = [max(len(row[i]) for row in [*rows, ("metric", "value", "target", "met")])
              for i in range(4)]
    line = "  ".join("-" * w for w in widths)
    head = "  ".join(h.ljust(w) for h, w in zip(("metric", "value", "target", "met"), widths,
                                                strict=True))
    body = "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) if i < 3 else c
                               for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                     for row in rows)
    notes = []
    if any(p["bound_bytes"] < p["consistency_max_bytes"] <= p["consistency_rfc6962_bound_bytes"]
           for p in r["proofs"]):
        notes.append(
            "note: an RFC 6962 consistency proof PROOF(m, n) has up to ceil(log2 n) + 1 hashes "
            "when m is not a power of two (n = 5, m = 3 needs 4 > ceil(log2 5) = 3): the excess "
            "above is that one hash, inherent to the format, not to this implementation."
        )
    m = r["machine"]
    intro = (f"Ledger throughput: N = {r['n']:,} events, mean body {r['mean_body_bytes']:.0f} B, "
             f"checkpoint every {CHECKPOINT_EVERY:,} events (Ed25519-signed)\n"
             f"machine: {m['cpus']} CPUs, Python {m['python']}, SQLite {m['sqlite']}, "
             f"{m['platform']}" + (f", PostgreSQL {pg['server']['version']} "
                                   f"(synchronous_commit={pg['server']['synchronous_commit']}, "
                                   f"fsync={pg['server']['fsync']})"
                                   if "server" in pg else ""))
    tail = "".join(f"\n{n}" for n in notes)
    return (f"{intro}\n\n{head}\n{line}\n{body}\n{tail}\n"
            f"total wall time {r['wall_seconds']:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="events in the big ledger")
    parser.add_argument("--single", type=int, default=2_000, help="single-event appends")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of ledger vs raw")
    parser.add_argument("--pg-single", type=int, default=2_000)
    parser.add_argument("--pg-batched", type=int, default=100_000)
    parser.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    if args.n < 1000:
        parser.error("--n must be at least 1000")
    wall = time.perf_counter()

    events, blobs = build_events(args.n)
    signer = generate_signer(ORIGIN)
    result: dict[str, Any] = {
        "n": args.n,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "sqlite": sqlite3.sqlite_version, "platform": platform.platform()},
    }
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        d = Path(tmp)
        ledger_times, raw_times = [], []
        rows: list[tuple[Any, ...]] = []
        for r in range(args.rounds):
            ledger_times.append(sqlite_batched(d / f"ledger-{r}.db", events, signer))
            if r == 0:
                rows = read_rows(d / "ledger-0.db")
            raw_times.append(sqlite_raw(d / f"raw-{r}.db", rows))
        bodies = [row[4] for row in rows]
        leaves = [row[1] for row in rows]
        assert all(leaf_hash(b) == leaf for b, leaf in zip(bodies[:1000], leaves[:1000],
                                                            strict=True))
        result["mean_body_bytes"] = sum(map(len, bodies)) / len(bodies)
        single_n = min(args.single, args.n)
        single_t = sqlite_single(d / "single.db", events[:single_n], signer)
        result["sqlite"] = {
            "rounds": args.rounds,
            "batch": BATCH,
            "batched_seconds": ledger_times,
            "batched_per_s": args.n / min(ledger_times),
            "raw_seconds": raw_times,
            "raw_per_s": args.n / min(raw_times),
            "ratio": min(raw_times) / min(ledger_times),
            "single_events": single_n,
            "single_seconds": single_t,
            "single_per_s": single_n / single_t,
        }
        # Evidence blobs the ledger's evidence.stored events name (not timed).
        store = SqliteStore.open(d / "ledger-0.db")
        try:
            for blob in blobs.values():
                store.put_evidence(blob)
        finally:
            store.close()
        t_default, report = verification(d / "ledger-0.db", signer, None)
        t_one, _ = verification(d / "ledger-0.db", signer, 1)
        result["verify"] = {
            "entries": report.size,
            "checkpoints_checked": report.checkpoints_checked,
            "evidence_checked": report.evidence_checked,
            "default_workers": (min(os.cpu_count() or 1, 8) if report.size >= PARALLEL_FROM
                                else 1),
            "seconds": t_default,
            "per_s": report.size / t_default,
            "one_worker_seconds": t_one,
            "one_worker_per_s": report.size / t_one,
        }
        rng = random.Random(7)
        result["proofs"] = [proof_sizes(leaves, n, rng)
                            for n in sorted({1000, min(100_000, args.n), args.n})]
    if args.no_pg:
        result["postgres"] = {"skipped": "--no-pg"}
    else:
        result["postgres"] = postgres(events, rows, signer, single=min(args.pg_single, args.n),
                                      batched=max(0, min(args.pg_batched,
                                                         args.n - args.pg_single)))
    result["wall_seconds"] = time.perf_counter() - wall
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))


if __name__ == "__main__":
    main()
