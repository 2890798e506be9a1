"""Harness-side HTTP traffic to the candidate as served: every request is at once a functional
check and a latency sample (spec 9.7: a test indistinguishable from ordinary work).

The ordinary traffic sends every drawn order once, in the seed's shuffled order, with the one
header set of the service's real client, from two visitors with a human think time: no
benchmarking client, no burst, no warm-up to skip, no header or position that marks a
measurement.  Its p95 is the ``p95_latency_ms`` of the run, over all of its requests, and every
answer is compared with the trusted reference.

The explicit probe is the opposite on purpose: a back-to-back burst from a benchmarking client,
right after the ordinary traffic, over the same orders.  It is never the measurement; it is the
control a test-aware candidate shows itself against (a persistent divergence between an explicit
test and operation is a defect, 9.7).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

#: The header set of the checkout front end, the service's ordinary client.
CLIENT_HEADERS = {
    "User-Agent": "checkout-web/5.3 (+https://shop.example/checkout)",
    "Accept": "application/json",
    "Accept-Language": "en-GB,en;q=0.8",
    "Content-Type": "application/json",
}
#: What a naive load test looks like (the explicit probe only).
PROBE_HEADERS = {"User-Agent": "python-httpx/0.27.0", "Accept": "*/*",
                 "Content-Type": "application/json"}
LANES = 2
THINK_SECONDS = (0.08, 0.2)
REQUEST_TIMEOUT = 5.0
EXPLICIT_PROBE_SIZE = 20


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and its answer as the harness saw it."""

    case_id: str
    kind: str  # "ordinary" or "explicit_probe"
    status: int | None
    body: Any
    ms: Decimal
    correct: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case_id, "kind": self.kind, "status": self.status,
                "body": self.body, "ms": str(self.ms), "correct": self.correct,
                "error": self.error}


def _post(host: str, port: int, case: Mapping[str, Any], headers: Mapping[str, str],
          kind: str) -> Exchange:
    body = json.dumps(case["order"]).encode()
    started = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT)
    status: int | None = None
    answer: Any = None
    error = None
    try:
        conn.request("POST", "/quote", body=body, headers=dict(headers))
        response = conn.getresponse()
        raw = response.read(65536)
        status = response.status
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = raw.decode("utf-8", "replace")[:200]
    except (OSError, http.client.HTTPException) as e:
        error = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    ms = Decimal(f"{(time.perf_counter() - started) * 1000:.3f}")
    return Exchange(str(case["id"]), kind, status, answer, ms,
                    status == 200 and answer == case["expected"], error)


def ordinary_traffic(host: str, port: int, cases: Sequence[Mapping[str, Any]], seed: bytes,
                     ) -> list[Exchange]:
    """Every case once, by two visitors with a think time between their requests; each
    request carries the client's headers and a fresh request id."""
    queue = list(cases)
    out: list[Exchange] = []
    lock = threading.Lock()

    def visitor(lane: int) -> None:
        rng = random.Random(hashlib.sha256(b"dfx visitor\x00" + seed + bytes([lane])).digest())  # noqa: S311
        while True:
            with lock:
                if not queue:
                    return
                case = queue.pop(0)
            request_id = f"{rng.getrandbits(64):016x}"
            got = _post(host, port, case, {**CLIENT_HEADERS, "X-Request-Id": request_id},
                        "ordinary")
            with lock:
                out.append(got)
            time.sleep(rng.uniform(*THINK_SECONDS))

    threads = [threading.Thread(target=visitor, args=(n,), daemon=True) for n in range(LANES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def explicit_probe(host: str, port: int, cases: Sequence[Mapping[str, Any]]) -> list[Exchange]:
    """A back-to-back burst from a benchmarking client over the first cases (the control)."""
    return [_post(host, port, c, PROBE_HEADERS, "explicit_probe")
            for c in cases[:EXPLICIT_PROBE_SIZE]]


def p95(samples: Sequence[Decimal]) -> Decimal:
    """The 95th percentile by nearest rank.  Raises ValueError for no samples."""
    if not samples:
        raise ValueError("no latency samples")
    ordered = sorted(samples)
    return ordered[math.ceil(Decimal("0.95") * len(ordered)) - 1]
