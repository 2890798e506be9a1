"""A bounded load test from a second process on loopback (issue 6 acceptance).

The service runs here (uvicorn on a free loopback port over a fresh SQLite ledger); the load
comes from another Python process, ``benchmarks/service_load.py drive``: 8 concurrent policy
clients (asyncio + httpx, one connection each) submit 200 small attempts for
``document_step_faithfulness`` while the verifier appends a signed ``verifier_decisions`` entry
and the harness appends ``raw_measurements`` and ``awards_and_signals`` on every one of those
attempts, concurrently.  Afterwards: no 5xx and no transport failure, every attempt id that was
returned is in the ledger exactly once as ``attempt.initiated`` and nothing else was initiated,
every trusted record is there, and the whole ledger verifies.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.ledger.log import LOG_VKEY_FILE, check_ledger, load_vkey

from .conftest import Service, start_service

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "benchmarks" / "service_load.py"
CLIENTS, SUBMISSIONS, SECONDS = 8, 200, 30


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def loaded(tmp_path: Path) -> Iterator[Service]:
    yield from start_service(tmp_path / "svc", policies=CLIENTS)


def test_concurrent_clients_lose_and_duplicate_nothing(loaded: Service) -> None:
    errors = _Errors()
    loggers = [logging.getLogger(n) for n in ("uvicorn.error", "triz_eval.service")]
    for logger in loggers:
        logger.addHandler(errors)
    before = {e["kind"] for e in loaded.events()}
    assert "attempt.initiated" not in before
    try:
        t0 = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(DRIVER), "drive", "--url", loaded.base_url,
             "--folder", str(loaded.folder), "--clients", str(CLIENTS),
             "--requests", str(SUBMISSIONS), "--seconds", str(SECONDS),
             "--trusted-every", "1", "--trusted-workers", "2", "--client", "httpx"],
            capture_output=True, text=True, timeout=SECONDS + 90, check=False, cwd=ROOT)
        elapsed = time.monotonic() - t0
        time.sleep(0.1)  # a late error record of the last requests lands before the check
    finally:
        for logger in loggers:
            logger.removeHandler(errors)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    subs, trusted = result["submissions"], result["trusted"]

    # every request answered, none with an error, within the bounds
    assert subs["statuses"] == {"201": SUBMISSIONS}, subs
    assert subs["transport_failures"] == 0, subs["failure_samples"]
    assert trusted["statuses"] == {"200": 3 * SUBMISSIONS}, trusted
    assert trusted["transport_failures"] == 0, trusted["failure_samples"]
    assert result["trusted_recorded"] == {"verifier_decisions": SUBMISSIONS,
                                          "raw_measurements": SUBMISSIONS,
                                          "awards_and_signals": SUBMISSIONS}
    assert elapsed < SECONDS + 60
    assert not errors.records, [r.getMessage() for r in errors.records]

    # zero lost, zero duplicated: the ids the clients got are exactly the attempts initiated
    ids = result["attempt_ids"]
    assert len(ids) == SUBMISSIONS
    assert len(set(ids)) == SUBMISSIONS
    events = loaded.events()
    initiated = Counter(e["attempt"] for e in events if e["kind"] == "attempt.initiated")
    assert set(initiated) == set(ids)
    assert set(initiated.values()) == {1}
    per_kind = Counter(e["kind"] for e in events)
    assert per_kind["verifier.decision"] == SUBMISSIONS
    assert per_kind["award.decision"] == SUBMISSIONS
    assert per_kind["access.violation"] == 0
    decided = Counter(e["attempt"] for e in events if e["kind"] == "verifier.decision")
    assert decided == Counter(ids)

    # and the ledger verifies: chain, Merkle roots, signed checkpoints, evidence
    runtime = loaded.runtime
    runtime.call_sync(lambda: runtime.store.append([], force_checkpoint=True))
    log_key = load_vkey(loaded.folder / "keys" / LOG_VKEY_FILE)
    report = runtime.call_sync(lambda: check_ledger(runtime.store, log_key=log_key))
    assert report.ok, report.to_dict()
