"""Load on the evaluator service (issue 6): submissions per second and latency percentiles from
a second process on loopback, with the SQLite ledger and with PostgreSQL beside it.

For each ledger the script writes a fresh service folder (``service init``), starts
``triz-eval serve`` as a child process on a free loopback port and drives it from this process
with many concurrent policy clients (asyncio + httpx, one connection per client) submitting
small attempts for ``document_step_faithfulness``, while trusted components record on those
attempts at the same time: the verifier appends a ``verifier_decisions`` entry, the harness
appends ``raw_measurements`` and then ``awards_and_signals`` (``attempts.evaluate``), every one
of them an Ed25519-signed request with a signed payload.  The run is bounded twice: at most
``--requests`` submissions and at most ``--seconds`` seconds.

It prints, per ledger:

* a same-run baseline: ``GET /v1/health`` requests/s through the same client stack and the
  same number of clients (what HTTP, uvicorn and FastAPI cost without the ledger);
* submissions/s and p50/p95/p99 latency, first with the policy clients alone, then with the
  trusted components recording concurrently (``--trusted-every N``: on every Nth attempt);
* the trusted requests' rate and latency;
* checks: no 5xx, every returned attempt id exactly once as ``attempt.initiated`` in the ledger,
  and ``check_ledger`` passing (chain, roots, signed checkpoints, evidence).

The PostgreSQL part uses the local server (127.0.0.1:5432, trust authentication, database
``test``): a throw-away schema and roles created with ``PostgresStore.init_schema`` and dropped
afterwards.  ``--profile`` runs the service under cProfile on its ledger thread and counts the
store's durable operations per submission (see ``serve-profiled`` below).  ``--round-trips``
puts a counting proxy (tests/ledger/_pgwire.py) between the service and PostgreSQL and reports
the round trips per submission of the policy-clients-alone phase (the proxy costs throughput:
read the rates from a run without it).

    .venv/bin/python benchmarks/service_load.py [--clients 32] [--requests 3000]
        [--seconds 20] [--trusted-every 4] [--no-pg] [--profile] [--round-trips] [--json]

``drive`` is the load generator alone against a running service (used by
tests/service/test_load.py):

    .venv/bin/python benchmarks/service_load.py drive --url http://127.0.0.1:PORT
        --folder SERVICE_DIR --clients 8 --requests 200 --seconds 30 --trusted-every 1
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import json
import math
import os
import platform
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import yaml

from triz_ri_smart_ai_evaluator.access.enforce import Principal
from triz_ri_smart_ai_evaluator.access.matrix import Role
from triz_ri_smart_ai_evaluator.access.trusted import sign_request
from triz_ri_smart_ai_evaluator.provenance.confirmation import ComponentKey
from triz_ri_smart_ai_evaluator.service.auth import signed_headers
from triz_ri_smart_ai_evaluator.service.config import (
    init_service_dir,
    load_principal_key,
)

CLASS = "document_step_faithfulness"
TARGET_SQLITE_PER_S = 500
TARGET_POSTGRES_PER_S = 600  # issue 16 item 4
TRUSTED_PATH = "/v1/trusted/requests"


# -- the load generator (the second process) ---------------------------------------------------

@dataclass
class Plan:
    url: str
    folder: str
    clients: int = 8
    requests: int = 200  # submissions in all (or health requests for the baseline)
    seconds: float = 30.0
    trusted_every: int = 0  # 0: no trusted components; N: they record on every Nth attempt
    trusted_workers: int = 2  # concurrent connections of each trusted component
    baseline: bool = False  # GET /v1/health instead of submissions
    client: str = "raw"  # "raw" (_RawClient) or "httpx" (httpx.AsyncClient)


@dataclass
class _Log:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    first: float = math.inf
    last: float = 0.0

    def record(self, started: float, ended: float, status: int) -> None:
        self.latencies.append(ended - started)
        self.statuses[status] += 1
        self.first = min(self.first, started)
        self.last = max(self.last, ended)

    def summary(self) -> dict[str, Any]:
        ok = sum(n for s, n in self.statuses.items() if s < 400)
        span = max(self.last - self.first, 1e-9) if self.latencies else 0.0
        lat = sorted(self.latencies)
        return {
            "requests": len(lat), "ok": ok, "seconds": round(span, 3),
            "ok_per_s": round(ok / span, 1) if span else 0.0,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "transport_failures": len(self.failures), "failure_samples": self.failures[:5],
            "latency_ms": {f"p{q}": round(_percentile(lat, q) * 1000, 2)
                           for q in (50, 95, 99)} | {
                "max": round(lat[-1] * 1000, 2) if lat else 0.0},
        }


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted ``values``."""
    if not values:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(values)))
    return values[rank - 1]


def _credentials(folder: Path) -> tuple[list[str], dict[str, ComponentKey]]:
    tokens = json.loads((folder / "credentials.json").read_text("utf-8"))["policy_tokens"]
    keys = {pid: load_principal_key(folder / "principals" / f"{pid}.key")
            for pid in ("verifier-1", "harness-1")}
    return list(tokens.values()), keys


def _signed_request(key: ComponentKey, principal: Principal, resource: str,
                    payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """Body and headers of one signed trusted append (payload signature and request
    signature), built as ``client.TrustedClient.request`` builds them."""
    signed = sign_request(key, principal, resource, "append", payload)
    data = json.dumps({"resource": resource, "action": "append", "payload": signed},
                      ensure_ascii=False).encode("utf-8")
    headers = signed_headers(key, principal.id, "POST", TRUSTED_PATH, "", data)
    headers["Content-Type"] = "application/json"
    return data, headers


class _Answer:
    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code = status_code
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class _RawClient:
    """A minimal HTTP/1.1 keep-alive client on one asyncio connection: a few microseconds per
    request on the client side, so that on a 2-core machine the figures are the service's and
    not the load generator's (``--client httpx`` uses httpx.AsyncClient instead)."""

    def __init__(self, base_url: str) -> None:
        host, _, port = base_url.removeprefix("http://").partition(":")
        self._host, self._port = host, int(port or 80)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> _RawClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()

    async def request(self, method: str, path: str, *, content: bytes = b"",
                      headers: dict[str, str] | None = None) -> _Answer:
        if self._writer is None or self._reader is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        head = [f"{method} {path} HTTP/1.1", f"Host: {self._host}:{self._port}",
                f"Content-Length: {len(content)}"]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self._writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + content)
        await self._writer.drain()
        status_line = await self._reader.readuntil(b"\r\n")
        length, close = 0, False
        while True:
            line = await self._reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        body = await self._reader.readexactly(length)
        if close:
            self._writer.close()
            self._reader = self._writer = None
        return _Answer(int(status_line.split(b" ", 2)[1]), body)

    async def get(self, path: str, headers: dict[str, str] | None = None) -> _Answer:
        return await self.request("GET", path, headers=headers)

    async def post(self, path: str, *, content: bytes = b"",
                   headers: dict[str, str] | None = None) -> _Answer:
        return await self.request("POST", path, content=content, headers=headers)


async def _drive(plan: Plan) -> dict[str, Any]:
    folder = Path(plan.folder)
    tokens, keys = _credentials(folder)
    submissions, trusted = _Log(), _Log()
    attempt_ids: list[str] = []
    recorded: Counter[str] = Counter()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    tickets = iter(range(plan.requests))
    started = time.perf_counter()
    deadline = started + plan.seconds
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    errors: tuple[type[BaseException], ...] = (httpx.HTTPError, OSError,
                                               asyncio.IncompleteReadError, ValueError)

    def connect() -> Any:
        if plan.client == "httpx":
            return httpx.AsyncClient(base_url=plan.url, timeout=60, limits=limits,
                                     trust_env=False)
        return _RawClient(plan.url)
    artefact = base64.b64encode(b"step 1: open the form\nstep 2: submit it\n").decode()

    async def policy_client(n: int) -> None:
        headers = {"Authorization": f"Bearer {tokens[n % len(tokens)]}",
                   "Content-Type": "application/json"}
        async with connect() as http:
            for ticket in tickets:
                if time.perf_counter() > deadline:
                    break
                t0 = time.perf_counter()
                try:
                    if plan.baseline:
                        response = await http.get("/v1/health")
                    else:
                        body = json.dumps({"class_id": CLASS, "artefact_b64": artefact,
                                           "claims": [f"done {ticket}"], "diagnostics": []})
                        response = await http.post("/v1/policy/attempts", headers=headers,
                                                   content=body.encode())
                except errors as e:
                    submissions.failures.append(f"{type(e).__name__}: {e}")
                    continue
                submissions.record(t0, time.perf_counter(), response.status_code)
                if response.status_code == 201 and not plan.baseline:
                    attempt = response.json()["attempt_id"]
                    attempt_ids.append(attempt)
                    if plan.trusted_every and ticket % plan.trusted_every == 0:
                        queue.put_nowait(attempt)
                elif response.status_code >= 400 and len(submissions.failures) < 20:
                    submissions.failures.append(f"{response.status_code}: {response.text[:200]}")

    async def send(http: Any, who: str, principal: Principal, resource: str,
                   payload: dict[str, Any]) -> None:
        data, headers = _signed_request(keys[who], principal, resource, payload)
        t0 = time.perf_counter()
        try:
            response = await http.post(TRUSTED_PATH, content=data, headers=headers)
        except errors as e:
            trusted.failures.append(f"{resource}: {type(e).__name__}: {e}")
            return
        trusted.record(t0, time.perf_counter(), response.status_code)
        if response.status_code == 200:
            recorded[resource] += 1
        elif len(trusted.failures) < 20:
            trusted.failures.append(f"{resource} {response.status_code}: {response.text[:200]}")

    async def trusted_component() -> None:
        verifier = Principal("verifier-1", Role.VERIFIER)
        harness = Principal("harness-1", Role.HARNESS)
        async with connect() as http:
            while True:
                attempt = await queue.get()
                if attempt is None:
                    return
                # The verifier's decision, then the harness's measurements and award.
                await send(http, "verifier-1", verifier, "verifier_decisions", {
                    "attempt_id": attempt, "decision": {
                        "verdict": "verified", "note": "every step matches the log"}})
                await send(http, "harness-1", harness, "raw_measurements",
                           {"attempt_id": attempt, "inputs": {}})
                await send(http, "harness-1", harness, "awards_and_signals",
                           {"attempt_id": attempt, "inputs": {}})

    workers = [asyncio.create_task(trusted_component())
               for _ in range(plan.trusted_workers if plan.trusted_every else 0)]
    await asyncio.gather(*(policy_client(n) for n in range(plan.clients)))
    submitted_at = time.perf_counter()
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    return {
        "plan": asdict(plan) | {"folder": str(plan.folder)},
        "submissions": submissions.summary(), "trusted": trusted.summary(),
        "trusted_recorded": dict(recorded), "trusted_queued_left": queue.qsize(),
        "drain_seconds": round(time.perf_counter() - submitted_at, 3),
        "attempt_ids": attempt_ids,
    }


def drive(plan: Plan) -> dict[str, Any]:
    """Run the load described by ``plan`` against a running service; return the figures."""
    return asyncio.run(_drive(plan))


# -- the service as a child process ------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(folder: Path, *, profile: Path | None = None) -> Iterator[tuple[str, int]]:
    """``triz-eval serve`` on a free loopback port (or ``serve-profiled`` of this script);
    yields its URL and pid; stops it (SIGINT, then SIGKILL after 30 s)."""
    port = free_port()
    config = folder / "service.yaml"
    if profile is None:
        command = [str(Path(sys.executable).parent / "triz-eval"), "serve", "--config",
                   str(config), "--port", str(port)]
    else:
        command = [sys.executable, str(Path(__file__).resolve()), "serve-profiled",
                   "--config", str(config), "--port", str(port), "--out", str(profile)]
    log = (folder / "serve.log").open("wb")
    child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                             cwd=str(folder))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if child.poll() is not None:
                raise RuntimeError(f"the service exited ({child.returncode}): "
                                   f"{(folder / 'serve.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/v1/health", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the service did not answer within 60 s")
            time.sleep(0.1)
        yield url, child.pid
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        log.close()


def serve_profiled(config: Path, port: int, out: Path) -> None:
    """The service with cProfile on its ledger thread and counters on the store: how many
    ``append`` and ``put_evidence`` calls (each its own durable transaction on SQLite) the
    ledger thread made, and the profile of everything it ran."""
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415

    import uvicorn  # noqa: PLC0415

    from triz_ri_smart_ai_evaluator.service.app import create_app  # noqa: PLC0415
    from triz_ri_smart_ai_evaluator.service.config import load_config  # noqa: PLC0415
    from triz_ri_smart_ai_evaluator.service.runtime import Runtime  # noqa: PLC0415

    settings, base = load_config(config)
    runtime = Runtime.start(settings, base)
    profiler = cProfile.Profile()
    counts: Counter[str] = Counter()
    busy = [0.0]
    store = runtime.store
    for name in ("append", "put_evidence", "attempt_events", "scan"):
        original = getattr(store, name)

        def counted(*args: Any, _name: str = name, _original: Any = original,
                    **kwargs: Any) -> Any:
            counts[_name] += 1
            return _original(*args, **kwargs)

        setattr(store, name, counted)
    plain_call = runtime.call

    async def call(fn: Any) -> Any:
        def timed() -> Any:
            t0 = time.perf_counter()
            profiler.enable()
            try:
                return fn()
            finally:
                profiler.disable()
                busy[0] += time.perf_counter() - t0

        return await plain_call(timed)

    runtime.call = call  # type: ignore[method-assign]
    try:
        uvicorn.run(create_app(runtime), host="127.0.0.1", port=port, log_level="warning",
                    access_log=False)
    finally:
        runtime.close()
        profiler.dump_stats(str(out))
        stats = pstats.Stats(str(out))
        with (out.with_suffix(".txt")).open("w") as f:
            stats.stream = f  # type: ignore[attr-defined]
            stats.sort_stats("cumulative").print_stats(45)
            stats.sort_stats("tottime").print_stats(30)
        out.with_suffix(".json").write_text(json.dumps(
            {"store_calls": dict(counts), "ledger_thread_busy_s": busy[0]}))


# -- the ledger after the run ------------------------------------------------------------------

def check_ledger(folder: Path, attempt_ids: list[str], *, postgres: dict[str, str] | None
                 ) -> dict[str, Any]:
    """Every returned attempt id exactly once as ``attempt.initiated``; nothing initiated that
    no client was told about; and the whole ledger verifies (after a final checkpoint)."""
    from triz_ri_smart_ai_evaluator.ledger.events import parse_body  # noqa: PLC0415
    from triz_ri_smart_ai_evaluator.ledger.log import (  # noqa: PLC0415
        LOG_VKEY_FILE,
        check_ledger,
        load_log_signer,
        load_vkey,
    )
    from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy  # noqa: PLC0415

    signer = load_log_signer(folder / "keys")
    policy = CheckpointPolicy(signer, signer.name, 1000, 60.0, time.time)
    store: Any
    if postgres is None:
        from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore  # noqa: PLC0415

        store = SqliteStore.open(folder / "ledger.db", policy=policy)
    else:
        from triz_ri_smart_ai_evaluator.ledger.postgres_store import (  # noqa: PLC0415
            PostgresStore,
        )

        store = PostgresStore.open(postgres["dsn"], policy=policy, schema=postgres["schema"])
    try:
        initiated: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        for seq, body in store.scan():
            event = parse_body(body, seq=seq)
            kinds[event["kind"]] += 1
            if event["kind"] == "attempt.initiated":
                initiated[event["attempt"]] += 1
        store.append([], force_checkpoint=True)
        t = time.perf_counter()
        report = check_ledger(store, log_key=load_vkey(folder / "keys" / LOG_VKEY_FILE))
        verify_s = time.perf_counter() - t
        size = store.size()
    finally:
        store.close()
    returned = Counter(attempt_ids)
    return {
        "events": size, "kinds": dict(kinds),
        "attempts_returned": len(attempt_ids), "attempts_initiated": sum(initiated.values()),
        "duplicated_ids": sorted(a for a, n in returned.items() if n > 1)[:10],
        "lost": sorted(set(returned) - set(initiated))[:10],
        "initiated_twice": sorted(a for a, n in initiated.items() if n > 1)[:10],
        "unreported": sorted(set(initiated) - set(returned))[:10],
        "verified": report.ok, "verify_seconds": round(verify_s, 3),
        "verify_report": None if report.ok else report.to_dict(),
    }


# -- PostgreSQL ------------------------------------------------------------------------------


@contextlib.contextmanager
def pg_schema(admin: str) -> Iterator[dict[str, str]]:
    """A throw-away ledger schema with its owner, writer and reader roles; dropped after."""
    from psycopg.conninfo import make_conninfo  # noqa: PLC0415

    from benchmarks._pg import drop_throwaway_ledger  # noqa: PLC0415
    from triz_ri_smart_ai_evaluator.ledger.postgres_store import PostgresStore  # noqa: PLC0415

    base = f"bench_service_{secrets.token_hex(4)}"
    names = {"schema": base, "owner_role": f"{base}_owner", "writer_role": f"{base}_writer",
             "reader_role": f"{base}_reader"}
    try:
        PostgresStore.init_schema(admin, **names)
        yield {"dsn": make_conninfo(admin, user=names["writer_role"]), "schema": base}
    finally:
        drop_throwaway_ledger(admin, names)


# -- one ledger, end to end ------------------------------------------------------------------

def service_folder(root: Path, clients: int, postgres: dict[str, str] | None) -> Path:
    folder = root / ("svc-pg" if postgres else "svc-sqlite")
    init_service_dir(folder, policies=max(1, min(clients, 64)))
    config = folder / "service.yaml"
    doc = yaml.safe_load(config.read_text("utf-8"))
    doc["harness"] = {"workers": 0, "out": "runs"}
    if postgres is not None:
        doc["ledger"] = {"postgres": postgres["dsn"], "schema": postgres["schema"]}
    config.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    return folder


def run_backend(root: Path, args: argparse.Namespace, postgres: dict[str, str] | None
                ) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        proxy = None
        if postgres is not None and args.round_trips:
            from tests.ledger._pgwire import counting  # noqa: PLC0415

            proxy, dsn = stack.enter_context(counting(postgres["dsn"]))
            postgres = postgres | {"dsn": dsn}
        return _run_backend(root, args, postgres, proxy)


def _run_backend(root: Path, args: argparse.Namespace, postgres: dict[str, str] | None,
                 proxy: Any) -> dict[str, Any]:
    folder = service_folder(root, args.clients, postgres)
    profile = folder / "ledger-thread.prof" if args.profile else None
    out: dict[str, Any] = {"ledger": "postgres" if postgres else "sqlite"}
    ids: list[str] = []
    with serve(folder, profile=profile) as (url, pid):
        out["service_pid"] = pid

        base = Plan(url=url, folder=str(folder), clients=args.clients,
                    requests=args.requests, seconds=args.seconds,
                    trusted_workers=args.trusted_workers, client=args.client)

        def plan(**changes: Any) -> Plan:
            return dataclasses.replace(base, **changes)

        warm = drive(plan(requests=min(100, args.requests), trusted_every=1))
        ids += warm["attempt_ids"]
        baseline = drive(plan(baseline=True))
        out["baseline_health"] = baseline["submissions"]
        mark = proxy.counts.snapshot() if proxy is not None else None
        alone = drive(plan())
        ids += alone["attempt_ids"]
        out["submissions_alone"] = alone["submissions"]
        if proxy is not None:
            _, trips = proxy.counts.since(mark)
            out["round_trips_per_submission"] = round(
                trips / max(alone["submissions"]["ok"], 1), 2)
        if args.trusted_every:
            mixed = drive(plan(trusted_every=args.trusted_every))
            ids += mixed["attempt_ids"]
            out["submissions_with_trusted"] = mixed["submissions"]
            out["trusted"] = mixed["trusted"] | {"recorded": mixed["trusted_recorded"],
                                                 "drain_seconds": mixed["drain_seconds"]}
    out["ledger_check"] = check_ledger(folder, ids, postgres=postgres)
    if profile is not None:
        counters = json.loads(profile.with_suffix(".json").read_text())
        submitted = len(ids)
        out["profile"] = counters | {
            "profile_text": str(profile.with_suffix(".txt")),
            "note": "store calls include the warm-up and the trusted requests; see the text "
                    "profile for where the ledger thread's time goes",
            "submissions_in_all": submitted}
    return out


def _line(label: str, s: dict[str, Any]) -> str:
    lat = s["latency_ms"]
    bad = {k: v for k, v in s["statuses"].items() if int(k) >= 400}
    return (f"  {label:<34} {s['ok_per_s']:>8.1f}/s  ok {s['ok']:>6} in {s['seconds']:>6.2f} s"
            f"  p50 {lat['p50']:>7.2f} ms  p95 {lat['p95']:>7.2f}  p99 {lat['p99']:>7.2f}"
            + (f"  errors {bad}" if bad or s["transport_failures"] else ""))


def print_report(result: dict[str, Any]) -> None:
    every = result["trusted_every"]
    trusted = f"trusted on every {every}th attempt" if every else "no trusted components"
    print(f"service load: {result['clients']} clients, <= {result['requests']} requests and "
          f"<= {result['seconds']} s per phase, {trusted}; {result['client']} client; "
          f"{result['machine']}")
    for backend in result["backends"]:
        if "skipped" in backend:
            print(f"{backend['ledger']}: skipped ({backend['skipped']})")
            continue
        print(f"{backend['ledger']}:")
        base = backend["baseline_health"]
        print(_line("baseline GET /v1/health", base))
        print(_line("submissions (policy clients alone)", backend["submissions_alone"]))
        if "submissions_with_trusted" in backend:
            print(_line("submissions (+ trusted recording)", backend["submissions_with_trusted"]))
            print(_line("trusted requests (concurrently)", backend["trusted"]))
        ratio = backend["submissions_alone"]["ok_per_s"] / max(base["ok_per_s"], 1e-9)
        print(f"  submissions / health baseline      {ratio:.2f}")
        if "round_trips_per_submission" in backend:
            print(f"  PostgreSQL round trips per submission (clients alone, counted on the wire)"
                  f" {backend['round_trips_per_submission']:.2f}")
        c = backend["ledger_check"]
        print(f"  ledger: {c['events']} events, {c['attempts_returned']} attempt ids returned, "
              f"{c['attempts_initiated']} initiated, lost {len(c['lost'])}, duplicated "
              f"{len(c['duplicated_ids']) + len(c['initiated_twice'])}, verified "
              f"{c['verified']} ({c['verify_seconds']} s)")
        if "profile" in backend:
            p = backend["profile"]
            n = max(p["submissions_in_all"], 1)
            print(f"  ledger thread busy {p['ledger_thread_busy_s']:.2f} s; store calls "
                  f"{p['store_calls']} ({', '.join(f'{k} {v / n:.2f}' for k, v in p['store_calls'].items())} "  # noqa: E501
                  f"per submission); profile: {p['profile_text']}")
    for ledger, name, target in (("sqlite", "SQLite", TARGET_SQLITE_PER_S),
                                 ("postgres", "PostgreSQL", TARGET_POSTGRES_PER_S)):
        found = next((b for b in result["backends"] if b["ledger"] == ledger), None)
        if found and "submissions_alone" in found:
            rate = found["submissions_alone"]["ok_per_s"]
            print(f"target: >= {target} submissions/s with {name}: {rate:.0f}/s "
                  f"({'met' if rate >= target else 'MISSED'})")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "drive":
        p = argparse.ArgumentParser(prog="service_load.py drive")
        p.add_argument("--url", required=True)
        p.add_argument("--folder", required=True)
        p.add_argument("--clients", type=int, default=8)
        p.add_argument("--requests", type=int, default=200)
        p.add_argument("--seconds", type=float, default=30.0)
        p.add_argument("--trusted-every", type=int, default=1)
        p.add_argument("--trusted-workers", type=int, default=2)
        p.add_argument("--client", choices=("raw", "httpx"), default="httpx")
        a = p.parse_args(argv[1:])
        figures = drive(Plan(url=a.url, folder=a.folder, clients=a.clients,
                            requests=a.requests, seconds=a.seconds,
                            trusted_every=a.trusted_every, trusted_workers=a.trusted_workers,
                            client=a.client))
        sys.stdout.write(json.dumps(figures) + "\n")
        return 0
    if argv and argv[0] == "serve-profiled":
        p = argparse.ArgumentParser(prog="service_load.py serve-profiled")
        p.add_argument("--config", required=True, type=Path)
        p.add_argument("--port", required=True, type=int)
        p.add_argument("--out", required=True, type=Path)
        a = p.parse_args(argv[1:])
        serve_profiled(a.config, a.port, a.out)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=32, help="concurrent policy clients")
    p.add_argument("--requests", type=int, default=3000,
                   help="at most this many requests per phase")
    p.add_argument("--seconds", type=float, default=20.0, help="at most this long per phase")
    p.add_argument("--trusted-every", type=int, default=4,
                   help="trusted components record on every Nth attempt (0: never)")
    p.add_argument("--trusted-workers", type=int, default=2)
    p.add_argument("--client", choices=("raw", "httpx"), default="raw",
                   help="the load generator's HTTP stack (the baseline uses the same)")
    p.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    p.add_argument("--profile", action="store_true",
                   help="cProfile the service's ledger thread and count store calls")
    p.add_argument("--round-trips", action="store_true",
                   help="count PostgreSQL round trips per submission through a proxy "
                        "(slows the PostgreSQL run)")
    p.add_argument("--keep", action="store_true", help="keep the service folders")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    args = p.parse_args(argv)
    result: dict[str, Any] = {
        "clients": args.clients, "requests": args.requests, "seconds": args.seconds,
        "trusted_every": args.trusted_every, "client": args.client,
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python "
                   f"{platform.python_version()}",
        "backends": []}
    root = Path(tempfile.mkdtemp(prefix="triz-service-load-"))
    try:
        result["backends"].append(run_backend(root, args, None))
        if not args.no_pg:
            from benchmarks._pg import admin_dsn  # noqa: PLC0415

            admin, why = admin_dsn()
            if admin is None:
                result["backends"].append({"ledger": "postgres", "skipped": why})
            else:
                with pg_schema(admin) as pg:
                    result["backends"].append(run_backend(root, args, pg))
    finally:
        if not args.keep and not args.profile:
            import shutil  # noqa: PLC0415

            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        print_report(result)
    ok = all("skipped" in b or (b["ledger_check"]["verified"]
                                and not b["ledger_check"]["lost"]
                                and not b["ledger_check"]["duplicated_ids"])
             for b in result["backends"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
