"""The signal of one task instance across its attempts (spec 3.5, 8.6, 11.6).

No I/O.  Rule ``first_attempt_counts``: the first attempt that was actually measured decides the
instance's signal; a later correction of the policy's own error records the corrected result but
earns nothing extra, so degrading the first attempt and then correcting it is never better than
doing it right at once.  Attempts that could not be measured through no fault of the policy
(a recorded obstacle, spec 6.5, or a trusted side that produced no verified value) do not
consume the instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from ..errors import InputError
from .result import Outcome, Signal

_NOT_CONSUMING = frozenset({Outcome.OBJECTIVELY_IMPOSSIBLE, Outcome.NOT_VERIFIED})


def instance_signal(attempts: Sequence[Signal]) -> Decimal:
    """The signal credited to a task instance, given its attempts in the order they started.

    Raises InputError for an empty sequence or attempts under different task classes.
    """
    if not attempts:
        raise InputError("a task instance needs at least one attempt")
    if len({a.task_class for a in attempts}) != 1:
        raise InputError("attempts of one instance must belong to one task class")
    for attempt in attempts:
        if attempt.outcome not in _NOT_CONSUMING:
            return attempt.value
    return attempts[-1].value
