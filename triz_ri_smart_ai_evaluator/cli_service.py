"""``triz-eval service init`` and ``triz-eval serve``: the evaluator as an HTTP service."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

service_app = typer.Typer(help="Set up the evaluator service (the policy and trusted ports).")
err = Console(stderr=True)


@service_app.command("init")
def init_command(
    folder: Annotated[Path, typer.Argument(help="Folder for service.yaml, keys and tokens.")],
    policies: Annotated[int, typer.Option("--policies", min=1, max=1000,
                                          help="How many policy clients (tokens).")] = 1,
    postgres: Annotated[str | None, typer.Option(
        "--postgres", help="Writer-role connection string of a PostgreSQL ledger (its schema "
        "installed by an administrator); SQLite when absent.")] = None,
) -> None:
    """Write service.yaml, one Ed25519 key per trusted principal and the policy tokens
    (credentials.json, mode 0600; the configuration keeps only their hashes)."""
    from .service.config import init_service_dir  # noqa: PLC0415

    sys.stdout.write(json.dumps(init_service_dir(folder, policies=policies,
                                                 postgres=postgres), indent=2) + "\n")


def serve_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="service.yaml.")],
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    log_level: Annotated[str, typer.Option("--log-level")] = "warning",
) -> None:
    """Serve the policy port and the trusted port over HTTP (uvicorn).  The OpenAPI
    document is at /openapi.json, interactive docs at /docs."""
    import uvicorn  # noqa: PLC0415

    from .service.app import create_app  # noqa: PLC0415
    from .service.config import load_config  # noqa: PLC0415
    from .service.runtime import Runtime  # noqa: PLC0415

    settings, base = load_config(config)
    runtime = Runtime.start(settings, base)
    try:
        err.print(f"serving on http://{host}:{port} (ledger: "
                  f"{'postgres' if settings.ledger.postgres else settings.ledger.sqlite})",
                  highlight=False)
        uvicorn.run(create_app(runtime), host=host, port=port, log_level=log_level,
                    access_log=False)
    finally:
        runtime.close()
