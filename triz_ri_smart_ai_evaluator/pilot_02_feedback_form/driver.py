"""The harness's HTTP driver: it submits the control scenarios to the running candidate and
records every exchange (pilot 8), and probes the original functions for the Regression metric.

The driver talks to the application only over HTTP, as a browser would; it never imports or
inspects the candidate's code (DESIGN: judge black-box over HTTP).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import httpx

from .contract import is_valid_run_token

FEEDBACK_PATH = "/api/feedback"
CONTACT_PATH = "/contact"
#: The original functions of the starting repository (pilot 7, Regression).
ORIGINAL_FUNCTIONS = ("/", "/about", "/api/info", "/health")
#: Pages crawled for the secret scan besides the original functions.
EXTRA_PAGES = ("/contact", "/this-page-does-not-exist")
MAX_BODY = 256 * 1024
_ASSET = re.compile(r"""(?:src|href)\s*=\s*["'](/static/[^"'?#]{1,200})""")
#: The hidden field of the contact page that carries the token the page issued.
_PAGE_TOKEN = re.compile(r"""name=["']run_token["'][^>]*?value=["']([A-Za-z0-9_-]{16,64})["']""")
FIELDS = ("name", "email", "message", "phone", "run_token")
#: The order contact.js reads the form's fields in (a browser's JSON body has this order).
FORM_ORDER = ("run_token", "name", "email", "phone", "message")


@dataclass(frozen=True, slots=True)
class ClientProfile:
    """How one kind of visitor talks to the site (issue 12 item 1).  A browser opens the
    contact page first (keeping whatever cookies it sets), then posts from it with the page as
    Referer, as contact.js does (JSON) or, with JavaScript off, as the HTML form does
    (form-encoded); every field of the form is sent, empty ones as "".  A script posts JSON
    straight to the route with only the fields it has, no cookies and no browser headers."""

    name: str
    browser: bool
    headers: Mapping[str, str]


_HTML = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
_CHROME_HTML = ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
                "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7")


def _chromium(ua: str, platform: str, brand: str, version: str, language: str,
              mobile: bool = False) -> dict[str, str]:
    return {
        "User-Agent": ua, "Accept": _CHROME_HTML, "Accept-Language": language,
        "Accept-Encoding": "gzip, deflate, br, zstd",
        "sec-ch-ua": f'"{brand}";v="{version}", "Chromium";v="{version}", '
                     '"Not_A Brand";v="24"',
        "sec-ch-ua-mobile": "?1" if mobile else "?0", "sec-ch-ua-platform": f'"{platform}"',
        "Upgrade-Insecure-Requests": "1",
    }


def _gecko(ua: str, language: str) -> dict[str, str]:
    return {"User-Agent": ua, "Accept": _HTML, "Accept-Language": language,
            "Accept-Encoding": "gzip, deflate, br, zstd", "Upgrade-Insecure-Requests": "1"}


#: Real browsers' header sets, rotated per visitor (recorded with every exchange).
BROWSERS: tuple[ClientProfile, ...] = (
    ClientProfile("chrome-windows", True, _chromium(
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/131.0.0.0 Safari/537.36", "Windows", "Google Chrome", "131",
        "en-US,en;q=0.9")),
    ClientProfile("chrome-linux", True, _chromium(
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/130.0.0.0 Safari/537.36", "Linux", "Google Chrome", "130",
        "de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7")),
    ClientProfile("edge-windows", True, _chromium(
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", "Windows", "Microsoft Edge", "131",
        "fr-FR,fr;q=0.9,en;q=0.8")),
    ClientProfile("chrome-android", True, _chromium(
        "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/131.0.0.0 Mobile Safari/537.36", "Android", "Google Chrome", "131",
        "pl-PL,pl;q=0.9,en-US;q=0.8", mobile=True)),
    ClientProfile("firefox-linux", True, _gecko(
        "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        "cs-CZ,cs;q=0.8,en-US;q=0.5,en;q=0.3")),
    ClientProfile("firefox-windows", True, _gecko(
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:132.0) Gecko/20100101 Firefox/132.0",
        "en-GB,en;q=0.5")),
    ClientProfile("safari-mac", True, {
        "User-Agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
                      "(KHTML, like Gecko) Version/18.1 Safari/605.1.15",
        "Accept": _HTML, "Accept-Language": "ja-JP,ja;q=0.9", "Accept-Encoding":
        "gzip, deflate, br"}),
    ClientProfile("safari-iphone", True, {
        "User-Agent": "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) "
                      "AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 "
                      "Safari/604.1",
        "Accept": _HTML, "Accept-Language": "es-ES,es;q=0.9", "Accept-Encoding":
        "gzip, deflate, br"}),
)
#: The second, different profile of the differential replay (spec 9.7): plain scripts.
SCRIPTS: tuple[ClientProfile, ...] = (
    ClientProfile("python-requests", False, {
        "User-Agent": "python-requests/2.32.3", "Accept": "*/*",
        "Accept-Encoding": "gzip, deflate"}),
    ClientProfile("curl", False, {"User-Agent": "curl/8.5.0", "Accept": "*/*"}),
    ClientProfile("python-httpx", False, {
        "User-Agent": "python-httpx/0.28.1", "Accept": "*/*",
        "Accept-Encoding": "gzip, deflate"}),
)


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Exchange:
    """One HTTP request and its response, as recorded (pilot 8): the request's headers and
    body as sent, and which visitor profile sent it (issue 12 item 1)."""

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
    request_headers: Mapping[str, str] = field(default_factory=dict)
    profile: str | None = None
    #: The run_token a POST carried (for a browser, the one its page view issued).
    run_token: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "method": self.method,
            "path": self.path,
            "profile": self.profile,
            "run_token": self.run_token,
            "request_headers": dict(self.request_headers),
            "request_body": self.request_body,
            "status_code": self.status_code,
            "response_headers": dict(self.response_headers),
            "response_body": self.response_body,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
        }


def _json_text(pairs: Sequence[tuple[str, Any]]) -> str:
    """A JSON object from ``pairs`` in order, duplicate keys kept (json.dumps cannot)."""
    return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                           for k, v in pairs) + "}"


def _form_text(pairs: Sequence[tuple[str, Any]]) -> str:
    flat = [(k, item) for k, v in pairs for item in (v if isinstance(v, list) else [v])]
    return urlencode(flat)


def _script_pairs(scenario: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """What a script posts: the non-null contract fields."""
    return [(k, scenario[k]) for k in FIELDS if scenario.get(k) is not None]


def _browser_pairs(values: Mapping[str, Any], extras: Sequence[tuple[str, Any]]
                   ) -> list[tuple[str, Any]]:
    """What a browser posts: every form field ("" for an empty one), then ``extras``, a
    repeated contract field repeating the value really posted."""
    pairs = [(k, "" if values.get(k) is None else values[k]) for k in FORM_ORDER]
    return pairs + [(k, values[k] if k in FIELDS and values.get(k) is not None else v)
                    for k, v in extras]


def largest_body(scenario: Mapping[str, Any], extra_fields: Sequence[Sequence[Any]] = ()) -> int:
    """Bytes of the largest POST body any visitor may send for ``scenario`` with
    ``extra_fields``: a script's JSON, or a browser's JSON or form-encoded body (a page-issued
    token has the length of the scenario's own)."""
    extras = [(str(k), v) for k, v in extra_fields]
    browser = _browser_pairs(scenario, extras)
    return max(len(_json_text(_script_pairs(scenario) + extras).encode()),
               len(_json_text(browser).encode()), len(_form_text(browser).encode()))


class Driver:
    """Sends requests to one running application.  Connection failures are recorded as an
    exchange with ``status_code=None`` and the error, never raised: a candidate that does not
    answer has produced evidence too.  Thread-safe per instance only when each thread uses its
    own Driver."""

    def __init__(self, base_url: str, *, timeout: float = 10.0,
                 rng: random.Random | None = None, think: float = 0.0) -> None:
        self._base = base_url.rstrip("/")
        self._client = httpx.Client(
            base_url=base_url, timeout=timeout, follow_redirects=False, trust_env=False
        )
        # Deterministic for a run's seed (tests reproduce it), unknown to the candidate.
        self._rng = rng or random.Random(0)  # noqa: S311 - timing jitter, not a secret
        self._think = think

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self, method: str, path: str, *, scenario_id: str | None = None, body: Any = None,
        raw: bytes | None = None, headers: Mapping[str, str] | None = None,
        profile: str | None = None, token: Any = None,
    ) -> Exchange:
        started = _stamp()
        # Never the library's own headers (a python-httpx User-Agent gives the evaluator
        # away): a visitor's header set, by default a browser's.
        headers = dict(BROWSERS[0].headers if headers is None else headers)
        request = self._client.build_request(
            method, path, content=raw,
            json=body if raw is None and body is not None else None, headers=headers,
        )
        given = {h.lower() for h in headers}
        for name in ("user-agent", "accept", "accept-encoding"):
            if name not in given:
                request.headers.pop(name, None)
        sent = dict(request.headers)
        recorded = body if raw is None else raw.decode("utf-8", "replace")
        try:
            response = self._client.send(request)
            text = response.content[:MAX_BODY].decode("utf-8", "replace")
            return Exchange(scenario_id, method, path, recorded, response.status_code,
                            dict(response.headers), text, started, _stamp(), None, sent,
                            profile, None if token is None else str(token))
        except httpx.HTTPError as e:
            return Exchange(scenario_id, method, path, recorded, None, {}, "", started,
                            _stamp(), f"{type(e).__name__}: {e}", sent, profile,
                            None if token is None else str(token))

    def _pause(self) -> None:
        """Think time: jittered, now and then a longer pause (issue 12: no bursts)."""
        if self._think <= 0:
            return
        wait = self._rng.uniform(0, self._think)
        if self._rng.random() < 0.03:
            wait += self._rng.uniform(0, 10 * self._think)
        time.sleep(wait)

    def submit(self, scenario: Mapping[str, Any], *, profile: ClientProfile | None = None,
               extra_fields: Sequence[Sequence[Any]] = (), form: bool = False,
               again: str | None = None, on_token: Callable[[str], None] | None = None,
               ) -> list[Exchange]:
        """One visitor submitting one scenario: the exchanges, the POST last.

        A script (and the default, ``profile=None``) posts the non-null fields as JSON; a
        browser loads the contact page first, then posts every form field ("" for an empty
        one) as contact.js does, or form-encoded when ``form``, with the run_token the page
        issued, as a real browser does (the scenario's own token only when the page issued
        none).  ``again`` is the token of this visitor's previous POST: the same form sent a
        second time, no new page view.  ``on_token`` hears the token before it is posted.
        ``extra_fields`` (key, value) pairs follow the contract's fields, duplicates and arrays
        as given (issue 12 item 2).
        """
        sid = str(scenario["id"])
        extras = [(str(k), v) for k, v in extra_fields]
        if again is None:
            self._client.cookies.clear()  # every scenario is a new visitor
        if profile is None or not profile.browser:
            pairs = _script_pairs(scenario)
            headers = dict(profile.headers) if profile else None
            if headers is not None:
                headers["Content-Type"] = "application/json"
            name = profile.name if profile else None
            if on_token is not None:
                on_token(str(scenario["run_token"]))
            if not extras and profile is None:
                return [self._send("POST", FEEDBACK_PATH, scenario_id=sid, body=dict(pairs),
                                   token=scenario.get("run_token"))]
            raw = _json_text(pairs + extras).encode()
            return [self._send("POST", FEEDBACK_PATH, scenario_id=sid, raw=raw,
                               headers=headers, profile=name, token=scenario.get("run_token"))]
        token = again
        sent: list[Exchange] = []
        if again is None:
            page = self._send("GET", CONTACT_PATH, scenario_id=sid, headers=profile.headers,
                              profile=profile.name)
            sent.append(page)
            found = _PAGE_TOKEN.search(page.response_body) if page.status_code == 200 else None
            token = found.group(1) if found and is_valid_run_token(scenario.get("run_token")) \
                else scenario.get("run_token")
            self._pause()
        if on_token is not None and token is not None:
            on_token(str(token))
        # A repeated contract field repeats the value really posted (the page's token).
        pairs = _browser_pairs({**scenario, "run_token": token}, extras)
        headers = {k: v for k, v in profile.headers.items() if k != "Upgrade-Insecure-Requests"}
        headers.update({"Origin": self._base, "Referer": self._base + CONTACT_PATH})
        if form:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            raw = _form_text(pairs).encode()
        else:
            headers.update({"Content-Type": "application/json", "Accept": "*/*"})
            raw = _json_text(pairs).encode()
        post = self._send("POST", FEEDBACK_PATH, scenario_id=sid, raw=raw, headers=headers,
                          profile=profile.name, token=token)
        self._pause()
        return [*sent, post]

    def get(self, path: str) -> Exchange:
        return self._send("GET", path)

    def malformed_post(self) -> Exchange:
        """A body that is not JSON: the error page must not leak anything either."""
        return self._send("POST", FEEDBACK_PATH, raw=b'{"name": ',
                          headers={"Content-Type": "application/json"})

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


def ran_out_of_clock(exchange: Exchange) -> bool:
    """No answer because the harness's own clock ran out (an httpx timeout), as opposed to an
    application that closed the connection or answered (docs/adr/0016)."""
    return exchange.status_code is None and "Timeout" in (exchange.error or "").split(":", 1)[0]


def regression_probe(
    baseline: Sequence[Exchange], candidate: Sequence[Exchange]
) -> dict[str, Any]:
    """Compare the original functions of the candidate with the unmodified repository run in
    the same sandbox: same status, content type and body (pilot 7, Regression).

    A function the unmodified repository did not answer, or whose request to the candidate ran
    out of the harness's clock, is not compared (``ok`` None) and is listed in ``unread``: the
    harness holds no answer to compare (spec 6.6, docs/adr/0016), so the run cannot be scored
    on it."""
    base = {e.path: e for e in baseline}
    results: dict[str, dict[str, Any]] = {}
    unread: dict[str, str] = {}
    for ex in candidate:
        if ex.path not in ORIGINAL_FUNCTIONS:
            continue
        ref = base.get(ex.path)
        same: bool | None = None
        unread.pop(ex.path, None)  # the last request of a path is the one compared
        if ref is None or ref.status_code is None:
            unread[ex.path] = "the unmodified repository did not answer"
        elif ran_out_of_clock(ex):
            unread[ex.path] = "the request ran out of the harness's clock"
        else:
            same = (
                ex.status_code == ref.status_code
                and ex.response_headers.get("content-type")
                == ref.response_headers.get("content-type")
                and ex.response_body == ref.response_body
            )
        results[ex.path] = {
            "ok": same,
            "baseline_status": None if ref is None else ref.status_code,
            "candidate_status": ex.status_code,
        }
    passed = sum(1 for r in results.values() if r["ok"])
    return {"functions": results, "passed": passed, "total": len(ORIGINAL_FUNCTIONS),
            "unread": [f"Regression {path}: {why}" for path, why in sorted(unread.items())]}
