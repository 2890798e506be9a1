"""What the register decides about a confirmation, and the rules it decides by.  No I/O.

Spec 8.14 (echo), 8.15 (unauthenticated, correlated or anomalous feedback is held until its
provenance is verified), 9.16 (no signal from the model's own claim), 11.21 (the test).

An *echo collision* (docs/adr/0006) is an authenticated confirmation from an admissible source
that is held back only for :data:`CONTENT_REASONS`.  It stays out of every count of
confirmations, but it is not discarded: it may still be applied where its effect can only lower
the policy's signal (the escrow settlement decides that with the signal calculator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

from ..errors import EvaluatorError, InputError
from .fingerprint import METHOD, NUM_PERM
from .models import NEVER_INDEPENDENT, Origin, parse_enum


class Status(StrEnum):
    """A confirmation's standing.  Only ``accepted`` and ``released`` are counted."""

    ACCEPTED = "accepted"
    QUARANTINED = "quarantined"
    RELEASED = "released"  # was quarantined; reconciliation verified its provenance (8.15)
    REJECTED = "rejected"  # was quarantined; reconciliation confirmed it stays excluded


COUNTED = frozenset({Status.ACCEPTED, Status.RELEASED})


class Reason(StrEnum):
    """Why a confirmation is quarantined.  The order here is the order reasons are listed."""

    UNKNOWN_SOURCE = "unknown_source"  # 9.15: origin must be known
    UNSIGNED = "unsigned"  # 8.15: unauthenticated
    BAD_SIGNATURE = "bad_signature"  # 8.15: unauthenticated (another key, or tampered)
    UNKNOWN_ATTEMPT = "unknown_attempt"  # 9.3: every record linked to a specific attempt
    SOURCE_QUARANTINED = "source_quarantined"  # 1.22, 9.15: the source itself is held
    POLICY_CAN_WRITE = "policy_can_write"  # 9.3: the policy could rewrite the record
    NOT_INDEPENDENT_ORIGIN = "not_independent_origin"  # 9.16, 10.8: model output or synthetic
    SYNTHETIC_CONTENT = "synthetic_content"  # 9.16: synthetic data is not mixed in
    ANOMALOUS_TIME = "anomalous_time"  # 8.15: issued in the future, or before source/attempt
    REPEAT = "repeat"  # 8.14: the same signed statement again adds nothing
    ECHO = "echo"  # 8.14: matches an output of the evaluated policy
    CORRELATED = "correlated"  # 8.15: near-duplicate of another source's confirmation


#: Reasons a reconciliation may lift, after the provenance and the connection with a real result
#: are verified (8.15).  The rest cannot be lifted by a person: an unauthenticated statement must
#: be resubmitted signed; an origin in the model's own output never confirms (9.16); a replay
#: never adds independence (8.14).  ``source_quarantined`` lifts only once the source is clear.
RELEASABLE = frozenset(
    {Reason.SOURCE_QUARANTINED, Reason.ANOMALOUS_TIME, Reason.ECHO, Reason.CORRELATED}
)

#: Reasons that question only whether a statement's *content* is independent (it repeats a
#: policy output, 8.14, or another source's statement, 8.15) - never who made it.  They matter
#: only when the statement would raise the policy's signal (9.16 forbids an increasing signal
#: from the policy's own claim); an authenticated statement held for these alone is an echo
#: collision, still usable against the policy.  Every other reason (who signed, which source,
#: which origin, when, which attempt, a replay) holds in both directions.
CONTENT_REASONS = frozenset({Reason.ECHO, Reason.CORRELATED})


def is_echo_collision(reasons: tuple[Reason, ...] | frozenset[Reason], *,
                      authenticated: bool) -> bool:
    """True for an authenticated statement held back for content reasons only."""
    return authenticated and bool(reasons) and set(reasons) <= CONTENT_REASONS


@dataclass(frozen=True, slots=True)
class EchoMatch:
    """A policy output a confirmation matches: how, and by how many of NUM_PERM slots."""

    attempt: str
    output: str  # evidence digest of the policy output's text
    method: str  # "exact" (normalised SHA-256) or "minhash"
    equal_slots: int

    def to_data(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "output": self.output, "method": self.method,
                "equal_slots": self.equal_slots, "of": NUM_PERM}


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of :func:`check.check_confirmation`: accepted, or quarantined with reasons."""

    reasons: tuple[Reason, ...]
    echo_of: tuple[EchoMatch, ...] = ()
    correlated_with: tuple[str, ...] = ()  # ids of near-duplicate confirmations
    source_revision: int | None = None
    key_id: str | None = None  # the key that verified the signature, when one did

    @property
    def status(self) -> Status:
        return Status.QUARANTINED if self.reasons else Status.ACCEPTED

    @property
    def accepted(self) -> bool:
        return not self.reasons

    @property
    def authenticated(self) -> bool:
        return self.key_id is not None

    @property
    def echo_collision(self) -> bool:
        """Held back as confirmation, but an authenticated statement from an admissible source:
        adverse evidence that must not be discarded (see :data:`CONTENT_REASONS`)."""
        return is_echo_collision(self.reasons, authenticated=self.authenticated)

    def to_data(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "echo_collision": self.echo_collision,
            "reasons": [r.value for r in self.reasons],
            "echo_of": [m.to_data() for m in self.echo_of],
            "correlated_with": list(self.correlated_with),
            "source_revision": self.source_revision,
            "key_id": self.key_id,
        }

    @classmethod
    def from_data(cls, data: object, error: type[EvaluatorError]) -> Decision:
        """Read what :meth:`to_data` wrote.  Raises ``error`` if malformed."""
        try:
            assert isinstance(data, dict)
            decision = cls(
                tuple(parse_enum(Reason, r, "reason", error) for r in data["reasons"]),
                tuple(EchoMatch(m["attempt"], m["output"], m["method"], int(m["equal_slots"]))
                      for m in data["echo_of"]),
                tuple(str(c) for c in data["correlated_with"]),
                data["source_revision"],
                data["key_id"],
            )
        except (AssertionError, KeyError, TypeError, ValueError) as e:
            raise error(f"a recorded decision is malformed: {e!r}") from e
        if decision.status.value != data["status"]:
            raise error("a recorded decision's status does not follow from its reasons")
        # Derived, recorded for the auditor; decisions written before it existed lack it.
        if data.get("echo_collision", decision.echo_collision) is not decision.echo_collision:
            raise error("a recorded decision's echo_collision does not follow from its reasons "
                        "and authentication")
        return decision


_ALWAYS_ADMITTED = frozenset({Origin.INDEPENDENT_OPERATIONAL, Origin.HUMAN_LABELLING})


@dataclass(frozen=True, slots=True)
class ProvenanceRules:
    """The documented thresholds.  Recorded with every decision so a replay can apply them.

    * ``near_duplicate`` (default 0.8): a Jaccard estimate at or above it makes two texts the
      same statement - an echo of a policy output (8.14) or a copy between sources (8.15).
      0.8 tolerates about one changed word in ten (see ``fingerprint``) while unrelated texts
      on the same subject stay far below it; values under 0.5 would call shared vocabulary an
      echo and are refused.
    * ``min_tokens`` (default 8): near-duplicate matching needs this many distinct words in both
      texts; shorter texts match only exactly.  Below it the estimate says little, and short
      independent verdicts legitimately agree word for word.
    * ``clock_skew_seconds`` (default 300): tolerance before an issue time counts as anomalous.
    * ``admitted_origins``: origins that may confirm.  Independent operational data and human
      labelling by default; ``other_model_output`` only by this explicit rule (9.16 "without an
      explicit rule"); synthetic and evaluated-model output never (raises InputError).
    """

    near_duplicate: Decimal = Decimal("0.8")
    min_tokens: int = 8
    clock_skew_seconds: int = 300
    admitted_origins: frozenset[Origin] = field(default=_ALWAYS_ADMITTED)

    def __post_init__(self) -> None:
        try:
            value = Decimal(self.near_duplicate)
        except (InvalidOperation, TypeError, ValueError):
            raise InputError("near_duplicate must be a decimal number") from None
        if not Decimal("0.5") <= value <= 1:
            raise InputError("near_duplicate must be between 0.5 and 1")
        object.__setattr__(self, "near_duplicate", value)
        for name in ("min_tokens", "clock_skew_seconds"):
            number = getattr(self, name)
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise InputError(f"{name} must be a non-negative integer")
        if self.min_tokens < 1:
            raise InputError("min_tokens must be at least 1")
        origins = frozenset(parse_enum(Origin, o, "admitted origin", InputError)
                            for o in self.admitted_origins)
        if origins & NEVER_INDEPENDENT:
            raise InputError("synthetic data and the evaluated model's own output can never be "
                             "admitted as independent confirmation (spec 9.16)")
        object.__setattr__(self, "admitted_origins", origins)

    @property
    def min_matches(self) -> int:
        """Equal MinHash slots (of NUM_PERM) that make a near duplicate."""
        return math.ceil(self.near_duplicate * NUM_PERM)

    def to_data(self) -> dict[str, Any]:
        return {
            "near_duplicate": str(self.near_duplicate),
            "min_tokens": self.min_tokens,
            "clock_skew_seconds": self.clock_skew_seconds,
            "admitted_origins": sorted(o.value for o in self.admitted_origins),
            "fingerprint": METHOD,
        }
