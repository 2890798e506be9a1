"""A real ``triz-eval serve`` process for the hostile tests (issue 11): started with the
installed command on a free loopback port, stopped by its PID (SIGTERM, or SIGKILL to model a
crash), restarted on the same folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from triz_ri_smart_ai_evaluator.service.inprocess import free_port

from .conftest import prepare_service_dir

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"


@dataclass
class ServerProcess:
    """One service folder and the process serving it (None while stopped)."""

    folder: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        return self.folder / "service.yaml"

    @property
    def tokens(self) -> dict[str, str]:
        doc = json.loads((self.folder / "credentials.json").read_text("utf-8"))
        tokens = doc["policy_tokens"]
        assert isinstance(tokens, dict)
        return tokens

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=30, trust_env=False)

    def start(self, *, timeout: float = 30) -> None:
        """Start serving and wait until ``/v1/health`` answers."""
        assert self.proc is None
        self.log = self.folder / f"server-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(TRIZ_EVAL), "serve", "--config", str(self.config), "--port",
                 str(self.port)], stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=str(self.folder))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the service exited {self.proc.returncode}: "
                                     f"{self.log.read_text(errors='replace')[-2000:]}")
            try:
                with self.client() as http:
                    if http.get("/v1/health").status_code == 200:
                        return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop(signal.SIGKILL)
        raise AssertionError("the service did not answer /v1/health in time")

    def stop(self, sig: int = signal.SIGTERM, *, timeout: float = 30) -> None:
        """Stop the process we started, by its PID; SIGKILL models a crash."""
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
        self.proc = None


def init_server(folder: Path, *, workers: int = 0, policies: int = 2,
                edit: dict[str, Any] | None = None) -> ServerProcess:
    """A prepared service folder (see ``prepare_service_dir``), not yet serving."""
    prepare_service_dir(folder, workers=workers, policies=policies, edit=edit)
    return ServerProcess(folder)
