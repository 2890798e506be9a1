"""Typed, frozen records of the provenance register (spec 1.24, 9.15, 10.8).  No I/O.

Constructors validate and raise InputError naming the bad field; ``*_from_data`` readers of
ledger payloads take the error class to raise, because a malformed payload coming back from the
ledger is evidence that does not hold (IntegrityError), not a caller's mistake.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .._ids import is_plain_id
from ..errors import EvaluatorError, InputError
from ..ledger.events import utc_stamp
from ..rules.indicators import REGISTERED_POLICY_ACCESS, PolicyAccess

_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_MAX_TEXT = 2000  # free-text fields (party, independence, notes); content has its own limit


class Origin(StrEnum):
    """Where a source's data comes from, kept distinguishable as spec 10.8 requires."""

    INDEPENDENT_OPERATIONAL = "independent_operational"
    HUMAN_LABELLING = "human_labelling"
    SYNTHETIC = "synthetic"
    EVALUATED_MODEL_OUTPUT = "evaluated_model_output"
    OTHER_MODEL_OUTPUT = "other_model_output"


#: Origins that can never confirm (9.16): a chain ending in the model's own claim, or synthetic
#: data derived from it, must not raise the model's signal - no rule can admit them.
NEVER_INDEPENDENT = frozenset({Origin.SYNTHETIC, Origin.EVALUATED_MODEL_OUTPUT})


class AuthMethod(StrEnum):
    """How a source's submissions are authenticated (9.15 "the authentication method")."""

    ED25519 = "ed25519"
    UNSIGNED = "unsigned"


E = TypeVar("E", bound=StrEnum)


def parse_enum(kind: type[E], value: object, what: str, error: type[EvaluatorError],
               allowed_members: Iterable[E] | None = None) -> E:
    """``kind(value)`` if it is one of ``allowed_members`` (default: every member), or ``error``
    listing the allowed values."""
    members = tuple(kind) if allowed_members is None else tuple(allowed_members)
    if isinstance(value, str) and value in {m.value for m in members}:
        return kind(value)
    allowed = ", ".join(m.value for m in members)
    raise error(f"{what} {value!r} is not one of: {allowed}")


def verify_identifier(value: object, what: str, error: type[EvaluatorError] = InputError) -> str:
    """Return ``value`` if it is a plain ledger identifier, else raise ``error``."""
    # sources and attempts are written into ledger envelopes: the ledger's rule, checked first
    if not is_plain_id(value):
        raise error(f"{what} {value!r} is not a plain identifier (letters, digits, ._:@/+-)")
    return value


def verify_text(value: object, what: str, error: type[EvaluatorError] = InputError) -> str:
    """Return non-empty, bounded free text, else raise ``error``."""
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_TEXT:
        raise error(f"{what} must be non-empty text of at most {_MAX_TEXT} characters")
    return value


def verify_instant(value: object, what: str, error: type[EvaluatorError] = InputError) -> datetime:
    """A timezone-aware datetime, normalised to UTC and to the ledger's microsecond spelling."""
    if isinstance(value, str) and _INSTANT.fullmatch(value):
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    raise error(f"{what} must be a timezone-aware time (or YYYY-MM-DDTHH:MM:SS.ffffffZ)")


def b64_canonical(text: object, what: str, error: type[EvaluatorError]) -> bytes:
    """Decode standard padded base64, accepting only the one canonical spelling of the bytes."""
    if not isinstance(text, str):
        raise error(f"{what} must be base64 text")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, binascii.Error, UnicodeEncodeError):
        raise error(f"{what} is not valid base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise error(f"{what} is not canonical padded base64")
    return raw


def ed25519_key_id(public_key: bytes) -> str:
    """Key id of a component key: SHA-256 of the raw 32-byte public key, lower-case hex."""
    return hashlib.sha256(public_key).hexdigest()


@dataclass(frozen=True, slots=True)
class Authentication:
    """``{"method": "ed25519", "key_id", "public_key"}`` or ``{"method": "unsigned"}`` (9.15).

    Raises InputError for a malformed key, a key id that does not match the key, or key
    material on an unsigned source.
    """

    method: AuthMethod
    key_id: str | None = None
    public_key: str | None = None  # canonical base64 of the raw 32-byte Ed25519 key

    def __post_init__(self) -> None:
        _verify_auth(self)

    @classmethod
    def unsigned(cls) -> Authentication:
        return cls(AuthMethod.UNSIGNED)

    @classmethod
    def ed25519(cls, public_key: bytes) -> Authentication:
        """Authentication by the given raw Ed25519 public key.  Raises InputError if malformed."""
        if not isinstance(public_key, bytes) or len(public_key) != 32:
            raise InputError("an Ed25519 public key is 32 bytes")
        return cls(AuthMethod.ED25519, ed25519_key_id(public_key),
                   base64.b64encode(public_key).decode("ascii"))

    def public_key_bytes(self) -> bytes | None:
        if self.public_key is None:
            return None
        return base64.b64decode(self.public_key)

    def to_data(self) -> dict[str, Any]:
        if self.method is AuthMethod.UNSIGNED:
            return {"method": self.method.value}
        return {"method": self.method.value, "key_id": self.key_id, "public_key": self.public_key}

    @classmethod
    def from_data(cls, data: object, error: type[EvaluatorError] = InputError) -> Authentication:
        """Read what :meth:`to_data` wrote; raises ``error`` if it is malformed."""
        if not isinstance(data, dict) or not set(data) <= {"method", "key_id", "public_key"}:
            raise error("authentication must be an object with method, key_id, public_key")
        with _as(error):
            return cls(data.get("method"), data.get("key_id"), data.get("public_key"))  # type: ignore[arg-type]


@contextmanager
def _as(error: type[EvaluatorError]) -> Iterator[None]:
    """Re-raise the constructors' InputError as ``error`` (IntegrityError for ledger data)."""
    try:
        yield
    except InputError as e:
        if error is InputError:
            raise
        raise error(e.message) from e


def _verify_auth(auth: Authentication) -> None:
    error = InputError
    object.__setattr__(auth, "method", parse_enum(AuthMethod, auth.method, "method", error))
    if auth.method is AuthMethod.UNSIGNED:
        if auth.key_id is not None or auth.public_key is not None:
            raise error("an unsigned source carries no key")
        return
    raw = b64_canonical(auth.public_key, "public key", error)
    if len(raw) != 32:
        raise error("an Ed25519 public key is 32 bytes")
    try:
        Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as e:
        raise error(f"public key is not an Ed25519 key: {e}") from e
    if not isinstance(auth.key_id, str) or not _HEX64.fullmatch(auth.key_id):
        raise error("key id must be 64 lower-case hex digits (SHA-256 of the public key)")
    if auth.key_id != ed25519_key_id(raw):
        raise error("key id does not match the public key")


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One revision of a source's provenance: every item spec 9.15 and 1.24 list.

    ``independence`` describes the degree of independence from the evaluated policy in words;
    what the register enforces follows from ``origin``, ``synthetic`` and ``policy_access``.
    Raises InputError for any malformed field or a contradiction (origin ``synthetic`` without
    the synthetic flag; a quarantine without a reason).
    """

    id: str
    party: str
    created_at: datetime
    origin: Origin
    synthetic: bool
    independence: str
    policy_access: PolicyAccess
    authentication: Authentication
    attempt: str | None = None
    quarantined: bool = False
    quarantine_reason: str | None = None
    revision: int = 1

    def __post_init__(self) -> None:
        _verify_source(self)

    def to_data(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "party": self.party,
            "created_at": utc_stamp(self.created_at),
            "origin": self.origin.value,
            "synthetic": self.synthetic,
            "independence": self.independence,
            "policy_access": self.policy_access.value,
            "authentication": self.authentication.to_data(),
            "attempt": self.attempt,
            "quarantined": self.quarantined,
            "quarantine_reason": self.quarantine_reason,
            "revision": self.revision,
        }

    @classmethod
    def from_data(cls, data: object, error: type[EvaluatorError] = InputError) -> SourceRecord:
        """Read a record written by :meth:`to_data`; raises ``error`` if it is malformed."""
        if not isinstance(data, dict) or set(data) != set(_SOURCE_FIELDS):
            raise error(f"a source record must have exactly the fields {sorted(_SOURCE_FIELDS)}")
        auth = Authentication.from_data(data["authentication"], error)
        with _as(error):
            return cls(**{**data, "authentication": auth})


_SOURCE_FIELDS = tuple(SourceRecord.__dataclass_fields__)


def _verify_source(s: SourceRecord) -> None:
    error = InputError
    put = object.__setattr__
    verify_identifier(s.id, "source id", error)
    verify_text(s.party, "creating party", error)
    put(s, "created_at", verify_instant(s.created_at, "creation time", error))
    put(s, "origin", parse_enum(Origin, s.origin, "origin", error))
    put(s, "policy_access", parse_enum(PolicyAccess, s.policy_access, "policy access", error,
                                        REGISTERED_POLICY_ACCESS))
    verify_text(s.independence, "degree of independence", error)
    if not isinstance(s.authentication, Authentication):
        raise error("authentication must be an Authentication")
    if s.attempt is not None:
        verify_identifier(s.attempt, "attempt", error)
    for name in ("synthetic", "quarantined"):
        if not isinstance(getattr(s, name), bool):
            raise error(f"{name} must be true or false")
    # 9.16: synthetic data is labelled; a synthetic origin without the flag hides the label.
    if s.origin is Origin.SYNTHETIC and not s.synthetic:
        raise error("a source of synthetic origin must carry the synthetic flag")
    if s.quarantined:
        verify_text(s.quarantine_reason, "quarantine reason", error)
    elif s.quarantine_reason is not None:
        raise error("a quarantine reason is given for a source that is not quarantined")
    if not isinstance(s.revision, int) or isinstance(s.revision, bool) or s.revision < 1:
        raise error("revision must be a positive integer")
