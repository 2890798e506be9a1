"""Provenance register: where each confirmation comes from and whether it may count.

Spec 1.24, 2.16, 8.14, 8.15, 9.3, 9.15, 9.16, 10.8, 11.21.  A pure core (``models``,
``confirmation``, ``fingerprint``, ``decision``, ``check``, ``records``, ``state``) decides;
``register`` records every decision in the ledger and rebuilds its state from it; the PROV
export (``prov_export``, needs the ``prov`` package) is imported on demand, not from here.
"""

from __future__ import annotations

from ..rules.indicators import PolicyAccess
from .check import check_confirmation
from .confirmation import (
    DOMAIN,
    ComponentKey,
    Confirmation,
    is_valid_signature,
    sign_confirmation,
    signed_message,
)
from .decision import (
    CONTENT_REASONS,
    COUNTED,
    RELEASABLE,
    Decision,
    EchoMatch,
    ProvenanceRules,
    Reason,
    Status,
)
from .fingerprint import METHOD, Fingerprint, NearDuplicateIndex, fingerprint, normalise_text
from .models import (
    NEVER_INDEPENDENT,
    Authentication,
    AuthMethod,
    Origin,
    SourceRecord,
    ed25519_key_id,
)
from .records import ConfirmationEntry, PolicyOutput, Reconciliation, SourceRevision
from .register import ProvenanceRegister
from .state import RegisterState

__all__ = [
    "CONTENT_REASONS",
    "COUNTED",
    "DOMAIN",
    "METHOD",
    "NEVER_INDEPENDENT",
    "RELEASABLE",
    "AuthMethod",
    "Authentication",
    "ComponentKey",
    "Confirmation",
    "ConfirmationEntry",
    "Decision",
    "EchoMatch",
    "Fingerprint",
    "NearDuplicateIndex",
    "Origin",
    "PolicyAccess",
    "PolicyOutput",
    "ProvenanceRegister",
    "ProvenanceRules",
    "Reason",
    "Reconciliation",
    "RegisterState",
    "SourceRecord",
    "SourceRevision",
    "Status",
    "check_confirmation",
    "ed25519_key_id",
    "fingerprint",
    "is_valid_signature",
    "normalise_text",
    "sign_confirmation",
    "signed_message",
]
