"""The one place the access matrix is enforced (spec 2.11, 9.2, 9.3 last bullet, 11.14).

Every method of every port calls :meth:`AccessGuard.verify_allowed` before it reads or writes;
nothing else in the code base looks at a role.  A refusal is recorded in the ledger as an
``access.violation`` event before :class:`AccessDenied` is raised (spec 11.14: attempted
violations are logged), so a policy probing the loop leaves a trace the owner and auditor see.
Allowed actions are not logged here: the events the ports write record them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NoReturn

from .._clock import now_utc
from .._ids import is_plain_id
from ..errors import EvaluatorError, InputError
from ..ledger.events import EventKind, NewEvent
from ..ledger.payloads import AccessViolation
from ..ledger.store import LedgerStore
from .matrix import AccessMatrix, Action, Resource, Role, Scope

#: Ledger actor of violation events: the guard writes them, the data names the principal.
GUARD_ACTOR = "access-guard"

_MAX_TARGET = 200


class AccessDenied(EvaluatorError):
    """The access matrix (or a failed authentication) refuses the request.

    Not an integrity failure of the data and not malformed input: the request was well-formed and
    not permitted.  The service maps it to HTTP 403; the CLI exits with code 5.  ``violation`` is
    the ledger position of the ``access.violation`` event that records it.
    """

    exit_code = 5

    def __init__(self, message: str, *, violation: int) -> None:
        super().__init__(message)
        self.violation = violation


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: an identifier (for a trusted role, its source id in the provenance
    register) and a role of the matrix.  Raises InputError for a malformed id or unknown role.

    ``runs`` are the evaluated-policy clients whose attempts a training consumer trains on
    (issue 16): a cell of scope ``own_final`` grants it their attempts and no other.
    """

    id: str
    role: Role
    runs: frozenset[str] = frozenset()

    def owns(self, owner: str | None) -> bool:
        """True if a record created by ``owner`` is the principal's own: it created it, or it
        is the attempt of one of its runs.  An unknown owner is never one's own."""
        return owner is not None and (owner == self.id or owner in self.runs)

    def __post_init__(self) -> None:
        if not is_plain_id(self.id):
            raise InputError(f"principal id {self.id!r} is not a plain identifier")
        if not isinstance(self.role, Role):
            if isinstance(self.role, str) and self.role in {r.value for r in Role}:
                object.__setattr__(self, "role", Role(self.role))
            else:
                known = ", ".join(r.value for r in Role)
                raise InputError(f"unknown role {self.role!r}; known: {known}")


def parse_resource(value: object) -> Resource:
    """A resource by name.  Raises InputError for an unknown one (a malformed request)."""
    if isinstance(value, Resource):
        return value
    if isinstance(value, str) and value in {r.value for r in Resource}:
        return Resource(value)
    raise InputError(f"unknown resource {value!r}; known: {', '.join(r.value for r in Resource)}")


def parse_action(value: object) -> Action:
    """An action by name.  Raises InputError for an unknown one (a malformed request)."""
    if isinstance(value, Action):
        return value
    if isinstance(value, str) and value in {a.value for a in Action}:
        return Action(value)
    raise InputError(f"unknown action {value!r}; known: {', '.join(a.value for a in Action)}")


def _clip(text: str) -> str:
    """At most 200 characters of caller-supplied text, with lone surrogates replaced, so that
    recording a refusal can never fail on what the refused caller sent."""
    return str(text)[:_MAX_TARGET].encode("utf-8", "replace").decode("utf-8")


class AccessGuard:
    """The matrix and the ledger that records refusals.

    ``clock`` gives the time of violation events (UTC, timezone-aware).
    """

    def __init__(self, matrix: AccessMatrix, ledger: LedgerStore, *,
                 clock: Callable[[], datetime] = now_utc) -> None:
        self.matrix = matrix
        self.ledger = ledger
        self._clock = clock

    def verify_allowed(self, principal: Principal, resource: Resource, action: Action, *,
                       owner_of: str | None = None, target: str | None = None) -> Scope:
        """Return the scope the request is granted under, or refuse it.

        ``owner_of`` is the principal id that owns the record acted on (the submitter of an
        attempt); a cell of scope ``own`` or ``own_final`` is granted only when the principal
        owns it (:meth:`Principal.owns`).  An
        unknown owner is never one's own (fail closed).  ``target`` names the record for the
        violation event (an attempt id, a class id).  Raises AccessDenied, after appending the
        ``access.violation`` event.
        """
        if not self.matrix.is_allowed(principal.role, resource, action):
            self.refuse(principal, resource, action, target=target,
                        reason=f"the access matrix does not grant {principal.role.value} "
                               f"{action.value} on {resource.value}")
        scope = self.matrix.cell(principal.role, resource).scope
        if scope in (Scope.OWN, Scope.OWN_FINAL) and not principal.owns(owner_of):
            self.refuse(principal, resource, action, target=target,
                        reason=f"{principal.role.value} may {action.value} only its own "
                               f"{resource.value} (scope {scope.value})")
        return scope

    def refuse(self, principal: Principal, resource: Resource, action: Action, *, reason: str,
               target: str | None = None) -> NoReturn:
        """Log an attempted violation and raise AccessDenied.

        The matrix decides in :meth:`verify_allowed`; a port calls this directly only for a
        failed authentication (an unknown key, a bad signature: spec 9.3, 9.15).
        """
        data = AccessViolation(
            principal=principal.id, role=principal.role.value, resource=resource.value,
            action=action.value, matrix_version=self.matrix.version, reason=reason,
            # Whatever the caller named, clipped: an attacker's string is data, not an id.
            target=None if target is None else _clip(target),
        )
        event = NewEvent.make(EventKind.ACCESS_VIOLATION, data, actor=GUARD_ACTOR,
                              at=self._clock())
        seq = self.ledger.append([event])[-1]
        raise AccessDenied(
            f"access denied: {principal.id} ({principal.role.value}) may not {action.value} "
            f"{resource.value}: {reason} [logged as event {seq}]",
            violation=seq,
        )
