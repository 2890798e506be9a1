"""A ledger writer that acknowledges every event it appended, for crash and concurrency tests.

    python append_writer.py --keys DIR (--db FILE | --dsn DSN --schema NAME) --tag TAG
                            [--events N] [--max-batch K] [--every E] [--seed S]
                            [--pause-ms MS] [--wait-go]

Opens the ledger as the application would (SQLite file, or PostgreSQL as the writer role) with
the log key in ``--keys`` signing checkpoints, prints ``ready``, optionally waits for a line on
stdin, then appends batches of 1..K events (every fifth batch preceded by an evidence blob and
ending with its ``evidence.stored`` event).  Only after ``append`` has returned - the commit is
durable - it prints, in one flushed write, ``ack SEQ TAG N BATCH J K`` for each event of the
batch: its position, its writer, its number, its batch, its index in the batch and the batch
size, which the event's data repeats (a ``comment.added`` text, the ``evidence.stored``
``what``: :func:`record_of`).  ``--events 0`` appends until killed; ``--pause-ms``
sleeps up to that long between batches (work between appends, so that writers interleave).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from triz_ri_smart_ai_evaluator.ledger.events import NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import load_log_signer, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy, LedgerStore

AT = "2025-03-01T12:00:00.000000Z"


def open_store(args: argparse.Namespace) -> LedgerStore:
    if args.db:
        return open_sqlite_ledger(Path(args.db), Path(args.keys), every_events=args.every)
    from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore

    signer = load_log_signer(Path(args.keys))
    policy = CheckpointPolicy(signer, signer.name, args.every, 60.0, time.time)
    return PostgresStore.open(args.dsn, policy=policy, schema=args.schema)


def record_of(data: dict[str, Any]) -> dict[str, Any]:
    """What an event's ``data`` says about its writer: the ``comment.added`` text or the
    ``evidence.stored`` ``what`` (a JSON object with ``tag``, ``n``, ``batch``, ``j``, ``k``)."""
    return json.loads(data["text"] if "text" in data else data["what"])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", required=True)
    parser.add_argument("--db")
    parser.add_argument("--dsn")
    parser.add_argument("--schema")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--events", type=int, default=0)
    parser.add_argument("--max-batch", type=int, default=7)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pause-ms", type=float, default=0.0)
    parser.add_argument("--wait-go", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    store = open_store(args)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if args.wait_go and sys.stdin.readline().strip() != "go":
        return
    n = batch = 0
    while args.events == 0 or n < args.events:
        size = rng.randint(1, args.max_batch)
        if args.events:
            size = min(size, args.events - n)
        meta = [(n + j, j) for j in range(size)]
        events = []
        for number, j in meta:
            record = json.dumps({"tag": args.tag, "n": number, "batch": batch, "j": j,
                                 "k": size, "pad": "x" * rng.randint(0, 300)}, sort_keys=True)
            kind, data = "comment.added", {"text": record}
            if batch % 5 == 4 and j == size - 1:
                blob = f"{args.tag} evidence {batch}".encode()
                store.put_evidence(blob)
                kind = "evidence.stored"
                data = {"what": record, "digest": hashlib.sha256(blob).hexdigest()}
            events.append(NewEvent.make(kind, data, actor=f"writer-{args.tag}", at=AT,
                                        attempt=f"att-{args.tag}"))
        seqs = store.append(events)
        sys.stdout.write("".join(f"ack {seq} {args.tag} {number} {batch} {j} {size}\n"
                                 for seq, (number, j) in zip(seqs, meta, strict=True)))
        sys.stdout.flush()
        n += size
        batch += 1
        if args.pause_ms:
            time.sleep(rng.uniform(0, args.pause_ms) / 1000)
    store.close()
    sys.stdout.write("done\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
