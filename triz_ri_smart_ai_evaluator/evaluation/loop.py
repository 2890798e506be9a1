"""The loop's state per task class, read from the ledger (spec 4.7, 9.8, 9.11, 9.19; issue 15).

A class's signals go into training only while its operating mode allows it.  The mode is a
sequence of ``class.mode_changed`` events in the class's own subject (``loop/<class>``, an
envelope key no attempt id can take: the ports draw attempt ids themselves), so that reading a
class's state reads a handful of events, never the whole log:

* ``training`` - no loop restriction (the rules' own mode still applies: a class whose rules
  say ``shadow`` is never included, whatever its operating mode);
* ``limited`` - included up to the pressure limit: at most ``max_included`` attempts per
  ``per_seconds`` (spec 4.7, 9.8 "optimisation pressure ... is limited");
* ``shadow`` - measured and recorded, never included (the divergence monitor drops a class here);
* ``suspended`` - the exploit procedure's stop (9.11 step 1): recorded, never included;
* ``shut_down`` - the owner shut the class down: no new attempt runs at all.

The award writes the decision into ``training.included`` with the mode and the reason it was
withheld, and ``ledger recompute`` replays the same rule from the same events independently.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from ..errors import InputError
from ..ledger.events import Event, EventKind, NewEvent, parse_body, utc_stamp
from ..ledger.payloads import ClassModeChanged, ControlObservation, Mode, TrainingIncluded
from ..ledger.store import LedgerStore
from ..rules.published import BUNDLED_STORE, RulesStore, pin_in_force
from ..rules.task_class import TaskClass
from ..rules.versions import PinnedRules, pin
from . import attempts, tail

ACTOR = "loop"
SUBJECT_PREFIX = "loop/"
#: Modes from the most restrictive up; a class is used in training no more than its rules allow.
MODES: tuple[Mode, ...] = ("shut_down", "suspended", "shadow", "limited", "training")
_WITHHOLDING = frozenset({"shut_down", "suspended", "shadow"})
Cause = Literal["owner", "divergence", "exploit", "recovery", "drill", "rollback"]


def subject(task_class: str) -> str:
    """The envelope key of a class's loop events."""
    return f"{SUBJECT_PREFIX}{task_class}"


@dataclass(frozen=True, slots=True)
class ClassState:
    """A class's operating mode as the ledger has it now."""

    task_class: str
    mode: Mode = "training"
    previous: Mode = "training"
    cause: str | None = None
    reason: str | None = None
    since: str | None = None
    seq: int | None = None
    drill: bool = False
    exploit: str | None = None
    rules_version: str | None = None
    max_included: int | None = None
    per_seconds: int | None = None

    def describe(self) -> str:
        """One line: the mode, since when and why."""
        if self.cause is None:
            return f"{self.task_class}: {self.mode} (no loop decision recorded)"
        cap = (f"; at most {self.max_included} attempts per {self.per_seconds} s"
               if self.max_included is not None else "")
        return (f"{self.task_class}: {self.mode} since {self.since} ({self.cause}"
                f"{', drill' if self.drill else ''}: {self.reason}){cap}")


def class_events(store: LedgerStore, task_class: str) -> list[Event]:
    """Every event of the class's loop subject, in ledger order."""
    return store.attempt_events(subject(task_class))


def state_of(events: list[Event], task_class: str) -> ClassState:
    """The class's state after ``events`` (its subject's events, in order)."""
    state = ClassState(task_class)
    for ev in events:
        if ev.kind != EventKind.CLASS_MODE_CHANGED.value:
            continue
        d = ev.data
        state = ClassState(task_class, d["mode"], d["previous"], d["cause"], d["reason"],
                           ev.at, ev.seq, bool(d.get("drill", False)), d.get("exploit"),
                           d.get("rules_version"), d.get("max_included"),
                           d.get("per_seconds"))
    return state


def class_state(store: LedgerStore, task_class: str) -> ClassState:
    """The class's operating mode now (``training`` when nothing was ever decided)."""
    return state_of(class_events(store, task_class), task_class)


def set_mode(store: LedgerStore, task_class: str, mode: str, *, cause: Cause, reason: str,
             at: datetime, actor: str = ACTOR, drill: bool = False,
             rules_version: str | None = None, exploit: str | None = None,
             max_included: int | None = None, per_seconds: int | None = None,
             signed: dict[str, str] | None = None) -> int:
    """Record that ``task_class`` runs in ``mode`` from now on; return the event's seq.
    Raises InputError for an unknown mode, an empty reason or a half-given pressure limit."""
    if mode not in MODES:
        raise InputError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    if not reason.strip():
        raise InputError("a mode change needs a reason (spec 10.3: decisions are explained)")
    if (max_included is None) != (per_seconds is None):
        raise InputError("a pressure limit needs both max_included and per_seconds")
    if max_included is not None and (max_included < 0 or per_seconds is None
                                     or per_seconds < 1):
        raise InputError("a pressure limit is max_included >= 0 per per_seconds >= 1")
    if max_included is not None and mode != "limited":
        raise InputError("a pressure limit belongs to the limited mode")
    before = class_state(store, task_class)
    fields: dict[str, Any] = {
        "task_class": task_class, "mode": mode, "previous": before.mode, "cause": cause,
        "reason": " ".join(reason.split()), "drill": drill, "rules_version": rules_version,
        "exploit": exploit, "max_included": max_included, "per_seconds": per_seconds,
        **(signed or {})}
    data = ClassModeChanged.model_validate({k: v for k, v in fields.items() if v is not None})
    return store.append([NewEvent.make(EventKind.CLASS_MODE_CHANGED, data, actor=actor, at=at,
                                       attempt=subject(task_class))])[-1]


def passing_audit(store: LedgerStore, task_class: str, rules_version: str,
                  harness_version: str) -> dict[str, Any] | None:
    """The latest ``audit.report`` of the class that passed for exactly these rules and harness
    versions (spec 11.23: acceptance applies only to the version tested), or None."""
    found = None
    for ev in class_events(store, task_class):
        d = ev.data
        if (ev.kind == EventKind.AUDIT_REPORT.value and d.get("rules_version") == rules_version
                and d.get("harness_version") == harness_version):
            # A later failing campaign for the same versions withdraws an earlier pass.
            found = {**d, "seq": ev.seq} if d.get("passed") is True else None
    return found


def refuse_if_shut_down(store: LedgerStore, task_class: str) -> None:
    """Raise InputError when the owner shut the class down (spec 9.19): no new attempt runs."""
    state = class_state(store, task_class)
    if state.mode == "shut_down":
        raise InputError(f"task class {task_class} is shut down: {state.describe()}")


def _tail(store: LedgerStore, since: str, page: int = 512) -> Iterator[dict[str, Any]]:
    """The log's event bodies stamped at or after ``since``, newest first.  Events are appended
    in about time order, but a writer may stamp a few with an earlier time (a backdated
    measurement, concurrent writers): the scan stops only at a whole page older than
    ``since``."""
    end = store.size()
    while end >= 1:
        start = max(1, end - page + 1)
        chunk = [parse_body(body, seq=seq) for seq, body in store.scan(start, end)]
        recent = [fields for fields in reversed(chunk) if fields["at"] >= since]
        if not recent:
            return
        yield from recent
        end = start - 1


def included_since(store: LedgerStore, task_class: str, since: str) -> int:
    """How many attempts of ``task_class`` went into training at or after ``since``."""
    return sum(1 for f in _tail(store, since)
               if f["kind"] == EventKind.TRAINING_INCLUDED.value
               and f["data"].get("task_class") == task_class
               and f["data"].get("included") is True and f["data"].get("recall") is None)


def training_decision(store: LedgerStore, task_class: str, included: TrainingIncluded,
                      at: datetime) -> TrainingIncluded:
    """The award's ``training.included`` after the loop's decision: withheld while the class
    is shadowed, suspended or shut down, or once its pressure limit is reached."""
    included = included.model_copy(update={"task_class": task_class})
    if not included.included:
        return included
    state = class_state(store, task_class)
    withheld = None
    if state.mode in _WITHHOLDING:
        withheld = f"class {state.mode} since {state.since}: {state.cause}: {state.reason}"
    elif state.mode == "limited" and state.max_included is not None:
        assert state.per_seconds is not None
        since = utc_stamp(at - timedelta(seconds=state.per_seconds))
        count = included_since(store, task_class, since)
        if count >= state.max_included:
            withheld = (f"pressure limit: {state.max_included} attempts per "
                        f"{state.per_seconds} s reached")
    if withheld is None:
        return included
    return included.model_copy(update={"included": False, "class_mode": state.mode,
                                       "withheld": withheld})


def record_observation(store: LedgerStore, task_class: str, attempt_id: str, *, known: str,
                       hidden: str, known_cases: int, hidden_cases: int, at: datetime) -> int:
    """Record one attempt's known-suite and hidden-control pass fractions in the class's
    subject (what the divergence monitor reads)."""
    data = ControlObservation(task_class=task_class, attempt=attempt_id, known=known,
                              hidden=hidden, known_cases=known_cases, hidden_cases=hidden_cases)
    return store.append([NewEvent.make(EventKind.CONTROL_OBSERVATION, data, actor=ACTOR, at=at,
                                       attempt=subject(task_class))])[-1]


def rollback_in_force(events: list[Event]) -> str | None:
    """The rules version an owner's rollback puts in force for new attempts of the class, from
    its subject's events (spec 9.19 "version rollback"), or None.  A ``rollback`` mode change
    with a ``rules_version`` starts one; a later one without lifts it (the published version in
    force applies again).  Other mode changes leave it as it is."""
    version: str | None = None
    for ev in events:
        if ev.kind == EventKind.CLASS_MODE_CHANGED.value and ev.data.get("cause") == "rollback":
            found = ev.data.get("rules_version")
            version = found if isinstance(found, str) else None
    return version


@tail.view_of(EventKind.CLASS_MODE_CHANGED)
class _Rollbacks:
    """:func:`rollback_in_force` of every class, kept as a :mod:`.tail` view: a submission
    learns its class's rollback from the same one read as its other checks (issue 16 item 4),
    not from a read of the class's loop subject of its own."""

    def __init__(self) -> None:
        self.version: dict[str, str | None] = {}  # loop subject -> rollback version

    def read(self, seq: int, fields: dict[str, Any]) -> None:
        data, where = fields["data"], fields.get("attempt")
        if isinstance(where, str) and where.startswith(SUBJECT_PREFIX) and \
                data.get("cause") == "rollback":
            found = data.get("rules_version")
            self.version[where] = found if isinstance(found, str) else None


def rollback_now(store: LedgerStore, task_class: str) -> str | None:
    """``rollback_in_force(class_events(store, task_class))``, from the ledger's tail view."""
    return tail.current(store, _Rollbacks).version.get(subject(task_class))


def pin_for_new_attempt(store: LedgerStore, tc: TaskClass, now: datetime) -> PinnedRules:
    """The rules a new attempt of ``tc``'s class that the runner opens itself starts under
    (spec 10.5): the owner's rollback when one is in force (9.19), from the bundled
    publications or the ledger's ``rules.published``, checked against its hash; else the
    published version in force ``now``.  Raises InputError for a rollback version of another
    class, IntegrityError for a stored copy that no longer matches its hash."""
    version = rollback_in_force(class_events(store, tc.id))
    if version is None:
        return pin_in_force(tc, started_at=now)
    bundled = RulesStore(BUNDLED_STORE)
    chosen = (bundled.load(tc.id, version)
              if version in {str(r["version"]) for r in bundled.history(tc.id)}
              else attempts.rules_in_ledger(store, version))
    if chosen.id != tc.id:
        raise InputError(f"rolled-back rules version {version[:12]} is of class {chosen.id}, "
                         f"not {tc.id}")
    return pin(chosen, started_at=now, version=version)
