"""Access: the matrix (output 12.8), the one place it is enforced, and the two ports.

Spec 2.11, 9.2, 9.3, 8.12, 4.1, 11.14.  ``matrix`` reads and validates the matrix file;
``enforce`` holds :class:`AccessGuard`, the only code that checks a role, which logs every
refusal to the ledger; ``ports`` is the evaluated policy's door, ``trusted`` the trusted
components' (Ed25519-signed appends); ``schedule`` decides the sampling of checks from a secret
seed; ``views`` projects what each side may see.
"""

from __future__ import annotations

from .backing import Catalogue, ControlSetStore, MemoryControlSets, ScheduleBook
from .enforce import AccessDenied, AccessGuard, Principal, parse_action, parse_resource
from .matrix import (
    BUNDLED_MATRIX,
    FORMAT,
    TRUSTED_ROLES,
    AccessMatrix,
    AccessMatrixError,
    Action,
    Resource,
    Role,
    Scope,
    load_matrix,
    parse_matrix,
)
from .ports import Limits, PolicyPort
from .schedule import Assignment, CheckSchedule
from .trusted import TrustedPort, request_message, sign_request

__all__ = [
    "BUNDLED_MATRIX",
    "FORMAT",
    "TRUSTED_ROLES",
    "AccessDenied",
    "AccessGuard",
    "AccessMatrix",
    "AccessMatrixError",
    "Action",
    "Assignment",
    "Catalogue",
    "CheckSchedule",
    "ControlSetStore",
    "Limits",
    "MemoryControlSets",
    "PolicyPort",
    "Principal",
    "Resource",
    "Role",
    "ScheduleBook",
    "Scope",
    "TrustedPort",
    "load_matrix",
    "parse_action",
    "parse_matrix",
    "parse_resource",
    "request_message",
    "sign_request",
]
