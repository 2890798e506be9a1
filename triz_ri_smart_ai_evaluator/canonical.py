"""The one place that produces the bytes of anything that is hashed or signed.

Canonical JSON is RFC 8785 (JSON Canonicalization Scheme).  Numbers in our records are carried
as decimal strings, never as floats, so canonicalisation never has to round a value.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

from .errors import InputError

_MAX_SAFE_INTEGER = 2**53 - 1


def _is_simple(value: Any) -> bool:
    """True when the standard library's sorted, compact JSON is already RFC 8785 canonical.

    That holds for str/int/bool/None/list/dict trees whose dict keys are ASCII (so code-point
    order equals RFC 8785's UTF-16 order) and whose integers are exactly representable as IEEE
    doubles.  Floats are excluded: their ECMAScript spelling differs from Python's repr.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        # Exact types first (the common case, and cheaper than isinstance on a hot path of
        # every ledger append); subclasses such as StrEnum fall through to isinstance below.
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if -_MAX_SAFE_INTEGER <= item <= _MAX_SAFE_INTEGER:
                continue
            return False
        if kind is dict:
            for key in item:
                if type(key) is not str or not key.isascii():
                    return False
            stack.extend(item.values())
            continue
        if kind is list or kind is tuple:
            stack.extend(item)
            continue
        if isinstance(item, str | bool):
            continue
        if isinstance(item, int):
            if -_MAX_SAFE_INTEGER <= item <= _MAX_SAFE_INTEGER:
                continue
            return False
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str) or not key.isascii():
                    return False
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            return False
    return True


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 canonical bytes of a JSON-compatible value.

    Common trees take a fast path through the standard library (identical output, checked by a
    property test against the ``rfc8785`` package); anything else goes through ``rfc8785``.
    Raises InputError if the value holds something JSON cannot carry (a NaN, a lone surrogate).
    """
    if _is_simple(value):
        try:
            return json.dumps(
                value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: let rfc8785 decide (it refuses it with a clear message)
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
