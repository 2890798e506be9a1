"""The schedule and sampling of checks, decided on the trusted side (spec 9.2, 9.6, 9.7, 8.12).

No I/O.  Which verifier an attempt gets, whether a hidden control case is interleaved into its
flow and where, and the seed from which its fresh control cases are drawn all follow
deterministically from a secret seed and the attempt id: HMAC-SHA256(seed, purpose | attempt).
The seed never leaves the trusted side (no policy-port method reads the schedule, and the matrix
refuses ``check_schedule`` to the policy), and attempt ids are drawn by the port, not chosen by
the policy, so the policy can neither see nor steer the choice (8.12: it cannot select a
convenient verifier or change the test schedule).  Being a pure function of (seed, attempt), an
assignment can be recomputed by the owner or auditor afterwards (10.2).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..errors import InputError

DOMAIN = b"triz-ri-smart-ai-evaluator/access/schedule/v1"
SEED_BYTES = 32


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the schedule decided for one attempt (trusted side only)."""

    attempt: str
    schedule: str  # the public label of the schedule (not the seed)
    verifier: str
    control_interleaved: bool
    control_position: int | None  # where in the flow the hidden case goes, when interleaved
    control_draw: str  # hex seed for drawing this attempt's fresh control cases (9.6)

    def to_data(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "schedule": self.schedule,
            "verifier": self.verifier,
            "control_interleaved": self.control_interleaved,
            "control_position": self.control_position,
            "control_draw": self.control_draw,
        }


@dataclass(frozen=True)
class CheckSchedule:
    """A secret seed and the sampling parameters (``CheckSchedule.create`` draws the seed).

    ``verifiers``: the pool an attempt's verifier is drawn from (uniformly); ``control_rate``:
    the share of attempts that get a hidden control case interleaved (9.6 "randomly interspersed
    in the operational flow"); ``flow_length``: the number of positions in an attempt's flow the
    case may take.  Raises InputError for a short seed, an empty pool, a rate outside [0, 1] or a
    flow length below 1.  The seed is not shown in ``repr``.
    """

    seed: bytes = field(repr=False)
    verifiers: tuple[str, ...] = ()
    control_rate: Fraction = Fraction(1, 4)
    flow_length: int = 8

    def __post_init__(self) -> None:
        if not isinstance(self.seed, bytes) or len(self.seed) < SEED_BYTES:
            raise InputError(f"a schedule seed is at least {SEED_BYTES} secret bytes")
        verifiers = tuple(self.verifiers)
        if not verifiers or not all(isinstance(v, str) and v for v in verifiers):
            raise InputError("a schedule needs at least one verifier id")
        if len(set(verifiers)) != len(verifiers):
            raise InputError("a verifier is listed twice in the schedule's pool")
        object.__setattr__(self, "verifiers", verifiers)
        rate = Fraction(self.control_rate)
        if not 0 <= rate <= 1:
            raise InputError("control_rate must be between 0 and 1")
        object.__setattr__(self, "control_rate", rate)
        if not isinstance(self.flow_length, int) or self.flow_length < 1:
            raise InputError("flow_length must be a positive integer")

    @classmethod
    def create(cls, verifiers: Sequence[str], *, control_rate: Fraction = Fraction(1, 4),
               flow_length: int = 8) -> CheckSchedule:
        """A schedule with a fresh secret seed from the operating system."""
        return cls(secrets.token_bytes(SEED_BYTES), tuple(verifiers), control_rate, flow_length)

    @property
    def label(self) -> str:
        """A public name of this schedule: a hash of the seed, which does not reveal it."""
        return hashlib.sha256(DOMAIN + b"|label|" + self.seed).hexdigest()[:16]

    def _draw(self, purpose: str, attempt: str) -> int:
        message = DOMAIN + b"|" + purpose.encode() + b"|" + attempt.encode("utf-8")
        return int.from_bytes(hmac.new(self.seed, message, hashlib.sha256).digest(), "big")

    def assign(self, attempt_id: str) -> Assignment:
        """The verifier and control interleaving of ``attempt_id``.  Deterministic for a seed.

        Raises InputError for an empty attempt id.
        """
        if not isinstance(attempt_id, str) or not attempt_id:
            raise InputError("an assignment is made for a named attempt")
        # 2**256 draws reduced modulo a small number: the bias is below 2**-240.
        verifier = self.verifiers[self._draw("verifier", attempt_id) % len(self.verifiers)]
        rate = self.control_rate
        interleaved = self._draw("control", attempt_id) % rate.denominator < rate.numerator
        position = self._draw("position", attempt_id) % self.flow_length if interleaved else None
        draw = hmac.new(self.seed, DOMAIN + b"|draw|" + attempt_id.encode("utf-8"),
                        hashlib.sha256).hexdigest()
        return Assignment(attempt_id, self.label, verifier, interleaved, position, draw)
