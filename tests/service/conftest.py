"""A real evaluator service per test: ``service init`` into ``tmp_path``, uvicorn on a free
loopback port in a background thread, real SQLite ledger, and clients for every principal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.provenance.confirmation import ComponentKey
from triz_ri_smart_ai_evaluator.service.app import create_app
from triz_ri_smart_ai_evaluator.service.client import PolicyClient, TrustedClient
from triz_ri_smart_ai_evaluator.service.config import (
    DEFAULT_TRUSTED,
    init_service_dir,
    load_config,
    load_principal_key,
)
from triz_ri_smart_ai_evaluator.service.inprocess import serve_app
from triz_ri_smart_ai_evaluator.service.runtime import Runtime


@dataclass
class Service:
    folder: Path
    runtime: Runtime
    base_url: str
    tokens: dict[str, str]
    keys: dict[str, ComponentKey]

    def policy(self, name: str = "policy-1") -> PolicyClient:
        return PolicyClient(self.base_url, self.tokens[name])

    def trusted(self, role: Role) -> TrustedClient:
        principal = next(pid for pid, r in DEFAULT_TRUSTED if r is role)
        return TrustedClient(self.base_url, principal, role, self.keys[principal])

    def size(self) -> int:
        return self.runtime.call_sync(self.runtime.store.size)

    def events(self, start: int = 1) -> list[dict[str, Any]]:
        """The ledger's events from position ``start`` on, parsed."""
        from triz_ri_smart_ai_evaluator.ledger.events import parse_body

        def read() -> list[dict[str, Any]]:
            return [parse_body(b, seq=s) for s, b in self.runtime.store.scan(start)]

        return self.runtime.call_sync(read)


def prepare_service_dir(folder: Path, *, workers: int = 0, policies: int = 2,
                        edit: dict[str, Any] | None = None,
                        trainer_runs: list[str] | None = None) -> Path:
    """``service init`` into ``folder`` with ``workers`` harness workers and ``edit`` applied
    to service.yaml (``trainer_runs``: the policy clients trainer-1 trains, instead of all);
    returns the configuration's path."""
    import yaml

    init_service_dir(folder, policies=policies)
    config_path = folder / "service.yaml"
    doc = yaml.safe_load(config_path.read_text("utf-8"))
    doc["harness"] = {"workers": workers, "out": "runs"}
    if trainer_runs is not None:
        for principal in doc["trusted"]:
            if principal["role"] == Role.TRAINING_CONSUMER.value:
                principal["runs"] = trainer_runs
    doc.update(edit or {})
    config_path.write_text(yaml.safe_dump(doc), "utf-8")
    return config_path


def start_service(folder: Path, *, workers: int = 0, policies: int = 2,
                  edit: dict[str, Any] | None = None,
                  trainer_runs: list[str] | None = None) -> Iterator[Service]:
    config_path = prepare_service_dir(folder, workers=workers, policies=policies, edit=edit,
                                      trainer_runs=trainer_runs)
    config, base = load_config(config_path)
    runtime = Runtime.start(config, base)
    tokens = json.loads((folder / "credentials.json").read_text("utf-8"))["policy_tokens"]
    keys = {pid: load_principal_key(folder / "principals" / f"{pid}.key")
            for pid, _ in DEFAULT_TRUSTED}
    try:
        with serve_app(create_app(runtime)) as url:
            yield Service(folder, runtime, url, tokens, keys)
    finally:
        runtime.close()

@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    yield from start_service(tmp_path / "svc")


def raw(service: Service) -> httpx.Client:
    return httpx.Client(base_url=service.base_url, timeout=30, trust_env=False)
