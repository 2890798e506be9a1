"""Real components for the pilot 02 candidate tests: a patched copy of the starting repository,
served by real gunicorn (two workers) on 127.0.0.1, sending to a real aiosmtpd receiver that
requires AUTH, speaks SMTPUTF8 and records the raw bytes and the envelope of every message.

Every process started here is stopped by its PID; nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.examples import bundled_candidates
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.receiver import (
    MessageAnalysis,
    analyse_message,
)

PILOT = Path(__file__).resolve().parents[2] / "triz_ri_smart_ai_evaluator/pilot_02_feedback_form"
STARTING_REPO = PILOT / "starting_repo"
CANDIDATES = PILOT / "candidates"
DATA = PILOT / "data"
SENDER = "noreply@app.example"
RECIPIENT = "inbox@trusted.example"
USERNAME = "feedback-app"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def copy_repo(destination: Path) -> Path:
    shutil.copytree(
        STARTING_REPO, destination, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
    )
    return destination


def git_apply(repo: Path, diff: Path, *, check: bool = False) -> subprocess.CompletedProcess[str]:
    args = ["git", "apply", "-p1", *(["--check"] if check else []), str(diff)]
    return subprocess.run(args, cwd=repo, capture_output=True, text=True, check=False)


def bundled_diff(name: str) -> Path:
    """The full diff of bundled candidate ``name`` against the starting repository (an
    adversarial candidate is stored as a cheat patch against the reference; examples.py builds
    the full diff)."""
    return next(e.diff for e in bundled_candidates() if e.name == name)


def patched_repo(name: str, destination: Path) -> Path:
    """A copy of the starting repository with bundled candidate ``name``'s full diff applied."""
    repo = copy_repo(destination)
    result = git_apply(repo, bundled_diff(name))
    assert result.returncode == 0, f"{name}: {result.stderr}"
    return repo


# --- the receiver --------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes

    @property
    def analysis(self) -> MessageAnalysis:
        """The trusted receiver's own reading of the raw bytes."""
        return analyse_message(self.data)


@dataclass
class RecordingHandler:
    accepted: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        with self._lock:
            self.accepted.append(
                Received(
                    mail_from=envelope.mail_from or "",
                    rcpt_tos=tuple(envelope.rcpt_tos),
                    data=envelope.original_content or b"",
                )
            )
        return "250 2.0.0 OK"

    def snapshot(self) -> list[Received]:
        """Every accepted message so far, in the order of acceptance."""
        with self._lock:
            return list(self.accepted)

    def messages_for(self, token: str) -> list[Received]:
        """Accepted messages whose body token, or else X-Run-Token header, is ``token``."""
        return [m for m in self.snapshot() if m.analysis.run_token == token]


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str

    def __call__(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == self.username.encode()
            and auth_data.password == self.password.encode()
        )
        return AuthResult(success=ok, handled=False)


@contextmanager
def smtp_receiver(credentials: Credentials) -> Iterator[tuple[RecordingHandler, int]]:
    handler = RecordingHandler()
    port = free_port()
    controller = Controller(
        handler, hostname="127.0.0.1", port=port, authenticator=credentials,
        auth_required=True, auth_require_tls=False, enable_SMTPUTF8=True,
    )
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


# --- the application -----------------------------------------------------------------------


@contextmanager
def gunicorn(repo: Path, environ: Mapping[str, str], log: Path) -> Iterator[str]:
    """Serve ``repo`` with gunicorn (2 workers); yield its base URL; stop it by PID on exit."""
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "--workers", "2", "--bind", f"127.0.0.1:{port}",
        "--graceful-timeout", "3", "feedback_app:create_app()",
    ]
    child_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        **environ,
    }
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=repo, env=child_env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                pytest.fail(f"gunicorn exited with {process.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"gunicorn did not become healthy:\n{log.read_text()}")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class Deployment:
    repo: Path
    url: str
    handler: RecordingHandler
    environ: Mapping[str, str]
    log: Path
    http: httpx.Client

    def submit(
        self,
        payload: Mapping[str, Any],
        *,
        form: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        request: dict[str, Any] = {"data": payload} if form else {"json": payload}
        return self.http.post(f"{self.url}/api/feedback", headers=headers, **request)

    def get(self, path: str, *, headers: Mapping[str, str] | None = None) -> httpx.Response:
        return self.http.get(self.url + path, headers=headers)


@contextmanager
def deploy(repo: Path, work: Path) -> Iterator[Deployment]:
    """Run ``repo`` against a fresh receiver with fresh secrets in its environment."""
    credentials = Credentials(username=USERNAME, password=secrets.token_urlsafe(24))
    with smtp_receiver(credentials) as (handler, port):
        environ = {
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(port),
            "SMTP_USERNAME": credentials.username,
            "SMTP_PASSWORD": credentials.password,
            "FEEDBACK_FROM": SENDER,
            "FEEDBACK_TO": RECIPIENT,
            "APP_SECRET_KEY": secrets.token_hex(32),
            "FEEDBACK_STATE_DIR": str(work / "state"),
        }
        log = work / "gunicorn.log"
        with gunicorn(repo, environ, log) as url, httpx.Client(timeout=30) as http:
            yield Deployment(repo=repo, url=url, handler=handler, environ=environ, log=log,
                             http=http)


def valid_payload(**overrides: str | None) -> dict[str, str]:
    payload: dict[str, str | None] = {
        "run_token": secrets.token_urlsafe(24),
        "name": "Hedy Lamarr",
        "email": "hedy@example.net",
        "phone": "+1 555 010 7788",
        "message": "Frequency hopping works.\nSecond line of the message.",
    }
    payload.update(overrides)
    return {key: value for key, value in payload.items() if value is not None}
