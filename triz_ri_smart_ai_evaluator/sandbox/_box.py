"""The harness's entry point: one run's sandbox, fully isolated or - only on request - degraded.

    with open_sandbox(app_port=8000) as box:          # raises IsolationError if not possible
        smtp = bind_receiver(box.harness_host, 0)      # the harness's own SMTP receiver
        box.allow_tcp_port(smtp.port)
        app = box.start_gunicorn(code_dir, "feedback_app:create_app()", env=secrets_env)
        wait_for_port(box.app_address, box.app_port, timeout=20, process=app)
        ...  # drive box.url("/api/feedback")
        attempts = box.attempted_destinations()        # None in degraded mode: not measured
    # leaving the block stops every process and removes namespace, veth, cgroups, stage
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from ..errors import InputError
from ._addressing import SANDBOX_PREFIX
from ._bwrap import SANDBOX_SHM, SANDBOX_TMP, PythonRuntime
from ._errors import IsolationError, SandboxError
from ._launch import start_sandboxed
from ._limits import Limits
from ._netns import Network
from ._nft import AttemptedDestination
from ._probe import probe_isolation
from ._process import Isolation, SandboxedProcess
from ._sink import SinkConnection


class Sandbox:
    """One run's sandbox.  Made by :func:`open_sandbox`; close it (or use ``with``)."""

    def __init__(self, *, network: Network | None, app_port: int, degraded_reason: str | None,
                 runtime: PythonRuntime) -> None:
        self.network = network
        self.isolation: Isolation = "full" if network is not None else "degraded"
        self.degraded_reason = degraded_reason
        self.runtime = runtime
        self.app_port = app_port
        self.processes: list[SandboxedProcess] = []

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def harness_host(self) -> str:
        """Where the harness binds its SMTP receiver (the root end of the veth, or loopback)."""
        return self.network.harness_host if self.network else "127.0.0.1"

    @property
    def app_address(self) -> str:
        """Where the harness reaches the app (the app end of the veth, or loopback)."""
        return self.network.app_address if self.network else "127.0.0.1"

    @property
    def python(self) -> str:
        """The interpreter path to put in a command for this sandbox."""
        return self.runtime.sandbox_python() if self.network else self.runtime.host_python()

    @property
    def bind_address(self) -> str:
        """What the app should bind: every address of its own namespace, or loopback only."""
        return f"{'0.0.0.0' if self.network else '127.0.0.1'}:{self.app_port}"  # noqa: S104

    def url(self, path: str = "/") -> str:
        return f"http://{self.app_address}:{self.app_port}{path}"

    def allow_tcp_port(self, port: int) -> None:
        """Let the app connect to ``harness_host:port`` (no-op in degraded mode)."""
        if self.network is not None:
            self.network.allow_tcp_port(port)

    def start(self, argv: Sequence[str], *, code_dir: Path, env: Mapping[str, str] | None = None,
              limits: Limits | None = None, wall_timeout: float | None = None,
              decoys: Mapping[str, bytes] | None = None) -> SandboxedProcess:
        """Start ``argv`` (paths as the sandbox sees them: :attr:`python`, ``/app``).
        ``decoys`` maps absolute sandbox paths to read-only file contents (full isolation
        only; a degraded run cannot show them)."""
        proc = start_sandboxed(argv, code_dir=code_dir, network=self.network, env=env,
                               limits=limits, wall_timeout=wall_timeout, runtime=self.runtime,
                               unsafe_degraded=self.network is None,
                               degraded_reason=self.degraded_reason, decoys=decoys)
        self.processes.append(proc)
        return proc

    def start_gunicorn(self, code_dir: Path, wsgi_app: str, *,
                       env: Mapping[str, str] | None = None, workers: int = 2,
                       limits: Limits | None = None, wall_timeout: float | None = None,
                       extra_args: Sequence[str] = (),
                       decoys: Mapping[str, bytes] | None = None) -> SandboxedProcess:
        """Serve ``wsgi_app`` (e.g. ``"feedback_app:create_app()"``) from ``code_dir``.

        Runs ``python -m gunicorn --workers N --bind <bind_address> <wsgi_app>`` with the code
        directory as working directory; gunicorn and the app's dependencies come from the venv.
        """
        argv = [self.python, "-m", "gunicorn", "--workers", str(workers), "--bind",
                self.bind_address, "--worker-tmp-dir", SANDBOX_TMP if self.network else SANDBOX_SHM,
                "--access-logfile", "-", "--error-logfile", "-", *extra_args, wsgi_app]
        return self.start(argv, code_dir=code_dir, env=env, limits=limits,
                          wall_timeout=wall_timeout, decoys=decoys)

    def attempted_destinations(self) -> list[AttemptedDestination] | None:
        """Non-allowed destinations the app tried; ``None`` in degraded mode (not measured)."""
        return self.network.attempted_destinations() if self.network else None

    def sink_connections(self) -> tuple[SinkConnection, ...] | None:
        """Redirected connections that reached the sink; ``None`` in degraded mode."""
        return self.network.sink_connections() if self.network else None

    def close(self) -> None:
        """Stop every process, then tear the network down.  Raises :class:`SandboxError` if
        something could not be removed (after trying everything)."""
        problems: list[str] = []
        for proc in self.processes:
            try:
                proc.stop()
            except SandboxError as e:
                problems.append(e.message)
        if self.network is not None:
            try:
                self.network.close()
            except SandboxError as e:
                problems.append(e.message)
        if problems:
            raise SandboxError("; ".join(problems))


def open_sandbox(*, app_port: int = 8000, allowed_tcp_ports: Iterable[int] = (),
                 unsafe_degraded: bool = False, runtime: PythonRuntime | None = None) -> Sandbox:
    """Probe, then open a fully isolated sandbox (network verified before this returns).

    When isolation is not available here, raises :class:`IsolationError` - unless the caller
    asks for ``unsafe_degraded=True``: then the sandbox runs processes on the host with rlimits
    only, says ``isolation == "degraded"`` and carries the reason.  In degraded mode the app
    port is a free port on 127.0.0.1 rather than ``app_port``.
    """
    runtime = runtime or PythonRuntime.current()
    support = probe_isolation()
    if support.available:
        network = Network(app_port=app_port, allowed_tcp_ports=allowed_tcp_ports).open()
        return Sandbox(network=network, app_port=app_port, degraded_reason=None,
                       runtime=runtime)
    if not unsafe_degraded:
        raise IsolationError(f"sandbox isolation not available: {support.reason}")
    with socket.socket() as s:  # a free loopback port for the app
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    return Sandbox(network=None, app_port=port, degraded_reason=support.reason, runtime=runtime)


def wait_for_port(host: str, port: int, timeout: float, *,
                  process: SandboxedProcess | None = None) -> None:
    """Wait until ``host:port`` accepts a TCP connection.

    Only loopback and sandbox addresses (10.213.0.0/16) may be probed.  Raises
    :class:`SandboxError` on timeout or when ``process`` ends first.
    """
    address = ipaddress.ip_address(host)
    if not (address.is_loopback or address in SANDBOX_PREFIX):
        raise InputError(f"wait_for_port only reaches loopback and sandbox addresses: {host}")
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        if process is not None and process.poll() is not None:
            raise SandboxError(f"the sandboxed process ended before {host}:{port} was open")
        if time.monotonic() > deadline:
            raise SandboxError(f"{host}:{port} not reachable after {timeout} s")
        time.sleep(0.02)
