"""The service's configuration file (``triz-service/1``) and ``triz-eval service init``.

A configuration names the ledger (SQLite by default, PostgreSQL by a connection string), the
log key folder, the evaluated-policy clients (by the SHA-256 of their bearer token: the token
itself is never stored), the trusted principals (id, role and Ed25519 public key: registered in
the provenance register when the service starts, spec 9.15), the hidden control sets, the
verifiers the secret schedule picks from, and the pilot harness's worker pool.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._io import write_atomic
from ..access.matrix import TRUSTED_ROLES, Role
from ..errors import InputError
from ..provenance.confirmation import ComponentKey

FORMAT = "triz-service/1"
_ID = r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,99}$"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LedgerConfig(_Strict):
    """Exactly one of ``sqlite`` (a file) and ``postgres`` (a writer-role connection string)."""

    sqlite: str | None = None
    postgres: str | None = None
    schema_name: str = Field(default="triz_ledger", alias="schema")

    @model_validator(mode="after")
    def _one(self) -> LedgerConfig:
        if (self.sqlite is None) == (self.postgres is None):
            raise ValueError("give exactly one of sqlite and postgres")
        return self


class PolicyClient(_Strict):
    id: str = Field(pattern=_ID)
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class TrustedPrincipal(_Strict):
    id: str = Field(pattern=_ID)
    role: Role
    public_key: str = Field(min_length=40, max_length=60)  # base64 of the raw Ed25519 key
    #: refused, and quarantined in the provenance register (``triz-eval service revoke-key``);
    #: ``rotate-key`` gives it a new key and clears this
    revoked: bool = False
    #: the training consumer only: the evaluated-policy clients whose attempts it trains on and
    #: may read the rewards of (issue 16, access scope own_final); none reads nothing
    runs: tuple[Annotated[str, Field(pattern=_ID)], ...] = ()

    @model_validator(mode="after")
    def _trusted(self) -> TrustedPrincipal:
        if self.role not in TRUSTED_ROLES:
            raise ValueError(f"role {self.role.value} is not a trusted role")
        if self.runs and self.role is not Role.TRAINING_CONSUMER:
            raise ValueError("runs belong to a training_consumer principal only")
        try:
            raw = base64.b64decode(self.public_key, validate=True)
        except ValueError:
            raise ValueError("public_key is not base64") from None
        if len(raw) != 32:
            raise ValueError("public_key is not a raw 32-byte Ed25519 key")
        return self


class HarnessConfig(_Strict):
    workers: int = Field(default=1, ge=0, le=64)  # 0: pilot 02 submissions wait, nothing runs
    out: str = ".triz-eval/service-runs"
    unsafe_degraded: bool = False
    #: where the class's work runs (issue 16 item 4, service/dispatch.py): ``local`` on this
    #: machine's threads; ``ray`` on Ray actors placed on nodes advertising ``triz_harness``
    backend: Literal["local", "ray"] = "local"
    #: the Ray cluster to join (backend ray): ``auto`` (a node started on this machine), or
    #: ``host:port`` of its head
    ray_address: str = Field(default="auto", min_length=1, max_length=300)
    #: the trusted principal (role harness) whose key the Ray workers sign their reports with,
    #: and that key's file relative to the configuration's folder
    principal: str = Field(default="harness-1", pattern=_ID)
    principal_key: str = "principals/harness-1.key"


class RateConfig(_Strict):
    per_second: float = Field(gt=0, le=1_000_000)
    burst: int = Field(ge=1, le=10_000_000)


class LimitsConfig(_Strict):
    """Issue 11: what one caller may cost the service (docs/service.md, "Limits").  The
    defaults leave ``benchmarks/service_load.py`` (32 policy clients, ~600 submissions/s, the
    harness ~300 trusted requests/s, ~4,000 health requests/s from one address) unthrottled,
    and cut what a caller can have refused and logged from ~1,000/s to the refusal budgets."""

    #: bytes of a policy request (``POST /v1/policy/requests``: a resource and a payload);
    #: the submission and the trusted append take ``max_body_bytes``.
    policy_request_body_bytes: int = Field(default=256 * 1024, ge=1024, le=64 * 1024 * 1024)
    #: bytes of a body on any other route (the GETs take none)
    other_body_bytes: int = Field(default=64 * 1024, ge=0, le=64 * 1024 * 1024)
    #: bytes of a request head (uvicorn's h11_max_incomplete_event_size)
    max_header_bytes: int = Field(default=16 * 1024, ge=1024, le=1024 * 1024)
    #: a connection whose request head is not complete within this is closed (slowloris)
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: concurrent connections and requests before uvicorn answers 503 (limit_concurrency)
    max_connections: int = Field(default=1000, ge=8, le=100_000)
    #: requests per authenticated credential (a policy client or a trusted principal)
    credential_requests: RateConfig = RateConfig(per_second=1000, burst=2000)
    #: refused requests (4xx/5xx other than 401 and 429) per authenticated credential
    credential_refusals: RateConfig = RateConfig(per_second=20, burst=200)
    #: requests per client address, whatever the credential
    address_requests: RateConfig = RateConfig(per_second=5000, burst=10_000)
    #: refused requests per client address (401s included)
    address_refusals: RateConfig = RateConfig(per_second=100, burst=1000)
    #: ``service.refusal`` ledger events per (reason, address) and minute (trusted port)
    refusal_events_per_minute: int = Field(default=10, ge=0, le=10_000)
    #: the longest a ``POST /v1/rewards:batch`` may wait for pending attempts (issue 16)
    rewards_max_wait_seconds: float = Field(default=120.0, ge=0, le=3600)
    #: batch calls waiting at once, over all trainers; one more is answered 429
    rewards_waiting: int = Field(default=32, ge=1, le=10_000)


class ServiceConfig(_Strict):
    format: Literal["triz-service/1"]
    ledger: LedgerConfig
    keys: str  # the log's key folder (checkpoints are signed with it)
    policy_clients: tuple[PolicyClient, ...] = ()
    trusted: tuple[TrustedPrincipal, ...] = ()
    control_sets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    verifiers: tuple[str, ...] = ()
    harness: HarnessConfig = HarnessConfig()
    max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    limits: LimitsConfig = LimitsConfig()

    @model_validator(mode="after")
    def _unique(self) -> ServiceConfig:
        ids = [c.id for c in self.policy_clients] + [t.id for t in self.trusted]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ValueError(f"principal ids used twice: {sorted(dup)}")
        clients = {c.id for c in self.policy_clients}
        for t in self.trusted:
            unknown = sorted(set(t.runs) - clients)
            if unknown:
                raise ValueError(f"trusted principal {t.id}: runs name no policy client: "
                                 f"{unknown}")
        if self.harness.backend == "ray" and self.harness.workers and not any(
                t.id == self.harness.principal and t.role is Role.HARNESS for t in self.trusted):
            raise ValueError(f"harness.principal {self.harness.principal!r} is not a trusted "
                             "principal of role harness (the Ray workers sign as it)")
        tokens = [c.token_sha256 for c in self.policy_clients]
        if len(set(tokens)) != len(tokens):
            raise ValueError("two policy clients share a token")
        return self


def load_config(path: Path) -> tuple[ServiceConfig, Path]:
    """Read a configuration; relative paths in it are relative to its folder.  Raises
    InputError naming the file and the field."""
    try:
        doc = yaml.safe_load(path.read_text("utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read the service configuration ({e.strerror})") \
            from None
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise InputError(f"{path}: not a readable YAML file ({type(e).__name__})") from None
    try:
        return ServiceConfig.model_validate(doc), path.parent
    except ValidationError as e:
        first = e.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "configuration"
        raise InputError(f"{path}: {where}: {first['msg']}") from None


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


DEFAULT_TRUSTED = (("verifier-1", Role.VERIFIER), ("harness-1", Role.HARNESS),
                   ("confirm-1", Role.CONFIRMATION_SOURCE), ("auditor-1", Role.AUDITOR),
                   ("owner-1", Role.OWNER), ("trainer-1", Role.TRAINING_CONSUMER))


def init_service_dir(folder: Path, *, policies: int = 1, postgres: str | None = None
                     ) -> dict[str, Any]:
    """Write a ready-to-serve folder: ``service.yaml``, one private key per trusted principal
    under ``principals/`` (mode 0600) and ``credentials.json`` (mode 0600) holding the policy
    tokens, which the configuration knows only by hash.  Refuses to overwrite."""
    if (folder / "service.yaml").exists():
        raise InputError(f"{folder}/service.yaml exists: refusing to overwrite a service")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "principals").mkdir(mode=0o700, exist_ok=True)
    tokens = {f"policy-{n + 1}": secrets.token_urlsafe(32) for n in range(policies)}
    trusted = []
    for principal_id, role in DEFAULT_TRUSTED:
        public_key = write_principal_key(folder / "principals" / f"{principal_id}.key")
        entry: dict[str, Any] = {"id": principal_id, "role": role.value,
                                 "public_key": public_key}
        if role is Role.TRAINING_CONSUMER:
            entry["runs"] = list(tokens)  # the trainer trains every policy of this folder
        trusted.append(entry)
    ledger: dict[str, str] = ({"postgres": postgres} if postgres is not None
                              else {"sqlite": "ledger.db"})
    config = {
        "format": FORMAT, "ledger": ledger, "keys": "keys",
        "policy_clients": [{"id": pid, "token_sha256": token_digest(tok)}
                           for pid, tok in tokens.items()],
        "trusted": trusted, "verifiers": ["verifier-1"],
        "control_sets": {}, "harness": {"workers": 1, "out": "runs"},
    }
    write_atomic(folder / "service.yaml", yaml.safe_dump(config, sort_keys=False).encode())
    credentials = folder / "credentials.json"
    write_atomic(credentials, json.dumps({"policy_tokens": tokens}, indent=2).encode())
    credentials.chmod(0o600)
    return {"config": str(folder / "service.yaml"), "credentials": str(credentials),
            "policy_clients": list(tokens)}


def write_principal_key(path: Path) -> str:
    """Write a new Ed25519 private key to ``path`` (base64, mode 0600), the form
    :func:`load_principal_key` reads; returns the base64 of its public key."""
    secret = Ed25519PrivateKey.generate()
    raw = secret.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    write_atomic(path, base64.b64encode(raw) + b"\n")
    path.chmod(0o600)
    return base64.b64encode(ComponentKey(secret).public_bytes).decode()


def load_principal_key(path: Path) -> ComponentKey:
    """A trusted principal's private key as written by :func:`init_service_dir`.  Raises
    InputError."""
    try:
        raw = base64.b64decode(path.read_bytes().strip(), validate=True)
        return ComponentKey.from_private_bytes(raw)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a principal key ({type(e).__name__})") from None
