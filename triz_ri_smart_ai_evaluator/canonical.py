"""The one place that produces the bytes of anything that is hashed or signed.

Canonical JSON is RFC 8785 (JSON Canonicalization Scheme).  Numbers in our records are carried
as decimal strings, never as floats, so canonicalisation never has to round a value.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from .errors import InputError


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 canonical bytes of a JSON-compatible value.

    Raises InputError if the value holds something JSON cannot carry (for example a float NaN).
    """
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as e:
        raise InputError(f"value cannot be put in canonical JSON: {e}") from e


def sha256_hex(data: bytes) -> str:
    """Lower-case hexadecimal SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``, as lower-case hex."""
    return sha256_hex(canonical_json(value))
