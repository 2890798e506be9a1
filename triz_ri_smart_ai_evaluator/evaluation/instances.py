"""Task instances across attempts: the rework rule in the ledger (spec 3.5, 8.6, 11.6).

An attempt belongs to one task instance, fixed when it starts (``attempt.initiated``
``instance``; by default the attempt itself).  Its award records its own signal and what it is
*credited* under the class's rework rule (``first_attempt_counts``, decided by
:func:`~triz_ri_smart_ai_evaluator.signal.rework.instance_signal`): what this attempt adds to
its instance's signal, so that the credits of an instance's awards, in ledger order, always add
up to ``instance_signal`` of its attempts.  The first measured attempt decides the instance; a
later correction earns nothing extra; an attempt that was objectively impossible or not
verified does not consume it (and a neutral signal it earned is not paid on top of the measured
result, spec 3.6).

The per-store index is a :mod:`.tail` view: it reads only the events appended since its last
call (the service awards many attempts, and rescanning the ledger for each would be O(n)), and
checks that the event it stopped at is still there, so a group commit that was rolled back
never leaves a phantom award in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ..errors import InputError
from ..ledger.events import EventKind
from ..ledger.store import LedgerStore
from ..rules._values import DECIMAL_CONTEXT as CTX
from ..rules._values import ZERO, format_exact
from ..signal.result import Outcome, Signal
from ..signal.rework import instance_signal
from . import tail

RULE = "first_attempt_counts"

#: The outcomes that do not consume an instance under ``instance_signal`` (a test checks that
#: this agrees with the pure rule for every outcome).
_NOT_CONSUMING = frozenset({Outcome.OBJECTIVELY_IMPOSSIBLE.value, Outcome.NOT_VERIFIED.value})


def consumes(outcome: str) -> bool:
    """Whether an attempt with this outcome decides (consumes) its instance."""
    return outcome not in _NOT_CONSUMING


@dataclass(frozen=True, slots=True)
class Earlier:
    """An earlier award of an instance, as the ledger recorded it."""

    attempt: str
    task_class: str
    outcome: str
    value: Decimal
    credited: Decimal


def credit(signal: Signal, *, attempt_id: str, instance: str,
           earlier: list[Earlier]) -> dict[str, Any]:
    """The ``rework`` part of an award.  Raises InputError for earlier attempts of another
    task class (``instance_signal`` refuses to mix classes)."""
    stand_ins = [signal._replace(task_class=e.task_class, outcome=Outcome(e.outcome),
                                 value=e.value) for e in earlier]
    so_far = sum((e.credited for e in earlier), ZERO)
    credited = CTX.subtract(instance_signal([*stand_ins, signal]), so_far)
    consumer = next((e.attempt for e in earlier if consumes(e.outcome)), None)
    if consumer is None and consumes(signal.outcome.value):
        consumer = attempt_id
    return {
        "instance": instance,
        "own": format_exact(signal.value),
        "credited": format_exact(credited),
        "consumed_by": consumer,
        "rule": RULE,
    }


@tail.view_of(EventKind.ATTEMPT_INITIATED, EventKind.AWARD_DECISION)
@dataclass(slots=True)
class _Index:
    classes: dict[str, str] = field(default_factory=dict)  # instance -> task class
    owner: dict[str, str] = field(default_factory=dict)  # attempt -> instance
    members: dict[str, list[str]] = field(default_factory=dict)  # instance -> attempts
    attempt_class: dict[str, str] = field(default_factory=dict)
    awards: dict[str, list[Earlier]] = field(default_factory=dict)  # instance -> awards

    def read(self, seq: int, fields: dict[str, Any]) -> None:
        data, attempt = fields["data"], fields["attempt"]
        if fields["kind"] == EventKind.ATTEMPT_INITIATED.value:
            instance = str(data.get("instance") or attempt)
            self.owner[attempt] = instance
            self.members.setdefault(instance, []).append(attempt)
            self.attempt_class[attempt] = str(data["task_class"])
            self.classes.setdefault(instance, str(data["task_class"]))
            return
        rework = data.get("rework") or {}
        instance = str(rework.get("instance") or self.owner.get(attempt, attempt))
        value = Decimal(str(data.get("value", "0")))
        self.awards.setdefault(instance, []).append(Earlier(
            attempt, self.attempt_class.get(attempt, ""), str(data["outcome"]), value,
            Decimal(str(rework.get("credited", value)))))


def _index(store: LedgerStore) -> _Index:
    return tail.current(store, _Index)


def is_initiated(store: LedgerStore, attempt: str) -> bool:
    """Whether the ledger holds an ``attempt.initiated`` for ``attempt``."""
    return attempt in _index(store).owner


def class_of(store: LedgerStore, instance: str) -> str | None:
    """The task class of an instance's attempts, or None for a new instance."""
    return _index(store).classes.get(instance)


def attempts_of(store: LedgerStore, instance: str) -> list[str]:
    """The attempts initiated into an instance, in ledger order."""
    return list(_index(store).members.get(instance, []))


def earlier_awards(store: LedgerStore, instance: str) -> list[Earlier]:
    """The instance's awards so far, in ledger order."""
    return list(_index(store).awards.get(instance, []))


def verify_instance(instance: str) -> str:
    """An instance id is a plain identifier.  Raises InputError otherwise."""
    text = instance.strip() if isinstance(instance, str) else ""
    if (not text or text != instance or len(text) > 200
            or not all(ch.isascii() and (ch.isalnum() or ch in "._:@/+-") for ch in text)
            or not text[0].isalnum()):
        raise InputError(f"instance {instance!r} is not a plain identifier "
                         "(letters, digits and ._:@/+-, at most 200)")
    return text
