"""Plain identifiers: the ledger's rule for the ids written into an event envelope.

Sources, attempts, principals and request ids end up in ledger envelopes, so every room checks
them against this one rule before anything is stored (ledger/events.py checks the envelope
against it too).
"""

from __future__ import annotations

import re
from typing import Final, TypeGuard

#: An ASCII letter or digit, then at most 199 of letters, digits and ``._:@/+-``.
PLAIN_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,199}")


def is_plain_id(value: object) -> TypeGuard[str]:
    """True for a string the ledger accepts as an identifier in an event envelope."""
    return isinstance(value, str) and PLAIN_ID.fullmatch(value) is not None
