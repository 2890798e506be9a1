"""The harness's HTTP driver: it submits the control scenarios to the running candidate and
records every exchange (pilot 8), and probes the original functions for the Regression metric.

The driver talks to the application only over HTTP, as a browser would; it never imports or
inspects the candidate's code (DESIGN: judge black-box over HTTP).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

FEEDBACK_PATH = "/api/feedback"
#: The original functions of the starting repository (pilot 7, Regression).
ORIGINAL_FUNCTIONS = ("/", "/about", "/api/info", "/health")
#: Pages crawled for the secret scan besides the original functions.
EXTRA_PAGES = ("/contact", "/this-page-does-not-exist")
MAX_BODY = 256 * 1024
_ASSET = re.compile(r"""(?:src|href)\s*=\s*["'](/static/[^"'?#]{1,200})""")
FIELDS = ("name", "email", "message", "phone", "run_token")


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Exchange:
    """One HTTP request and its response, as recorded (pilot 8)."""

    scenario_id: str | None
    method: str
    path: str
    request_body: Any
    status_code: int | None
    response_headers: Mapping[str, str]
    response_body: str
    started: str
    finished: str
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "method": self.method,
            "path": self.path,
            "request_body": self.request_body,
            "status_code": self.status_code,
            "response_headers": dict(self.response_headers),
            "response_body": self.response_body,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
        }


class Driver:
    """Sends requests to one running application.  Connection failures are recorded as an
    exchange with ``status_code=None`` and the error, never raised: a candidate that does not
    answer has produced evidence too."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        self._client = httpx.Client(
            base_url=base_url, timeout=timeout, follow_redirects=False, trust_env=False
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self, method: str, path: str, *, scenario_id: str | None = None, body: Any = None,
        raw: bytes | None = None,
    ) -> Exchange:
        started = _stamp()
        try:
            if raw is not None:
                response = self._client.request(
                    method, path, content=raw, headers={"Content-Type": "application/json"}
                )
            elif body is not None:
                response = self._client.request(method, path, json=body)
            else:
                response = self._client.request(method, path)
            text = response.content[:MAX_BODY].decode("utf-8", "replace")
            return Exchange(scenario_id, method, path, body, response.status_code,
                            dict(response.headers), text, started, _stamp(), None)
        except httpx.HTTPError as e:
            return Exchange(scenario_id, method, path, body, None, {}, "", started, _stamp(),
                            f"{type(e).__name__}: {e}")

    def submit(self, scenario: Mapping[str, Any]) -> Exchange:
        """POST one scenario's fields as JSON (a field that is null is left out)."""
        body = {k: scenario[k] for k in FIELDS if scenario.get(k) is not None}
        return self._send("POST", FEEDBACK_PATH, scenario_id=str(scenario["id"]), body=body)

    def get(self, path: str) -> Exchange:
        return self._send("GET", path)

    def malformed_post(self) -> Exchange:
        """A body that is not JSON: the error page must not leak anything either."""
        return self._send("POST", FEEDBACK_PATH, raw=b'{"name": ')

    def crawl(self) -> list[Exchange]:
        """Every page and static asset the secret scan reads (pilot 7: responses, served pages
        and scripts, error pages)."""
        out = [self.get(p) for p in (*ORIGINAL_FUNCTIONS, *EXTRA_PAGES)]
        assets: set[str] = set()
        for ex in out:
            if ex.status_code == 200 and "html" in ex.response_headers.get("content-type", ""):
                assets.update(_ASSET.findall(ex.response_body))
        out.extend(self.get(a) for a in sorted(assets))
        out.append(self.malformed_post())
        return out


def wait_until_serving(base_url: str, *, timeout: float) -> bool:
    """Poll ``/health`` until the application answers anything, or the time is up."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=base_url, timeout=1.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            try:
                client.get("/health")
                return True
            except httpx.HTTPError:
                time.sleep(0.05)
    return False


def regression_probe(
    baseline: Sequence[Exchange], candidate: Sequence[Exchange]
) -> dict[str, Any]:
    """Compare the original functions of the candidate with the unmodified repository run in
    the same sandbox: same status, content type and body (pilot 7, Regression)."""
    base = {e.path: e for e in baseline}
    results = {}
    for ex in candidate:
        if ex.path not in ORIGINAL_FUNCTIONS:
            continue
        ref = base.get(ex.path)
        same = (
            ref is not None
            and ref.status_code is not None
            and ex.status_code == ref.status_code
            and ex.response_headers.get("content-type") == ref.response_headers.get("content-type")
            and ex.response_body == ref.response_body
        )
        results[ex.path] = {
            "ok": same,
            "baseline_status": None if ref is None else ref.status_code,
            "candidate_status": ex.status_code,
        }
    passed = sum(1 for r in results.values() if r["ok"])
    return {"functions": results, "passed": passed, "total": len(ORIGINAL_FUNCTIONS)}
