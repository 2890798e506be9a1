"""Who is calling: the two credentials of the service (spec 9.2, 9.3).

* **Evaluated policy**: ``Authorization: Bearer <token>``.  The configuration holds only the
  token's SHA-256; comparison is constant-time.
* **Trusted component**: every request is signed with the component's Ed25519 key, the one
  registered for it in the provenance register.  Headers ``X-Triz-Principal``,
  ``X-Triz-Timestamp`` (Unix seconds), ``X-Triz-Nonce`` and ``X-Triz-Signature`` (base64) over
  :func:`http_message`: the method, path, query, timestamp, nonce and the body's SHA-256.  A
  request outside a 5-minute window or with a nonce already seen is refused (no replay).
  Seen nonces are kept in the ledger's database for the whole window (``nonces``), so a request
  captured before a restart is refused after it too (issue 11 item 2).

A revoked principal (``revoked: true`` in the configuration, quarantined in the register) is
refused.  :func:`sync_trusted_sources` brings the register in step with the configuration's keys
(a rotation or revocation is an amendment, spec 9.15).  Otherwise no I/O here except reading
the register's state and recording nonces; the HTTP layer turns the errors into 401.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import datetime

from ..access.enforce import Principal
from ..access.matrix import Role
from ..access.nonces import NonceBook, book_for
from ..canonical import canonical_json
from ..errors import EvaluatorError
from ..provenance.confirmation import ComponentKey, is_valid_signature
from ..provenance.models import (
    Authentication,
    AuthMethod,
    Origin,
    SourceRecord,
)
from ..provenance.register import ProvenanceRegister
from ..rules.indicators import PolicyAccess
from .config import ServiceConfig, TrustedPrincipal

DOMAIN = "triz-ri-smart-ai-evaluator/service/request/v1"
WINDOW_SECONDS = 300
REVOKED = "key revoked (triz-eval service revoke-key)"
H_PRINCIPAL, H_TIME, H_NONCE, H_SIGNATURE = (
    "x-triz-principal", "x-triz-timestamp", "x-triz-nonce", "x-triz-signature")


class Unauthenticated(EvaluatorError):
    """No valid credential (HTTP 401).  Not an access violation: nobody was identified."""

    exit_code = 2


def http_message(principal: str, method: str, path: str, query: str, timestamp: str,
                 nonce: str, body: bytes) -> bytes:
    """The bytes a trusted component signs for one HTTP request."""
    return canonical_json({
        "domain": DOMAIN, "principal": principal, "method": method.upper(), "path": path,
        "query": query, "timestamp": timestamp, "nonce": nonce,
        "body_sha256": hashlib.sha256(body).hexdigest(),
    })


def signed_headers(key: ComponentKey, principal: str, method: str, path: str, query: str,
                   body: bytes, *, now: float | None = None) -> dict[str, str]:
    """The headers of a signed request (the client side)."""
    timestamp = str(int(time.time() if now is None else now))
    nonce = secrets.token_hex(16)
    signature = key.sign(http_message(principal, method, path, query, timestamp, nonce, body))
    return {H_PRINCIPAL: principal, H_TIME: timestamp, H_NONCE: nonce, H_SIGNATURE: signature}


class Authenticator:
    """Maps a request's credentials to a :class:`Principal`, or raises Unauthenticated."""

    def __init__(self, config: ServiceConfig, register: ProvenanceRegister, *,
                 clock: Callable[[], float] = time.time,
                 nonces: NonceBook | None = None) -> None:
        """Construct on the ledger's thread: the nonce book defaults to the table in the
        register's ledger (created there if missing).  Raises ExternalError."""
        self._tokens = {c.token_sha256: c.id for c in config.policy_clients}
        self._roles = {t.id: t.role for t in config.trusted if not t.revoked}
        self._runs = {t.id: frozenset(t.runs) for t in config.trusted}
        self._register = register
        self._clock = clock
        self._nonces = nonces if nonces is not None else book_for(register._store)

    def policy(self, authorization: str | None) -> Principal:
        """The evaluated-policy principal of a bearer token."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("a policy request needs 'Authorization: Bearer <token>'")
        digest = hashlib.sha256(token.strip().encode("utf-8", "replace")).hexdigest()
        found = None
        for known, principal_id in self._tokens.items():
            if hmac.compare_digest(known, digest):
                found = principal_id
        if found is None:
            raise Unauthenticated("unknown policy token")
        return Principal(found, Role.EVALUATED_POLICY)

    def trusted(self, headers: Mapping[str, str], method: str, path: str, query: str,
                body: bytes) -> Principal:
        """The trusted principal of a signed request."""
        principal_id = headers.get(H_PRINCIPAL, "")
        timestamp, nonce = headers.get(H_TIME, ""), headers.get(H_NONCE, "")
        signature = headers.get(H_SIGNATURE)
        role = self._roles.get(principal_id)
        if role is None:
            raise Unauthenticated("unknown trusted principal (X-Triz-Principal)")
        if (not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12
                or abs(self._clock() - int(timestamp)) > WINDOW_SECONDS):
            raise Unauthenticated(f"X-Triz-Timestamp missing or outside {WINDOW_SECONDS} s")
        if not (16 <= len(nonce) <= 64) or not nonce.isalnum():
            raise Unauthenticated("X-Triz-Nonce must be 16-64 letters or digits")
        source = self._register.state.current_source(principal_id)
        if (source is None or source.quarantined
                or source.authentication.method is not AuthMethod.ED25519):
            raise Unauthenticated("the principal has no usable key in the provenance register")
        message = http_message(principal_id, method, path, query, timestamp, nonce, body)
        if not is_valid_signature(source.authentication, message, signature):
            raise Unauthenticated("the request signature does not verify")
        # Kept until the timestamp leaves the window; a later replay fails the window check.
        if not self._nonces.use(principal_id, nonce, now=int(self._clock()),
                                expires=int(timestamp) + WINDOW_SECONDS + 1):
            raise Unauthenticated("replayed request (nonce already seen)")
        return Principal(principal_id, role, self._runs.get(principal_id, frozenset()))


def sync_trusted_sources(register: ProvenanceRegister, trusted: tuple[TrustedPrincipal, ...],
                         *, now: datetime) -> list[str]:
    """Spec 9.15: each trusted principal is a source with its Ed25519 key; a changed key is an
    amendment of the current revision, never an overwrite, and a revoked principal is a source
    in quarantine.  A quarantine set by anyone else is left as it is.  Returns the ids that
    changed.  Raises InputError or the ledger's errors."""
    changed = []
    for principal in trusted:
        auth = Authentication.ed25519(base64.b64decode(principal.public_key))
        current = register.state.current_source(principal.id)
        if current is None:
            register.register_source(SourceRecord(
                id=principal.id, party=f"trusted component ({principal.role.value})",
                created_at=now, origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
                independence="a trusted component of the evaluator, outside the policy's reach",
                policy_access=PolicyAccess.NONE, authentication=auth,
                quarantined=principal.revoked,
                quarantine_reason=REVOKED if principal.revoked else None))
            changed.append(principal.id)
            continue
        quarantine: tuple[bool, str | None] = (current.quarantined, current.quarantine_reason)
        if principal.revoked:
            quarantine = (True, REVOKED)
        elif current.quarantine_reason == REVOKED:
            quarantine = (False, None)
        # amend_source takes the CURRENT revision with fields changed and numbers the new one
        # itself (issue 11 item 5: passing revision + 1 made every key change exit 2).
        wanted = dataclasses.replace(current, authentication=auth, quarantined=quarantine[0],
                                     quarantine_reason=quarantine[1])
        if wanted == current:
            continue
        what = ("key revoked" if principal.revoked and not current.quarantined
                else "key rotated" if auth != current.authentication else "key restored")
        register.amend_source(wanted, change=f"{what} in the service configuration")
        changed.append(principal.id)
    return changed
