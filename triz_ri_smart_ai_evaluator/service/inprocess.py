"""An ASGI app served by uvicorn on a free loopback port in a thread of this process: the
drills, the integration examples and the tests serve the real service (or a proxy) this way."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from ..errors import ExternalError


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # served from a thread, which may not
        pass


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_app(app: Any, *, name: str = "service", timeout: float = 30.0) -> Iterator[str]:
    """Serve ``app`` on a free loopback port for the block; yield its base URL.  Raises
    ExternalError when it has not started within ``timeout`` seconds."""
    port = free_port()
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                    access_log=False))
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise ExternalError(f"the {name} did not start on 127.0.0.1:{port}")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=timeout)
