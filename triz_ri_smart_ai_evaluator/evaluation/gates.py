"""The gates between a class's operating modes (spec 4.7, 9.8, 9.12, 12.17; pilot 10; issue 15
item 8).

Pilot 10: "The signal is used in shadow mode before limited training."  A class climbs
``shadow -> limited -> training`` one step at a time, and each step up is gated by what the
ledger holds; a step down (to ``limited``, ``shadow``, ``suspended`` or ``shut_down``) is never
gated, because the owner must always be able to restrict or stop a class (spec 9.19).  Back
to ``shadow`` from ``suspended`` or ``shut_down`` needs only condition 3: shadow uses nothing.

To ``limited`` (from ``shadow``, ``suspended`` or ``shut_down``):

1. a passing ``audit.report`` for the class's current rules and harness versions (spec 9.12,
   9.13, 11.23: acceptance applies only to the version tested; a later failing campaign for the
   same versions withdraws it - :func:`loop.passing_audit`);
2. none of the class's last :data:`WINDOW` divergence checks tripped (spec 4.7, 9.8: the
   divergence must be gone, not merely old);
3. a class the exploit procedure suspended is readmitted only by that procedure (``triz-eval
   exploit respond``: to ``shadow``, once a fixed rules version passed the transfer test; spec
   9.11 step 7), never by a mode change - this one also holds for a step up to ``shadow``.

To ``training`` (only from ``limited``), additionally:

4. at least :data:`MIN_LIMITED_AWARDS` verified awards of the class since it became limited
   (one full divergence window of attempts measured under the pressure limit);
5. at least :data:`WINDOW` divergence checks since it became limited, none of them tripped: a
   class the monitor has not watched under pressure does not go to unlimited training (4.7:
   "the system must monitor divergence").

:func:`unmet` reads; it writes nothing and raises nothing for an unmet gate: it returns the
reasons, one sentence each, so that ``loop mode`` can refuse with all of them.
"""

from __future__ import annotations

from ..errors import InputError
from ..ledger.events import Event, EventKind, parse_body
from ..ledger.store import LedgerStore
from . import loop
from .divergence import Settings

#: The divergence monitor's window (its declared default): the checks a gate looks at.
WINDOW = Settings().window
#: Verified awards a class needs in ``limited`` mode before it may go to ``training``.
MIN_LIMITED_AWARDS = WINDOW


def _rank(mode: str) -> int:
    modes: tuple[str, ...] = loop.MODES
    return modes.index(mode)


def _checks(events: list[Event], after_seq: int = 0) -> list[Event]:
    return [ev for ev in events
            if ev.kind == EventKind.DIVERGENCE_CHECKED.value and ev.seq > after_seq]


def limited_awards(store: LedgerStore, task_class: str, since_seq: int) -> int:
    """Verified awards of ``task_class`` recorded after ``since_seq``; a later recall notice
    is not an award, and a quarantined attempt does not count."""
    count = 0
    for seq, body in store.scan(since_seq + 1):
        fields = parse_body(body, seq=seq)
        data = fields["data"]
        if (fields["kind"] == EventKind.TRAINING_INCLUDED.value
                and data.get("task_class") == task_class and data.get("verified") is True
                and data.get("recall") is None and not data.get("quarantined")):
            count += 1
    return count


def unmet(store: LedgerStore, task_class: str, target_mode: str, rules_version: str,
          harness_version: str) -> list[str]:
    """Why ``task_class`` may not move to ``target_mode`` now, under these rules and harness
    versions: an empty list when it may.  Raises InputError for an unknown mode."""
    if target_mode not in loop.MODES:
        raise InputError(f"mode {target_mode!r} is not one of {', '.join(loop.MODES)}")
    events = loop.class_events(store, task_class)
    state = loop.state_of(events, task_class)
    if _rank(target_mode) <= _rank(state.mode) or target_mode in ("suspended", "shut_down"):
        return []  # spec 9.19: restricting or stopping a class is never gated
    reasons: list[str] = []
    if state.cause == "exploit":
        reasons.append(f"{task_class} is {state.mode} for exploit {state.exploit}: only the "
                       "exploit procedure readmits it, to shadow, once a fixed rules version "
                       "passed the transfer test (spec 9.11 step 7; `triz-eval exploit respond`)")
    if target_mode == "shadow":
        return reasons
    if target_mode == "training" and state.mode != "limited":
        reasons.append(f"{task_class} is {state.mode}: it goes to limited before training "
                       "(pilot 10: shadow mode before limited training)")
    if loop.passing_audit(store, task_class, rules_version, harness_version) is None:
        reasons.append(f"no passing audit.report for {task_class} under rules "
                       f"{rules_version[:12]} and harness {harness_version} (spec 9.12, 11.23: "
                       "run `triz-eval audit run`)")
    recent = _checks(events)[-WINDOW:]
    tripped = [ev for ev in recent if ev.data.get("tripped") is True]
    if tripped:
        reasons.append(f"{len(tripped)} of the last {len(recent)} divergence checks tripped "
                       f"(latest at seq {tripped[-1].seq}: {tripped[-1].data.get('reason')}; "
                       "spec 4.7, 9.8)")
    if target_mode == "training" and state.mode == "limited" and state.seq is not None:
        awards = limited_awards(store, task_class, state.seq)
        if awards < MIN_LIMITED_AWARDS:
            reasons.append(f"{awards} verified awards since {task_class} became limited at seq "
                           f"{state.seq}; training needs at least {MIN_LIMITED_AWARDS}")
        since = _checks(events, state.seq)
        if len(since) < WINDOW:
            reasons.append(f"{len(since)} divergence checks since {task_class} became limited; "
                           f"training needs a full window of {WINDOW} (spec 4.7)")
        elif any(ev.data.get("tripped") is True for ev in since):
            reasons.append(f"a divergence check tripped since {task_class} became limited")
    return reasons
