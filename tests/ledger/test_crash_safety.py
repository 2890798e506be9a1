"""Crash safety (issue 3): a writer killed with SIGKILL at a random point leaves no partial
event and loses no acknowledged one, on SQLite and on PostgreSQL.

The writer (``_workers/append_writer.py``) prints each event's position only after ``append``
returned, i.e. after the commit is durable.  Each run starts a writer on the same ledger, kills
it after a random delay (sometimes before it even finished opening the ledger), then checks:
every acknowledged event is stored with the data the writer gave it; the writer's batches are
whole (all of a batch or none of it); positions are 1..size without gap; and ``check_ledger``
passes (chain, Merkle roots at every log checkpoint, evidence).  The next run writes on after
the crash, so recovery from every earlier kill is exercised too.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.ledger.checkpoint import NoteVerifier
from triz_ri_smart_ai_evaluator.ledger.log import check_ledger, create_log_key, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore

from ._workers.append_writer import record_of
from .conftest import PgLedger

WORKER = Path(__file__).parent / "_workers" / "append_writer.py"
RUNS = 50
ORIGIN = "crash.test.example/log"


@dataclass
class Ack:
    seq: int
    tag: str
    n: int
    batch: int
    j: int
    k: int


@dataclass
class Run:
    """One writer process and what it acknowledged."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == "ready":
                self.ready.set()
            self.lines.append(line)

    def finish(self, timeout: float = 60) -> str:
        """Wait for the process and for its output to be read; return its stderr."""
        self.proc.wait(timeout)
        if self.reader is not None:
            self.reader.join(timeout)
        return self.proc.stderr.read() if self.proc.stderr else ""

    def acks(self) -> list[Ack]:
        out = []
        for line in self.lines:
            if not line.endswith("\n"):
                continue  # a line cut by the kill was never fully acknowledged
            parts = line.split()
            if parts and parts[0] == "ack":
                seq, tag, n, batch, j, k = parts[1:]
                out.append(Ack(int(seq), tag, int(n), int(batch), int(j), int(k)))
        return out


def start(args: list[str], tag: str, seed: int, **popen: Any) -> Run:
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), *args, "--tag", tag, "--seed", str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    run = Run(proc)
    run.reader = threading.Thread(target=run.read, daemon=True)
    run.reader.start()
    return run


def kill_at_random(run: Run, rng: random.Random) -> None:
    """SIGKILL after a random delay: mostly while appending, sometimes while still opening."""
    if rng.random() < 0.15:
        time.sleep(rng.uniform(0.0, 0.25))
    else:
        assert run.ready.wait(30), run.proc.stderr.read() if run.proc.stderr else ""
        time.sleep(rng.choice([0.0, rng.uniform(0.0, 0.01), rng.uniform(0.0, 0.05),
                               rng.uniform(0.02, 0.2)]))
    run.proc.send_signal(signal.SIGKILL)
    stderr = run.finish()
    assert "Traceback" not in stderr, stderr
    assert run.proc.returncode == -signal.SIGKILL, (run.proc.returncode, stderr)


def check_after_crash(store: LedgerStore, log_key: NoteVerifier, tag: str, acks: list[Ack]
                      ) -> int:
    """Every acknowledged event present and whole batches only; returns the run's events."""
    rows = list(store.scan())
    assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1)), "gap in positions"
    assert store.size() == len(rows)
    by_seq = {seq: json.loads(body) for seq, body in rows}
    records = {seq: record_of(fields["data"]) for seq, fields in by_seq.items()}
    for ack in acks:
        assert ack.seq in by_seq, f"acknowledged event {ack.seq} ({tag} #{ack.n}) was lost"
        data = records[ack.seq]
        assert (data["tag"], data["n"], data["batch"], data["j"], data["k"]) == (
            ack.tag, ack.n, ack.batch, ack.j, ack.k), f"event {ack.seq} is not what was acked"
    batches: dict[int, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for seq, record in records.items():
        if record["tag"] == tag:
            batches[record["batch"]].append((seq, record))
    for batch, members in batches.items():
        seqs = sorted(s for s, _ in members)
        k = members[0][1]["k"]
        assert sorted(d["j"] for _, d in members) == list(range(k)), f"partial batch {batch}"
        assert seqs == list(range(seqs[0], seqs[0] + k)), f"batch {batch} is not contiguous"
    acked_batches = {a.batch for a in acks}
    assert acked_batches <= set(batches)
    # At most the batch being acknowledged when the kill came may be stored but unacked.
    assert len(set(batches) - acked_batches) <= 1, sorted(set(batches) - acked_batches)
    report = check_ledger(store, log_key=log_key, workers=1)
    assert report.ok, report.problems
    return sum(len(m) for m in batches.values())


def crash_runs(args: list[str], opener: Any, log_key: NoteVerifier, seed: int) -> None:
    rng = random.Random(seed)
    total = 0
    acked_runs = 0
    for number in range(RUNS):
        tag = f"r{number}"
        run = start(args, tag, rng.randrange(1 << 30))
        kill_at_random(run, rng)
        acks = run.acks()
        acked_runs += bool(acks)
        store = opener()
        try:
            total += check_after_crash(store, log_key, tag, acks)
            assert store.size() == total
        finally:
            store.close()
    assert acked_runs >= RUNS // 3, "most writers were killed before acknowledging anything"
    # After fifty crashes the ledger still takes appends and signs checkpoints.
    final = start([*args, "--events", "10"], "final", 1)
    stderr = final.finish()
    assert final.proc.returncode == 0, stderr
    assert final.lines[-1] == "done\n"
    store = opener()
    try:
        assert store.size() == total + 10
        report = check_ledger(store, log_key=log_key, workers=1)
        assert report.ok, report.problems
        assert report.checkpoints_checked >= 1
    finally:
        store.close()


def test_sqlite_writer_killed_at_random_points(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    log_key = create_log_key(keys, origin=ORIGIN)
    db = tmp_path / "ledger.db"
    open_sqlite_ledger(db, keys).close()  # created once; every kill hits a ready ledger
    crash_runs(["--keys", str(keys), "--db", str(db)],
               lambda: open_sqlite_ledger(db, read_only=True), log_key, seed=11)


def test_postgres_writer_killed_at_random_points(pg_ledger: PgLedger, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    log_key = create_log_key(keys, origin=ORIGIN)
    crash_runs(["--keys", str(keys), "--dsn", pg_ledger.writer_dsn, "--schema", pg_ledger.schema],
               lambda: pg_ledger.open(role=pg_ledger.reader), log_key, seed=12)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_worker_acknowledges_only_committed_events(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """A guard on the harness itself: an uninterrupted writer acknowledges exactly what it
    stored, in order, and prints ``done``."""
    keys = tmp_path / "keys"
    log_key = create_log_key(keys, origin=ORIGIN)
    if backend == "sqlite":
        db = tmp_path / "ledger.db"
        args = ["--keys", str(keys), "--db", str(db)]

        def opener() -> LedgerStore:
            return open_sqlite_ledger(db, read_only=True)
    else:
        pg: PgLedger = request.getfixturevalue("pg_ledger")
        args = ["--keys", str(keys), "--dsn", pg.writer_dsn, "--schema", pg.schema]

        def opener() -> LedgerStore:
            return pg.open(role=pg.reader)
    run = start([*args, "--events", "60"], "whole", 3)
    stderr = run.finish()
    assert run.proc.returncode == 0, stderr
    acks = run.acks()
    assert [a.seq for a in acks] == list(range(1, 61))
    assert [a.n for a in acks] == list(range(60))
    store = opener()
    try:
        assert check_after_crash(store, log_key, "whole", acks) == 60
    finally:
        store.close()
