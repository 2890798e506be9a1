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
    from ..service.config import init_service_dir  # noqa: PLC0415

    sys.stdout.write(json.dumps(init_service_dir(folder, policies=policies,
                                                 postgres=postgres), indent=2) + "\n")


@service_app.command("rotate-key")
def rotate_key_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="service.yaml.")],
    principal: Annotated[str, typer.Option("--principal", help="The trusted principal's id.")],
) -> None:
    """Give a trusted principal a new Ed25519 key: the private key is written to
    principals/ID.key (mode 0600), the new revision of its source to the provenance register
    (spec 9.15: an amendment, the old key stays in the history) and the public key to
    service.yaml.  A running service refuses the old key at once; a revoked principal is
    restored with the new key."""
    _change_key(config, principal, revoke=False)


@service_app.command("revoke-key")
def revoke_key_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="service.yaml.")],
    principal: Annotated[str, typer.Option("--principal", help="The trusted principal's id.")],
) -> None:
    """Revoke a trusted principal: its source is quarantined in the provenance register (a
    running service refuses it at once) and marked ``revoked`` in service.yaml.  Undo with
    rotate-key, which issues a new key."""
    _change_key(config, principal, revoke=True)


def _change_key(config: Path, principal_id: str, *, revoke: bool) -> None:
    """Key file first (beside the old one), then the register, then the configuration, then
    the key file into place: a crash leaves the old key in force or a rerun to do.  Raises
    InputError for an unknown principal, or the ledger's errors."""
    import os  # noqa: PLC0415
    from datetime import UTC, datetime  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    from .._io import write_atomic  # noqa: PLC0415
    from ..errors import InputError  # noqa: PLC0415
    from ..provenance.register import ProvenanceRegister  # noqa: PLC0415
    from ..service.auth import sync_trusted_sources  # noqa: PLC0415
    from ..service.config import (  # noqa: PLC0415
        TrustedPrincipal,
        load_config,
        write_principal_key,
    )
    from ..service.runtime import open_store  # noqa: PLC0415

    settings, base = load_config(config)
    current = next((t for t in settings.trusted if t.id == principal_id), None)
    if current is None:
        raise InputError(f"{config}: no trusted principal {principal_id!r}")
    update: dict[str, object] = {"revoked": revoke}
    private = base / "principals" / f"{principal_id}.key"
    staged = private.with_name(f"{private.name}.new")
    if not revoke:
        update["public_key"] = write_principal_key(staged)
    changed = TrustedPrincipal.model_validate({**current.model_dump(mode="json"), **update})
    store = open_store(settings, base)
    try:
        register = ProvenanceRegister(store, actor="evaluator-service")
        sync_trusted_sources(register, (changed,), now=datetime.now(UTC))
        source = register.state.current_source(principal_id)
    finally:
        store.close()
    doc = yaml.safe_load(config.read_text("utf-8"))
    for entry in doc["trusted"]:
        if entry.get("id") == principal_id:
            entry.update(update)
    write_atomic(config, yaml.safe_dump(doc, sort_keys=False).encode())
    if not revoke:
        os.replace(staged, private)
    assert source is not None
    sys.stdout.write(json.dumps({
        "principal": principal_id, "revoked": revoke, "revision": source.revision,
        "key_id": source.authentication.key_id, "public_key": changed.public_key,
        "private_key": None if revoke else str(private)}, indent=2) + "\n")


def serve_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="service.yaml.")],
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    log_level: Annotated[str, typer.Option("--log-level")] = "warning",
) -> None:
    """Serve the policy port and the trusted port over HTTP (uvicorn).  The OpenAPI
    document is at /openapi.json, interactive docs at /docs."""
    import uvicorn  # noqa: PLC0415

    from ..service.app import create_app  # noqa: PLC0415
    from ..service.config import load_config  # noqa: PLC0415
    from ..service.refusals import configure_logging  # noqa: PLC0415
    from ..service.request_guard import head_timeout_protocol  # noqa: PLC0415
    from ..service.runtime import Runtime  # noqa: PLC0415

    settings, base = load_config(config)
    limits = settings.limits
    configure_logging()
    runtime = Runtime.start(settings, base)
    try:
        err.print(f"serving on http://{host}:{port} (ledger: "
                  f"{'postgres' if settings.ledger.postgres else settings.ledger.sqlite})",
                  highlight=False)
        # issue 11: bounded request heads in size and time, bounded connections
        uvicorn.run(create_app(runtime), host=host, port=port, log_level=log_level,
                    access_log=False,
                    http=head_timeout_protocol(limits.header_timeout_seconds),
                    h11_max_incomplete_event_size=limits.max_header_bytes,
                    limit_concurrency=limits.max_connections)
    finally:
        runtime.close()


@service_app.command("openrlhf-proxy")
def openrlhf_proxy_command(
    url: Annotated[str, typer.Option("--url", help="The evaluator service's base URL.")],
    folder: Annotated[Path, typer.Option(
        "--service-dir", help="The folder of `service init` (credentials.json, principals/).")],
    task_class: Annotated[str, typer.Option("--task-class", "-t")] = "pilot_02_feedback_form",
    policy: Annotated[str, typer.Option(
        "--policy", help="The policy client the responses are handed in as.")] = "policy-1",
    trainer: Annotated[str, typer.Option(
        "--trainer", help="The training consumer that reads the rewards.")] = "trainer-1",
    wait: Annotated[float, typer.Option("--wait", min=0, help="Seconds to wait for pending "
                                        "rewards.")] = 120.0,
    mask: Annotated[bool, typer.Option(
        "--mask", help="Answer an unscorable response 0.0 flagged triz_unscorable=1 instead "
        "of failing the request (503).")] = False,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 5000,
) -> None:
    """Serve OpenRLHF's remote reward route (POST /get_reward) beside the trainer, backed by
    the service: pass http://HOST:PORT/get_reward as --remote_rm_url (docs/integrations.md)."""
    import uvicorn  # noqa: PLC0415

    from ..errors import InputError  # noqa: PLC0415
    from ..integrations.openrlhf import ROUTE, create_proxy  # noqa: PLC0415
    from ..integrations.service_access import ServiceAccess  # noqa: PLC0415

    try:
        tokens = json.loads((folder / "credentials.json").read_text("utf-8"))["policy_tokens"]
        token = tokens[policy]
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"{folder}/credentials.json: no policy token for {policy!r} "
                         f"({type(e).__name__})") from None
    access = ServiceAccess(url=url, task_class=task_class, policy_token=token,
                           reader_id=trainer,
                           reader_key=folder / "principals" / f"{trainer}.key",
                           wait_seconds=wait)
    access.reader().close()  # the key is readable, or a clear error now rather than later
    err.print(f"OpenRLHF remote reward route on http://{host}:{port}{ROUTE} "
              f"({'masking' if mask else 'failing on'} unscorable responses)", highlight=False)
    uvicorn.run(create_proxy(access, mask=mask), host=host, port=port, log_level="warning")
