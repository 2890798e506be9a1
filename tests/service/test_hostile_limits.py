"""Attacks on a real ``triz-eval serve`` process (issue 11, items 1 and 6): a chunked body
without a credential, slowloris, a policy hammering refused requests, and every refusal kind
visible in the server's log and, on the trusted port, as a bounded ledger event.

Each test starts its own server on a free loopback port and stops it by its PID.  Every loop
is bounded in count and in time."""

from __future__ import annotations

import json
import select
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from triz_ri_smart_ai_evaluator.ledger.events import parse_body
from triz_ri_smart_ai_evaluator.service.auth import signed_headers
from triz_ri_smart_ai_evaluator.service.config import (
    load_config,
    load_principal_key,
)
from triz_ri_smart_ai_evaluator.service.runtime import open_store

from ._server_process import ServerProcess
from .conftest import prepare_service_dir

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"
MIB = 1024 * 1024


class Server:
    """A real server process (``ServerProcess``) with the test's ``limits`` in service.yaml."""

    def __init__(self, folder: Path, limits: dict[str, Any]) -> None:
        prepare_service_dir(folder, edit={"limits": limits})
        self.folder = folder
        self._process = ServerProcess(folder)
        self.port = self._process.port
        self.url = self._process.base_url
        self.token = self._process.tokens["policy-1"]
        self._process.start(timeout=60)
        assert self._process.proc is not None
        assert self._process.log is not None
        self.proc = self._process.proc
        self.log = self._process.log

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def stop(self) -> None:
        self._process.stop()

    def refusal_lines(self, *, at_least: int = 1) -> list[dict[str, Any]]:
        """The structured refusal lines of the log (waiting up to 5 s for ``at_least``: a
        line is written just after its response)."""
        deadline = time.monotonic() + 5
        while True:
            lines = self._refusal_lines()
            if len(lines) >= at_least or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def _refusal_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log.read_text("utf-8", "replace").splitlines():
            if line.startswith("{") and '"event": "refusal"' in line:
                lines.append(json.loads(line))
        return lines

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The ledger's events of ``kind`` (read after :meth:`stop`)."""
        config, base = load_config(self.folder / "service.yaml")
        store = open_store(config, base)
        try:
            return [e for e in (parse_body(b, seq=s) for s, b in store.scan(1))
                    if e["kind"] == kind]
        finally:
            store.close()


def _server(tmp_path: Path, **limits: Any) -> Iterator[Server]:
    server = Server(tmp_path / "svc", limits)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield from _server(tmp_path)


def _read_status(sock: socket.socket, deadline: float) -> int:
    data = b""
    while b"\r\n" not in data and time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1])


def test_chunked_400_mb_body_without_a_credential_is_a_413_and_memory_stays_flat(
        server: Server) -> None:
    before = server.rss_kib()
    started = time.monotonic()
    deadline = started + 60
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    with sock:
        sock.sendall(b"POST /v1/policy/attempts HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"x" * (64 * 1024)
        chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        sent, status = 0, None
        sock.setblocking(False)
        while sent < 400 * MIB and time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock], [], 1.0)
            if readable:
                sock.setblocking(True)
                status = _read_status(sock, deadline)
                break
            if writable:
                try:
                    sent += max(0, sock.send(chunk) - 8)
                except (BlockingIOError, InterruptedError):
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    break
        else:
            sock.setblocking(True)
    elapsed = time.monotonic() - started
    assert status == 413, f"sent {sent} bytes, no 413"
    assert sent < 64 * MIB  # the server stopped reading long before 400 MB
    assert elapsed < 30
    assert server.rss_kib() - before < 64 * 1024
    assert any(r["status"] == 413 for r in server.refusal_lines())


def test_slowloris_connections_are_closed_after_the_header_timeout(tmp_path: Path) -> None:
    for server in _server(tmp_path, header_timeout_seconds=2.0):
        socks = []
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        started = time.monotonic()
        # meanwhile the service answers
        assert httpx.get(f"{server.url}/v1/health", timeout=5, trust_env=False
                         ).status_code == 200
        closed_at = []
        for s in socks:
            s.settimeout(max(0.1, started + 15 - time.monotonic()))
            try:
                s.sendall(b"X-Slow: 1\r\n")  # one more header line, never the end
                got = s.recv(1024)
            except TimeoutError:
                got = b"timeout"
            except OSError:
                # Closed by the server: a reset (our last line was still unread in its buffer
                # when it closed) or a broken pipe is a dropped connection too.
                got = b""
            closed_at.append(time.monotonic() - started)
            assert got == b"", "still open after 15 s"
            s.close()
        assert max(closed_at) < 10
        assert httpx.get(f"{server.url}/v1/health", timeout=5, trust_env=False
                         ).status_code == 200


def test_a_policy_hammering_refused_requests_gets_429_and_the_violations_stop(
        tmp_path: Path) -> None:
    for server in _server(tmp_path, credential_refusals={"per_second": 2, "burst": 10}):
        headers = {"Authorization": f"Bearer {server.token}"}
        statuses: list[int] = []
        retry = None
        started = time.monotonic()
        with httpx.Client(base_url=server.url, timeout=10, trust_env=False) as http:
            for _ in range(300):
                if time.monotonic() - started > 20:
                    break
                answer = http.post("/v1/policy/requests", headers=headers, json={
                    "resource": "control_sets", "action": "read", "payload": {}})
                statuses.append(answer.status_code)
                if answer.status_code == 429:
                    retry = answer.headers.get("retry-after")
        elapsed = time.monotonic() - started
        assert statuses[:10] == [403] * 10
        assert statuses.count(429) > 200
        assert retry is not None
        assert int(retry) >= 1
        lines = [r for r in server.refusal_lines() if r["status"] == 429]
        assert lines
        assert lines[0]["principal"] == "policy-1"
        server.stop()
        violations = server.events("access.violation")
        assert 10 <= len(violations) <= 10 + 2 * elapsed + 2


def test_every_refusal_kind_is_a_log_line_and_a_bounded_ledger_event(tmp_path: Path) -> None:
    for server in _server(tmp_path, refusal_events_per_minute=2,
                          address_refusals={"per_second": 1, "burst": 40}):
        key = load_principal_key(server.folder / "principals" / "verifier-1.key")
        with httpx.Client(base_url=server.url, timeout=10, trust_env=False) as http:
            # 401: a bad policy token (the policy port's refusals are log lines only)
            assert http.get("/v1/policy/tasks/x",
                            headers={"Authorization": "Bearer nope"}).status_code == 401
            body = json.dumps({"resource": "attempts", "action": "read",
                               "payload": {"attempt_id": "att-x"}}).encode()
            for _ in range(5):  # 401: a forged signature on the trusted port
                forged = signed_headers(key, "verifier-1", "POST", "/v1/trusted/requests",
                                        "", body + b" ")
                forged["Content-Type"] = "application/json"
                assert http.post("/v1/trusted/requests", content=body,
                                 headers=forged).status_code == 401
            assert http.post("/v1/trusted/requests", content=b'{"a": 1, "a": 2}', headers={
                "Content-Type": "application/json"}).status_code == 400
            assert http.post("/v1/trusted/requests", content=b"x" * (3 * MIB)
                             ).status_code == 413
            statuses = []
            for _ in range(60):  # the address's refusal budget runs out: 429
                statuses.append(http.post("/v1/trusted/requests", content=b"{").status_code)
                if statuses[-1] == 429:
                    break
            assert statuses[-1] == 429
        lines = server.refusal_lines(at_least=len(statuses) + 8)
        server.stop()
        seen = {(r["status"], r["route"]) for r in lines}
        assert (401, "/v1/policy/tasks/x") in seen
        assert {(401, "/v1/trusted/requests"), (400, "/v1/trusted/requests"),
                (413, "/v1/trusted/requests"), (429, "/v1/trusted/requests")} <= seen
        assert any("signature" in r["detail"] for r in lines)
        assert all({"time", "client", "route", "status", "reason", "principal"} <= r.keys()
                   for r in lines)
        events = [e["data"] for e in server.events("service.refusal")]
        reasons = [e["reason"] for e in events]
        assert {"unauthenticated", "malformed", "body_too_large", "rate_limited"} <= set(reasons)
        assert all(reasons.count(r) <= 2 for r in set(reasons))  # at most 2 per minute each
        assert all(e["route"].startswith("/v1/trusted/") for e in events)
