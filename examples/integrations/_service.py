"""A real evaluator service for the integration examples: ``service init`` into a folder, the
runtime (SQLite ledger, the harness pool) and uvicorn on a free loopback port in a thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from triz_ri_smart_ai_evaluator.service.app import create_app
from triz_ri_smart_ai_evaluator.service.config import init_service_dir, load_config
from triz_ri_smart_ai_evaluator.service.inprocess import serve_app
from triz_ri_smart_ai_evaluator.service.runtime import Runtime


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
    try:
        with serve_app(create_app(runtime)) as url:
            yield url, runtime
    finally:
        runtime.close()
