"""Confirmations and the Ed25519 signatures of trusted components (spec 2.16, 9.3, 9.15, 8.15).

No I/O.  A trusted component signs what it submits (9.3 first bullet: the record is created or
confirmed by a trusted component); the register verifies the signature against the key of the
source's current revision, and an unsigned or wrongly signed confirmation is quarantined, never
counted (8.15, 11.21).

The signed message is the RFC 8785 canonical JSON of::

    {"attempt": ..., "content_sha256": ..., "domain": DOMAIN, "issued_at": ..., "source": ...}

with ``content_sha256`` the SHA-256 of the canonical JSON of the content.  Signing the digest
rather than the content lets the ledger event alone re-verify a signature while the content sits
in the evidence store; the domain string keeps a signature made for anything else from being
replayed as a confirmation.  The confirmation id is the SHA-256 of the signed message, so the
same signed statement submitted twice is recognised as a repeat.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from ..canonical import canonical_json
from ..errors import InputError
from ..ledger.events import utc_stamp
from .fingerprint import normalise_text
from .models import Authentication, AuthMethod, verify_identifier, verify_instant

DOMAIN = "triz-ri-smart-ai-evaluator/provenance/confirmation/v1"
MAX_CONTENT_BYTES = 1 << 20
_MAX_SIGNATURE_CHARS = 200  # a base64 Ed25519 signature is 88; anything longer is garbage

Content = str | dict[str, Any] | list[Any]

#: The wire shape of a confirmation: the service's ``confirmation`` payload and the late file
#: of ``triz-eval escrow settle``.  ``signature`` may be absent (the statement is then recorded
#: and quarantined as unsigned, 8.15).
PAYLOAD_FIELDS = ("source", "attempt", "content", "issued_at", "signature")


@dataclass(frozen=True, slots=True)
class Confirmation:
    """A statement by a source about an attempt's result, with its signature (or none).

    The content is canonicalised once, here, so mutating the caller's dict afterwards cannot
    change what was signed.  Raises InputError for malformed identifiers or time, content that
    is not text or a JSON object/array, is over 1 MiB or has no words, or a signature that is
    not text.
    """

    source: str
    attempt: str
    content: Content
    issued_at: datetime
    signature: str | None = None
    content_bytes: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        verify_identifier(self.source, "source id")
        verify_identifier(self.attempt, "attempt")
        object.__setattr__(self, "issued_at", verify_instant(self.issued_at, "issue time"))
        if not isinstance(self.content, str | dict | list):
            raise InputError("confirmation content must be text or a JSON object or array")
        data = canonical_json(self.content)
        if len(data) > MAX_CONTENT_BYTES:
            raise InputError(f"confirmation content is over {MAX_CONTENT_BYTES} bytes")
        object.__setattr__(self, "content_bytes", data)
        if not normalise_text(self.text):
            raise InputError("confirmation content has no words")
        if self.signature is not None and (
            not isinstance(self.signature, str) or len(self.signature) > _MAX_SIGNATURE_CHARS
        ):
            raise InputError("signature must be base64 text or absent")

    @property
    def text(self) -> str:
        """What is fingerprinted: the text, or the canonical JSON of structured content."""
        if isinstance(self.content, str):
            return self.content
        return self.content_bytes.decode("utf-8")

    @property
    def content_sha256(self) -> str:
        return hashlib.sha256(self.content_bytes).hexdigest()

    def signed_message(self) -> bytes:
        """The exact bytes a component signs."""
        return signed_message(self.source, self.attempt, utc_stamp(self.issued_at),
                              self.content_sha256)

    @property
    def id(self) -> str:
        """SHA-256 of the signed message: the same statement always has the same id."""
        return hashlib.sha256(self.signed_message()).hexdigest()

    def to_payload(self) -> dict[str, Any]:
        """The wire shape (:data:`PAYLOAD_FIELDS`), content as it was canonicalised and signed."""
        return {"source": self.source, "attempt": self.attempt,
                "content": json.loads(self.content_bytes),
                "issued_at": utc_stamp(self.issued_at), "signature": self.signature}

    @classmethod
    def from_payload(cls, raw: object) -> Confirmation:
        """Read the wire shape.  The signature is not checked here - that is the register's
        decision, recorded either way.  Raises InputError for unknown or missing fields or
        malformed values."""
        if not isinstance(raw, Mapping) or not set(raw) <= set(PAYLOAD_FIELDS):
            raise InputError(f"a confirmation is an object with {', '.join(PAYLOAD_FIELDS)}")
        missing = [k for k in PAYLOAD_FIELDS[:4] if k not in raw]
        if missing:
            raise InputError(f"a confirmation needs {', '.join(missing)}")
        return cls(raw["source"], raw["attempt"], raw["content"], raw["issued_at"],
                   raw.get("signature"))


def signed_message(source: str, attempt: str, issued_at: str, content_sha256: str) -> bytes:
    """Canonical JSON of the signed fields (see the module docstring)."""
    return canonical_json(
        {
            "attempt": attempt,
            "content_sha256": content_sha256,
            "domain": DOMAIN,
            "issued_at": issued_at,
            "source": source,
        }
    )


class ComponentKey:
    """A trusted component's Ed25519 private key.  It never appears in repr or in the ledger."""

    __slots__ = ("_private",)

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        if not isinstance(private_key, Ed25519PrivateKey):
            raise InputError("a component key must be an Ed25519 private key")
        self._private = private_key

    @classmethod
    def generate(cls) -> ComponentKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> ComponentKey:
        """A key from its 32-byte seed.  Raises InputError otherwise."""
        if not isinstance(raw, bytes) or len(raw) != 32:
            raise InputError("an Ed25519 private key is 32 bytes")
        return cls(Ed25519PrivateKey.from_private_bytes(raw))

    @property
    def public_bytes(self) -> bytes:
        return self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def private_seed(self) -> bytes:
        """The 32-byte seed :meth:`from_private_bytes` reads: only for handing the key to a
        worker process that signs as this component (issue 16 item 4)."""
        return self._private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())

    @property
    def authentication(self) -> Authentication:
        """What a source signed with this key registers as its authentication method."""
        return Authentication.ed25519(self.public_bytes)

    def sign(self, message: bytes) -> str:
        """Base64 Ed25519 signature of ``message``."""
        return base64.b64encode(self._private.sign(message)).decode("ascii")

    def __repr__(self) -> str:
        return f"ComponentKey(key_id={self.authentication.key_id})"


def sign_confirmation(
    key: ComponentKey, *, source: str, attempt: str, content: Content, issued_at: datetime
) -> Confirmation:
    """A confirmation signed by ``key``.  Raises InputError for malformed fields."""
    unsigned = Confirmation(source, attempt, content, issued_at)
    return Confirmation(source, attempt, content, issued_at, key.sign(unsigned.signed_message()))


def is_valid_signature(auth: Authentication, message: bytes, signature: str | None) -> bool:
    """True only for a valid Ed25519 signature of ``message`` by the key in ``auth``.

    Never raises for a bad signature: a wrongly signed confirmation is evidence to record and
    quarantine (8.15), not an error of the caller.
    """
    key = auth.public_key_bytes()
    if auth.method is not AuthMethod.ED25519 or key is None or signature is None:
        return False
    try:
        raw = base64.b64decode(signature.encode("ascii"), validate=True)
        if len(raw) != 64 or base64.b64encode(raw).decode("ascii") != signature:
            return False
        Ed25519PublicKey.from_public_bytes(key).verify(raw, message)
    except (ValueError, UnicodeEncodeError, InvalidSignature):
        return False
    return True
