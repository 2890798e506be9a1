"""Concurrent writers (issue 3): several processes appending at once to the same SQLite file,
and to the same PostgreSQL ledger, never fork the chain.

Each writer (``_workers/append_writer.py``) opens the ledger, says ``ready``, waits until all
are ready, then appends its events in batches of random size, acknowledging each position after
its commit.  Afterwards: the positions acknowledged by all writers are exactly 1..total, none
twice; the size is the sum of what each wrote; each writer's events are stored in its own
order with the data it gave them; the chain, the Merkle roots at every log checkpoint and the
evidence verify; and the checkpoints came at the policy's pace.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from triz_ri_smart_ai_evaluator.ledger.checkpoint import NoteVerifier
from triz_ri_smart_ai_evaluator.ledger.log import check_ledger, create_log_key, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore

from ._workers.append_writer import record_of
from .conftest import PgLedger

WORKER = Path(__file__).parent / "_workers" / "append_writer.py"
WRITERS = 4
EVENTS_EACH = 150
EVERY = 25
ORIGIN = "concurrent.test.example/log"


def run_writers(args: list[str]) -> dict[str, list[tuple[int, ...]]]:
    """Start the writers, release them together, wait; return each one's acknowledgements
    as (seq, n, batch, j, k)."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), *args, "--tag", f"w{w}", "--seed", str(w),
             "--events", str(EVENTS_EACH), "--every", str(EVERY), "--pause-ms", "3",
             "--wait-go"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(WRITERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n", proc.stderr.read() if proc.stderr else ""
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=180) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    acks: dict[str, list[tuple[int, ...]]] = {}
    for w, (proc, (out, err)) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, err
        assert "Traceback" not in err, err
        lines = out.splitlines()
        assert lines[-1] == "done", lines[-3:]
        acks[f"w{w}"] = [tuple(int(x) for x in (p[1], *p[3:]))
                         for p in (line.split() for line in lines[:-1])]
    return acks


def check_no_fork(store: LedgerStore, acks: dict[str, list[tuple[int, ...]]],
                  log_key: NoteVerifier) -> None:
    total = WRITERS * EVENTS_EACH
    every = [seq for mine in acks.values() for seq, *_ in mine]
    duplicates = [seq for seq, count in Counter(every).items() if count > 1]
    assert not duplicates, f"positions given to two writers: {duplicates[:10]}"
    assert sorted(every) == list(range(1, total + 1))
    assert store.size() == total
    rows = list(store.scan())
    assert [seq for seq, _ in rows] == list(range(1, total + 1))
    data = {seq: record_of(json.loads(body)["data"]) for seq, body in rows}
    for tag, mine in acks.items():
        assert len(mine) == EVENTS_EACH
        assert [n for _, n, *_ in mine] == list(range(EVENTS_EACH))
        seqs = [seq for seq, *_ in mine]
        assert seqs == sorted(seqs), f"{tag}'s events are out of its order"
        for seq, n, batch, j, k in mine:
            assert (data[seq]["tag"], data[seq]["n"], data[seq]["batch"], data[seq]["j"],
                    data[seq]["k"]) == (tag, n, batch, j, k)
        # A batch is one transaction: its events are consecutive positions.
        for _, group in itertools.groupby(mine, key=lambda a: a[2]):
            positions = [seq for seq, *_ in group]
            assert positions == list(range(positions[0], positions[0] + len(positions)))
    # The writers really ran at once: their batches interleave.
    switches = sum(a != b for a, b in itertools.pairwise(data[s]["tag"] for s in sorted(data)))
    assert switches >= 2 * WRITERS, f"writers hardly interleaved ({switches} switches)"
    report = check_ledger(store, log_key=log_key, workers=1)
    assert report.ok, report.problems
    assert report.size == total
    sizes = [size for size, _ in store.checkpoints()]
    assert report.checkpoints_checked == len(sizes)
    # The first is due by time at the first append (none was ever signed); then every EVERY
    # events, and as a batch has at most 7 events no checkpoint comes later than that.
    assert sizes[0] <= 7
    assert all(EVERY <= b - a < EVERY + 7 for a, b in itertools.pairwise(sizes)), sizes
    assert sizes[-1] > total - EVERY


def _check(opener: Callable[[], LedgerStore], acks: dict[str, list[tuple[int, ...]]],
           log_key: NoteVerifier) -> None:
    store = opener()
    try:
        check_no_fork(store, acks, log_key)
    finally:
        store.close()


def test_sqlite_writers_in_several_processes_keep_one_chain(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    log_key = create_log_key(keys, origin=ORIGIN)
    db = tmp_path / "ledger.db"
    open_sqlite_ledger(db, keys).close()
    acks = run_writers(["--keys", str(keys), "--db", str(db)])
    _check(lambda: open_sqlite_ledger(db, read_only=True), acks, log_key)


def test_postgres_writers_in_several_processes_keep_one_chain(pg_ledger: PgLedger,
                                                              tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    log_key = create_log_key(keys, origin=ORIGIN)
    acks = run_writers(["--keys", str(keys), "--dsn", pg_ledger.writer_dsn,
                        "--schema", pg_ledger.schema])
    _check(lambda: pg_ledger.open(role=pg_ledger.reader), acks, log_key)


def test_sqlite_writers_racing_to_create_the_file_keep_one_chain(tmp_path: Path) -> None:
    """The writers start together on a file that does not exist yet: each creates the schema
    (idempotently) before appending."""
    keys = tmp_path / "keys"
    log_key = create_log_key(keys, origin=ORIGIN)
    db = tmp_path / "fresh.db"
    acks = run_writers(["--keys", str(keys), "--db", str(db)])
    _check(lambda: open_sqlite_ledger(db, read_only=True), acks, log_key)
