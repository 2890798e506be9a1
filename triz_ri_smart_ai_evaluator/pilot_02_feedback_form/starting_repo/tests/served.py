"""The application as production serves it, for the tests: gunicorn with two workers.

``serve(env, state_dir)`` starts ``gunicorn --workers 2 'feedback_app:create_app()'`` on a free
port of 127.0.0.1 with the given environment, waits until ``/health`` answers and gives an
``HttpClient`` that speaks real HTTP to it. The client's calls look like Flask's test client
(``get``, ``post(json=...)``, ``post(data=...)``; ``status_code``, ``mimetype``, ``headers``,
``get_json()``, ``get_data(as_text=...)``), so a test reads the same either way. Two consecutive
requests may be served by different worker processes, as in production.

Every request is recorded against the test that made it (``conftest.py`` says which test is
running): the evaluator credits a ``test_selfcheck_<id>`` only when it passed *and* exercised the
served application (TASK.md, "Self-check tests"). Standard library only.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
WSGI_APP = "feedback_app:create_app()"
START_TIMEOUT = 30.0
#: The variables the application reads: a served app gets exactly the ones a test gives it.
APP_VARIABLES = (
    "SMTP_HOST", "SMTP_PORT", "SMTP_USERNAME", "SMTP_PASSWORD", "FEEDBACK_FROM", "FEEDBACK_TO",
    "APP_SECRET_KEY", "FEEDBACK_STATE_DIR",
)

#: The node id of the test running now (set by conftest.py), and every test that made a request.
current_test: str | None = None
used_by: set[str] = set()


class ServeError(RuntimeError):
    """The application could not be started under gunicorn."""


@dataclass
class Response:
    status_code: int
    headers: Mapping[str, str]
    data: bytes

    @property
    def mimetype(self) -> str:
        return self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()

    def get_data(self, as_text: bool = False) -> Any:
        return self.data.decode("utf-8") if as_text else self.data

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

    def get_json(self) -> Any:
        return json.loads(self.data) if self.mimetype == "application/json" else None


@dataclass
class HttpClient:
    """Real HTTP to the served application: one connection per request."""

    host: str
    port: int
    timeout: float = 15.0
    cookies: dict[str, str] = field(default_factory=dict)

    def get(self, path: str, *, headers: Mapping[str, str] | None = None) -> Response:
        return self.open("GET", path, headers=headers)

    def post(
        self,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, Any] | str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> Response:
        return self.open("POST", path, json=json, data=data, headers=headers,
                         content_type=content_type)

    def open(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, Any] | str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> Response:
        if current_test is not None:
            used_by.add(current_test)
        sent = dict(headers or {})
        body: bytes | None = None
        if json is not None:
            body = _json_bytes(json)
            sent.setdefault("Content-Type", "application/json")
        elif isinstance(data, Mapping):
            body = urllib.parse.urlencode(data, doseq=True).encode("utf-8")
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        elif data is not None:
            body = data.encode("utf-8") if isinstance(data, str) else data
        if content_type is not None:
            sent["Content-Type"] = content_type
        if self.cookies:
            sent.setdefault("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            connection.request(method, path, body=body, headers=sent)
            reply = connection.getresponse()
            payload = reply.read()
            got = {name.title(): value for name, value in reply.getheaders()}
            for value in reply.headers.get_all("Set-Cookie") or ():
                name, _, rest = value.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
            return Response(reply.status, got, payload)
        finally:
            connection.close()


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ServedApp:
    """A running ``gunicorn --workers 2`` of this repository's application."""

    def __init__(self, env: Mapping[str, str], state_dir: Path | str) -> None:
        self.env = {k: v for k, v in os.environ.items() if k not in APP_VARIABLES}
        self.env.update(env)
        self.env["FEEDBACK_STATE_DIR"] = str(state_dir)
        self.env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        self.port = free_port()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self._process: subprocess.Popen[bytes] | None = None
        self._deadline = 0.0
        self._ready = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> HttpClient:
        """A client of this application (waits for it to be ready first)."""
        self.ready()
        return HttpClient("127.0.0.1", self.port)

    def launch(self) -> ServedApp:
        """Start gunicorn without waiting for it (``ready()`` waits): several applications
        launched first and waited for afterwards boot side by side."""
        if self._process is None:
            argv = [sys.executable, "-m", "gunicorn", "--workers", "2", "--bind",
                    f"127.0.0.1:{self.port}", "--log-level", "warning", WSGI_APP]
            self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and app
                argv, cwd=REPOSITORY, env=self.env, stdout=self._log, stderr=self._log,
                start_new_session=True)  # its own process group: stop() ends all of it
            self._deadline = time.monotonic() + START_TIMEOUT
        return self

    def ready(self) -> ServedApp:
        """Wait until ``/health`` answers 200 (once; later calls return at once)."""
        process = self.launch()._process
        assert process is not None
        while not self._ready and time.monotonic() < self._deadline:
            if process.poll() is not None:
                raise ServeError(f"gunicorn exited with {process.returncode}: "
                                 f"{self.log()[-2000:]}")
            try:
                probe = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                try:
                    probe.request("GET", "/health")
                    self._ready = probe.getresponse().status == 200
                finally:
                    probe.close()
            except OSError:
                pass
            if not self._ready:
                time.sleep(0.02)
        if not self._ready:
            self.stop()
            raise ServeError(f"gunicorn did not answer /health within {START_TIMEOUT:.0f} s")
        return self

    def start(self) -> ServedApp:
        return self.launch().ready()

    def log(self) -> str:
        """What gunicorn and the application wrote to stdout and stderr so far."""
        if self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def signal_stop(self) -> None:
        """End gunicorn and its workers at once (a test server needs no graceful shutdown),
        without waiting (``stop_all`` waits once for several)."""
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)

    def stop(self) -> None:
        if self._process is not None:
            self.signal_stop()
            self._process.wait()
        self._log.close()

    def __enter__(self) -> ServedApp:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def stop_all(apps: Iterable[ServedApp]) -> None:
    """Stop several served applications at once (each takes a fraction of a second)."""
    apps = list(apps)
    for app in apps:
        app.signal_stop()
    for app in apps:
        app.stop()


def launch(env: Mapping[str, str], state_dir: Path | str) -> ServedApp:
    """Start the application under gunicorn without waiting; its ``client()`` waits."""
    return ServedApp(env, state_dir).launch()


def serve(env: Mapping[str, str], state_dir: Path | str) -> ServedApp:
    """Start the application under gunicorn and wait until it answers; use as a context
    manager or call ``stop()``."""
    return ServedApp(env, state_dir).start()
