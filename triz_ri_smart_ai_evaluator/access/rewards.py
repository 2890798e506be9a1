"""The reward a trainer may use for one attempt, read from the ledger (issue 16; spec 6.7, 9.6,
9.11, 9.17, 10.1).

A trainer calls a reward function that returns one number per completion, and every trainer
treats an unscorable result in its own way: some drop ``None``, some crash on it, some silently
turn it into 0.  This module answers with a number only when the ledger holds one a trainer may
use, and otherwise with ``None`` and the reason, never a made-up 0:

=========================  ========  ==========================================================
reason                     reward    when
=========================  ========  ==========================================================
``verified``               S         a verified award's final signal (after escrow, if any)
``not_verified``           0         an award that is not verified (spec 6.7: a real zero)
``verification_failed``    0         a trusted component ended the attempt as failed checks
``invalid_artefact``       0         the harness could not take the artefact (stage prepare):
                                     the policy's own output, so a real zero, never a skip
``pending``                None      no outcome yet, inside the attempt's deadline
``timeout``                None      no outcome by the attempt's deadline, or abandoned
``pending_confirmation``   None      verified, its payment held until confirmation (9.17)
``quarantined``            None      the attempt is quarantined (9.11) and its award paid
                                     something, or it has no verified award
``quarantined_penalty``    S <= 0    quarantined after a verified award of S <= 0 (a cheat the
                                     harness caught): the penalty stands, or a caught cheat
                                     would escape it as a skipped sample
``recalled``               None      training consumers were told to drop it (9.11 step 2)
``shadow``                 None      the rules or the loop keep the class's signals in shadow
``suspended``              None      the class is suspended (exploit procedure, 9.11)
``shut_down``              None      the owner shut the class down (9.19)
``paused``                 None      withheld by the loop's pressure limit (4.7, 9.8)
``infrastructure_failure`` None      the evaluation broke (isolation, the run, the service),
                                     or a trusted component cancelled the attempt
=========================  ========  ==========================================================

The first row that applies wins, in this order: quarantine and recall, the class's operating
mode now, the decision recorded at the award, then the attempt's outcome.  A withholding mode
set after the award still withholds (fail closed: a suspended class pays nothing out).

The ``purpose`` of a read is ``training`` (the default, all of the above) or ``evaluation``: an
evaluation (an Inspect AI eval, a benchmark run) measures and does not train, so a signal that
shadow mode or the pressure limit keep out of training is its number there.  Quarantine, recall,
suspension and shutdown stay null for both purposes: those values are not trusted.

``training_use`` is the ledger's own ``training.included`` decision for the attempt and the
loop state now; it is false for a real zero, which the ledger never counts as included.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from .._clock import now_utc
from .._ids import is_plain_id
from ..canonical import canonical_json
from ..errors import InputError
from ..evaluation.loop import ClassState, class_state
from ..ledger.events import Event, EventKind
from .enforce import AccessGuard, Principal
from .matrix import Action, Resource
from .nonces import book_for
from .views import final_award, of_kind, owner_of, quarantine_of

#: Reasons with a real number; every other reason comes with ``reward: None``.
SCORED = frozenset({"verified", "not_verified", "verification_failed", "invalid_artefact",
                    "quarantined_penalty"})
#: Reasons that may still change to a number: a batch call waits on these.
WAITING = frozenset({"pending", "pending_confirmation"})
_MODE_REASONS = {"shadow": "shadow", "suspended": "suspended", "shut_down": "shut_down"}
#: What a read is for: ``training`` withholds what training may not use; ``evaluation`` only
#: what is not trusted.
PURPOSES = ("training", "evaluation")
#: Withholding reasons an evaluation read sees through (the measurement itself is sound).
_TRAINING_ONLY = frozenset({"shadow", "paused"})


@dataclass(frozen=True, slots=True)
class Reward:
    """One attempt's answer: ``reward`` is None exactly when ``reason`` is not in SCORED."""

    attempt_id: str
    ledger_seq: int
    reward: Decimal | None
    reason: str
    training_use: bool
    detail: str | None = None

    def to_data(self) -> dict[str, Any]:
        return {
            "attempt_id": self.attempt_id,
            "ledger_seq": self.ledger_seq,
            # A JSON number for the trainer, and the exact decimal beside it.
            "reward": None if self.reward is None else float(self.reward),
            "reward_exact": None if self.reward is None else str(self.reward),
            "reason": self.reason,
            "training_use": self.training_use,
            "detail": self.detail,
        }


#: ``answer(reason, seq, reward, use, detail)`` inside :func:`reward_of`.
_Answer = Callable[..., "Reward"]


def _last(events: Sequence[Event], kind: EventKind) -> Event | None:
    found = [e for e in events if e.kind == kind.value]
    return found[-1] if found else None


def reward_of(attempt_id: str, events: Sequence[Event], state: ClassState,
              now: datetime, *, purpose: str = "training") -> Reward:
    """The reward of the attempt whose ledger events are ``events`` (non-empty, initiated),
    with its class's operating mode ``state`` and the time ``now`` (timezone-aware), for
    ``purpose`` (see the module docstring).  Raises InputError for an unknown purpose."""
    if purpose not in PURPOSES:
        raise InputError(f"purpose {purpose!r} is not one of {', '.join(PURPOSES)}")
    found = _training_reward(attempt_id, events, state, now)
    if purpose == "evaluation" and found.reason in _TRAINING_ONLY:
        # The same ledger with the training-only withholding looked through.
        measured = _training_reward(attempt_id, events, ClassState(state.task_class), now,
                                    evaluation=True)
        return Reward(attempt_id, measured.ledger_seq, measured.reward, measured.reason,
                      False, f"{found.reason} for training: {found.detail}")
    return found


def _training_reward(attempt_id: str, events: Sequence[Event], state: ClassState,
                     now: datetime, *, evaluation: bool = False) -> Reward:
    head = events[-1].seq

    def answer(reason: str, seq: int = head, reward: Decimal | None = None,
               use: bool = False, detail: str | None = None) -> Reward:
        assert (reward is not None) == (reason in SCORED)
        return Reward(attempt_id, seq, reward, reason, use, detail)

    quarantine = quarantine_of(events)
    award_event = _last(events, EventKind.AWARD_DECISION)
    penalty = _penalty(award_event)
    if quarantine != "clear" and penalty is None:
        return answer("quarantined", detail=f"quarantine status {quarantine}")
    included = _last(events, EventKind.TRAINING_INCLUDED)
    if included is not None and included.data.get("recall"):
        return answer("recalled", included.seq, detail=str(included.data["recall"]))
    if state.mode in _MODE_REASONS:
        return answer(_MODE_REASONS[state.mode], state.seq or head,
                      detail=state.describe())

    if award_event is not None and award_event.data.get("mode") == "shadow" and not evaluation:
        return answer("shadow", award_event.seq, detail="the rules version's mode is shadow")
    if quarantine != "clear" and award_event is not None and penalty is not None:
        return answer("quarantined_penalty", award_event.seq, penalty,
                      detail=f"quarantine status {quarantine}; outcome "
                             f"{award_event.data.get('outcome')}")
    if award_event is not None:
        return _awarded(answer, events, award_event, included, evaluation)
    return _unawarded(answer, events, now)


def _penalty(award_event: Event | None) -> Decimal | None:
    """The signal of a verified award of S <= 0 (what a caught cheat earns), else None."""
    if award_event is None or not award_event.data.get("verified"):
        return None
    value = award_event.data.get("value")
    if value is None:
        return None
    signal = Decimal(str(value))
    return signal if signal <= 0 else None


def _awarded(answer: _Answer, events: Sequence[Event], award_event: Event,
             included: Event | None, evaluation: bool) -> Reward:
    award = award_event.data
    if included is not None and included.data.get("withheld") and not evaluation:
        mode = str(included.data.get("class_mode") or "")
        withheld = str(included.data["withheld"])
        return answer(_MODE_REASONS.get(mode, "paused"), included.seq, detail=withheld)
    if not award.get("verified"):
        return answer("not_verified", award_event.seq, Decimal(0),
                      detail=f"outcome {award.get('outcome')}")
    final = final_award(events)["final"]
    if final is None:
        return answer("pending_confirmation", award_event.seq,
                      detail="payment held until confirmation (escrow)")
    use = bool(included is not None and included.data.get("included"))
    settled = [e for e in events if e.kind in (EventKind.ESCROW_RELEASED.value,
                                               EventKind.ESCROW_ADJUSTED.value)]
    seq = settled[-1].seq if settled else award_event.seq
    return answer("verified", seq, Decimal(str(final)), use)


def _unawarded(answer: _Answer, events: Sequence[Event], now: datetime) -> Reward:
    ended = [e for e in events if e.kind in (
        EventKind.ATTEMPT_ERRORED.value, EventKind.ATTEMPT_CANCELLED.value,
        EventKind.ATTEMPT_VERIFICATION_FAILED.value, EventKind.ATTEMPT_ABANDONED.value,
        EventKind.ATTEMPT_COMPLETED.value)]
    if not ended:
        initiated = of_kind(events, EventKind.ATTEMPT_INITIATED)
        deadline = datetime.fromisoformat(str(initiated[0]["deadline"])) if initiated else None
        if deadline is not None and now > deadline:
            return answer("timeout", detail=f"no outcome by the deadline {deadline.isoformat()}")
        return answer("pending", detail="no outcome yet")
    end = ended[0]
    reason = str(end.data.get("reason") or "")
    if end.kind == EventKind.ATTEMPT_VERIFICATION_FAILED.value:
        return answer("verification_failed", end.seq, Decimal(0), detail=reason)
    if end.kind == EventKind.ATTEMPT_ABANDONED.value:
        return answer("timeout", end.seq, detail=reason)
    if end.kind == EventKind.ATTEMPT_ERRORED.value and end.data.get("stage") == "prepare":
        return answer("invalid_artefact", end.seq, Decimal(0), detail=reason)
    if end.kind == EventKind.ATTEMPT_COMPLETED.value:
        # Completed with no award: nothing to pay, and nothing says why (fail closed).
        return answer("infrastructure_failure", end.seq, detail="completed without an award")
    stage = end.data.get("stage")
    where = f" at stage {stage}" if stage else ""
    return answer("infrastructure_failure", end.seq,
                  detail=f"{end.kind.removeprefix('attempt.')}{where}: {reason}")


#: At most this many attempts per batch call (the request body limit allows about 1,500).
MAX_BATCH = 512
#: An idempotency key's answer is kept this long (as a trusted append's request_id).
KEY_SECONDS = 24 * 3600


class RewardReader:
    """A principal's reads of rewards: each attempt through the access matrix first (a
    training consumer reads only its own runs' attempts, scope ``own_final``; a refusal is
    logged and fails the whole call), then :func:`reward_of` on the ledger's events."""

    def __init__(self, guard: AccessGuard, principal: Principal, *,
                 clock: Callable[[], datetime] = now_utc) -> None:
        self._guard, self._store = guard, guard.ledger
        self.principal = principal
        self._clock = clock

    def read(self, attempt_ids: Sequence[str], *, purpose: str = "training") -> list[Reward]:
        """One :class:`Reward` per id, in the order given.  Raises InputError for a malformed
        or unknown id (after the matrix has had its say) or an unknown purpose, AccessDenied
        for another's attempt."""
        if purpose not in PURPOSES:
            raise InputError(f"purpose {purpose!r} is not one of {', '.join(PURPOSES)}")
        if not attempt_ids:
            raise InputError("attempt_ids is empty: name at least one attempt")
        if len(attempt_ids) > MAX_BATCH:
            raise InputError(f"attempt_ids holds {len(attempt_ids)} ids; at most {MAX_BATCH}")
        now = self._clock()
        states: dict[str, ClassState] = {}
        out = []
        for attempt in attempt_ids:
            if not (isinstance(attempt, str) and is_plain_id(attempt)):
                raise InputError(f"attempt id {str(attempt)[:80]!r} is not a plain identifier")
            events = self._store.attempt_events(attempt)
            self._guard.verify_allowed(self.principal, Resource.AWARDS_AND_SIGNALS, Action.READ,
                                       owner_of=owner_of(events), target=attempt)
            initiated = of_kind(events, EventKind.ATTEMPT_INITIATED)
            if not initiated:
                raise InputError(f"no attempt {attempt!r} in the ledger")
            task_class = str(initiated[0].get("task_class"))
            if task_class not in states:
                states[task_class] = class_state(self._store, task_class)
            out.append(reward_of(attempt, events, states[task_class], now,
                                 purpose=purpose))
        return out

    def remembered(self, key: str, request: str) -> list[dict[str, Any]] | None:
        """The answer first given to idempotency ``key`` for the same ``request`` (its
        digest), or None.  Raises InputError for a key reused for a different request."""
        first = book_for(self._store).answer(self.principal.id, _book_key(key),
                                             now=int(self._clock().timestamp()))
        if first is None:
            return None
        if first[0] != request:
            raise InputError(f"idempotency_key {key!r} was used for a different request")
        results: list[dict[str, Any]] = json.loads(first[1])
        return results

    def remember(self, key: str, request: str, results: list[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
        """Keep ``results`` as the answer to ``key`` for :data:`KEY_SECONDS`; return the
        answer the key keeps (an earlier call's, when two calls with one key raced)."""
        now = int(self._clock().timestamp())
        if book_for(self._store).record(self.principal.id, _book_key(key), request=request,
                                        answer=canonical_json(results),
                                        expires=now + KEY_SECONDS, now=now):
            return results
        kept = self.remembered(key, request)
        if kept is None:
            raise InputError(f"idempotency_key {key!r} is in use by a call still running")
        return kept


def _book_key(key: str) -> str:
    if not (len(key) <= 128 and is_plain_id(key)):
        raise InputError("idempotency_key must be a plain identifier of at most 128 characters")
    return f"rewards:{key}"
