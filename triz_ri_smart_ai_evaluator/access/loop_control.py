"""The owner's control of the loop through the trusted port (spec 9.19; issue 15 item 7).

The ``loop_mode`` resource of the access matrix: only the owner appends to it, the auditor
reads it, the evaluated policy has nothing on it (it can neither change nor see a class's
operating mode, so a drill is nothing it can observe in advance, delay or prevent).  An append
is one of:

* a mode change - pause training use (``shadow``, ``suspended``), ``shut_down``, or back to
  ``training`` / ``limited`` - written with :func:`evaluation.loop.set_mode` and the signed
  request's fields, cause ``owner`` or, for a planned drill, ``drill``;
* a rollback - new attempts of the class are pinned to an earlier rules version the evaluator
  published, from the next submission on (spec 10.5: attempts already started keep theirs).
  Nothing is re-published or rewritten: the decision is a ``class.mode_changed`` of cause
  ``rollback`` naming the version, and lifting it (``"in_force"``) is another;
* a drill's report, recorded as ``drill.completed`` in the class's loop subject (spec 11.25).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..errors import InputError
from ..evaluation import loop
from ..evaluation.attempts import rules_in_ledger
from ..ledger.events import Event, EventKind, NewEvent
from ..ledger.payloads import AttemptEnded, DrillCompleted
from ..ledger.store import LedgerStore
from ..rules.published import BUNDLED_STORE, RulesStore, pin_in_force
from ..rules.task_class import TaskClass
from ..rules.versions import PinnedRules, pin
from .backing import Catalogue
from .requests import DrillReportAppend, LoopModeAppend

#: Builds the ``evidence.stored`` event of the signed request for a ledger subject.
SignedEvent = Callable[[str], NewEvent]


def known_versions(catalogue: Catalogue, class_id: str) -> list[str]:
    """The rules versions of a class this evaluator can put in force, oldest first: the
    bundled publications, then those published through the trusted port."""
    versions = [str(r["version"]) for r in RulesStore(BUNDLED_STORE).history(class_id)]
    versions += [v for v, _ in catalogue.served(class_id) if v not in versions]
    return versions


def rules_of(store: LedgerStore, catalogue: Catalogue, class_id: str, version: str
             ) -> TaskClass:
    """The task class published under ``version``, checked against its hash.  Raises
    InputError when the evaluator never published it for ``class_id``, IntegrityError when its
    stored bytes changed."""
    tc = catalogue.version(version)
    if tc is None and version in {str(r["version"])
                                  for r in RulesStore(BUNDLED_STORE).history(class_id)}:
        tc = RulesStore(BUNDLED_STORE).load(class_id, version)
    if tc is None:
        tc = rules_in_ledger(store, version)
    if tc.id != class_id:
        raise InputError(f"rules version {version[:12]} is of class {tc.id}, not {class_id}")
    return tc


def pin_new_attempt(store: LedgerStore, catalogue: Catalogue, class_id: str, now: datetime
                    ) -> PinnedRules:
    """The rules a new attempt of ``class_id`` starting ``now`` runs under (spec 10.5): the
    owner's rollback if one is in force (9.19), else the latest version published through the
    trusted port that has taken effect, else the bundled publication in force.  Raises
    InputError (unknown class), RuleError (nothing in force yet)."""
    tc = catalogue.get(class_id)
    rollback = loop.rollback_now(store, tc.id)
    if rollback is not None:
        return pin(rules_of(store, catalogue, tc.id, rollback), started_at=now,
                   version=rollback)
    served = catalogue.served(tc.id)
    taken_effect = [(v, t) for v, t in served[1:] if t.effective_from <= now]
    if taken_effect:
        version, chosen = taken_effect[-1]
        return pin(chosen, started_at=now, version=version)
    return pin_in_force(served[0][1] if served else tc, started_at=now)


def end_if_shut_down(store: LedgerStore, task_class: str, attempt_id: str,
                     signed: dict[str, str], evidence: SignedEvent, *, actor: str,
                     at: datetime) -> dict[str, Any] | None:
    """spec 9.19: an open attempt of a class the owner shut down is not evaluated; it ends
    ``errored`` at stage ``shut_down`` (as the runner ends one), with who asked.  Returns the
    answer, or None when the class is not shut down."""
    state = loop.class_state(store, task_class)
    if state.mode != "shut_down":
        return None
    reason = f"task class {task_class} is shut down: {state.describe()}"
    ended = AttemptEnded.model_validate({"reason": reason[:2000], "stage": "shut_down",
                                         "outcome": "errored", "by": actor, **signed})
    store.append([evidence(attempt_id), NewEvent.make(
        EventKind.ATTEMPT_ERRORED, ended, actor=actor, at=at, attempt=attempt_id)])
    return {"attempt_id": attempt_id, "status": "errored", "stage": "shut_down",
            "reason": reason}


def _entries(events: list[Event], kind: EventKind) -> list[dict[str, Any]]:
    return [{"seq": e.seq, "at": e.at, "data": e.data} for e in events if e.kind == kind.value]


class LoopControl:
    """The ``loop_mode`` reads and appends of one trusted principal (the matrix decided)."""

    def __init__(self, store: LedgerStore, catalogue: Catalogue, actor: str,
                 clock: Callable[[], datetime]) -> None:
        self._store, self._catalogue, self._actor, self._clock = store, catalogue, actor, clock

    def read(self, class_id: str) -> dict[str, Any]:
        """The class's mode, the rollback and version in force, the versions it can be rolled
        back to, its mode changes and its drills.  Raises InputError for an unknown class."""
        tc = self._catalogue.get(class_id)
        events = loop.class_events(self._store, tc.id)
        state = loop.state_of(events, tc.id)
        pinned = pin_new_attempt(self._store, self._catalogue, tc.id, self._clock())
        return {
            "class_id": tc.id,
            "state": {"mode": state.mode, "previous": state.previous, "cause": state.cause,
                      "reason": state.reason, "since": state.since, "seq": state.seq,
                      "drill": state.drill, "max_included": state.max_included,
                      "per_seconds": state.per_seconds},
            "rollback": loop.rollback_in_force(events),
            "in_force": pinned.version,
            "versions": known_versions(self._catalogue, tc.id),
            "changes": _entries(events, EventKind.CLASS_MODE_CHANGED),
            "drills": _entries(events, EventKind.DRILL_COMPLETED),
        }

    def append(self, req: LoopModeAppend | DrillReportAppend, signed: dict[str, str],
               evidence: SignedEvent) -> dict[str, Any]:
        """Apply a mode change or rollback, or record a drill's report.  Raises InputError
        (unknown class, a version the evaluator never published for it, nothing to lift, a
        report naming events that are not this class's drill changes) with nothing written."""
        tc = self._catalogue.get(req.class_id)
        subject = loop.subject(tc.id)
        if isinstance(req, DrillReportAppend):
            return self._report(tc.id, req, evidence(subject))
        before = loop.class_state(self._store, tc.id)
        common: dict[str, Any] = {"reason": req.reason, "at": self._clock(),
                                  "actor": self._actor, "drill": req.drill,
                                  "signed": {"by": self._actor, **signed}}
        if req.mode is not None:
            seq = loop.set_mode(self._store, tc.id, req.mode,
                                cause="drill" if req.drill else "owner",
                                max_included=req.max_included, per_seconds=req.per_seconds,
                                **common)
        else:
            version = self._rollback_target(tc.id, req.rollback_to)
            seq = loop.set_mode(self._store, tc.id, before.mode, cause="rollback",
                                rules_version=version, max_included=before.max_included,
                                per_seconds=before.per_seconds, **common)
        self._store.append([evidence(subject)])
        state = loop.class_state(self._store, tc.id)
        return {"class_id": tc.id, "seq": seq, "mode": state.mode,
                "rollback": loop.rollback_in_force(loop.class_events(self._store, tc.id))}

    def _rollback_target(self, class_id: str, target: str | None) -> str | None:
        current = loop.rollback_in_force(loop.class_events(self._store, class_id))
        if target == "in_force":
            if current is None:
                raise InputError(f"no rollback of {class_id} is in force")
            return None
        assert target is not None
        if target not in known_versions(self._catalogue, class_id):
            raise InputError(f"rules version {target[:12]} was never published for {class_id}")
        in_force = pin_new_attempt(self._store, self._catalogue, class_id, self._clock())
        if target == in_force.version:
            raise InputError(f"rules version {target[:12]} is already in force for {class_id}")
        rules_of(self._store, self._catalogue, class_id, target)  # loads: its hash still holds
        return target

    def _report(self, class_id: str, req: DrillReportAppend, evidence: NewEvent
                ) -> dict[str, Any]:
        drill_changes = {e.seq for e in loop.class_events(self._store, class_id)
                         if e.kind == EventKind.CLASS_MODE_CHANGED.value
                         and e.data.get("drill") is True}
        stray = [s for s in req.report.changes if s not in drill_changes]
        if stray:
            raise InputError(f"events {stray} are not drill changes of {class_id}")
        data = DrillCompleted(task_class=class_id, drill=req.report.drill,
                              changes=tuple(req.report.changes), checks=req.report.checks,
                              passed=req.report.passed)
        seqs = self._store.append([evidence, NewEvent.make(
            EventKind.DRILL_COMPLETED, data, actor=self._actor, at=self._clock(),
            attempt=loop.subject(class_id))])
        return {"class_id": class_id, "seq": seqs[-1], "passed": data.passed}
