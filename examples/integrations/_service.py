"""A real evaluator service for the integration examples: ``service init`` into a folder, the
runtime (SQLite ledger, the harness pool) and uvicorn on a free loopback port in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
import yaml

from triz_ri_smart_ai_evaluator.service.app import create_app
from triz_ri_smart_ai_evaluator.service.config import init_service_dir, load_config
from triz_ri_smart_ai_evaluator.service.runtime import Runtime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(folder: Path, workers: int) -> Iterator[tuple[str, Any]]:
    """A real service in ``folder`` on a free loopback port; yields (base URL, runtime)."""
    init_service_dir(folder, policies=1)
    path = folder / "service.yaml"
    doc = yaml.safe_load(path.read_text("utf-8"))
    doc["harness"] = {"workers": workers, "out": "runs"}
    path.write_text(yaml.safe_dump(doc), "utf-8")
    config, base = load_config(path)
    runtime = Runtime.start(config, base)
    port = free_port()

    class Server(uvicorn.Server):
        def install_signal_handlers(self) -> None:  # it runs in a thread
            pass

    server = Server(uvicorn.Config(create_app(runtime), host="127.0.0.1", port=port,
                                   log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the service did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", runtime
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        runtime.close()
