"""Attempts in the ledger: the lifecycle events and the spec 10.1 record.

Writing follows spec 10.3 and 10.4: ``attempt.initiated`` is written *before* the attempt runs,
so the policy cannot choose which attempts are logged; original measurements, evidence, the
verifier's decision, calculated indicators, the award decision and comments are separate events,
and a comment never changes a measurement.  The rules in force are recorded once per version as
``rules.published`` with their canonical bytes, so the ledger alone is enough to recompute.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from ..errors import InputError, IntegrityError
from ..ledger.events import OUTCOME_KINDS, Event, EventKind, NewEvent
from ..ledger.evidence import resolve, strip, unresolved_in
from ..ledger.payloads import (
    AttemptAbandoned,
    AttemptCompleted,
    AttemptInitiated,
    AwardDecision,
    Benchmark,
    EscrowHeld,
    EscrowSettled,
    EvidenceResolved,
    IndicatorsComputed,
    Payload,
    RawChecklist,
    RawClaim,
    RawCost,
    RawIndicator,
    RawInput,
    RawLateIndicator,
    RawObstacle,
    RawSelfCheck,
    RulesPublished,
    SourceRef,
    TrainingIncluded,
    payload_as,
    payload_from,
    payload_of,
)
from ..ledger.record import attempt_record, violations
from ..ledger.store import LedgerStore
from ..rules.task_class import TaskClass
from ..rules.versions import PinnedRules, canonical_rules, pin, rules_from_canonical
from ..signal.calculator import SignalCalculator
from ..signal.escrow import Settlement, settle_escrow
from ..signal.inputs import AttemptInputs, Measurement
from ..signal.result import Signal
from . import instances, loop, tail

__all__ = [
    "HARNESS",
    "ConfirmationLookup",
    "attempt_record",
    "award_payload",
    "evaluate",
    "indicators_payload",
    "initiate",
    "initiation_events",
    "inputs_from_events",
    "parse_late",
    "raw_inputs",
    "reconcile",
    "record_measurements",
    "record_settlement",
    "rules_in_ledger",
    "rules_published_in",
    "settle",
    "verify_late_evidence",
    "verify_settleable",
]

HARNESS = "evaluator"


def _ev(
    kind: EventKind,
    data: Payload,
    *,
    attempt: str | None,
    at: datetime,
    actor: str = HARNESS,
) -> NewEvent:
    return NewEvent.make(kind, data, actor=actor, at=at, attempt=attempt)


@tail.view_of(EventKind.RULES_PUBLISHED)
class _Published:
    """The rules versions the ledger holds a ``rules.published`` event for (a :mod:`.tail`
    view: a service initiates many attempts; rescanning the whole log each time would be
    O(n))."""

    def __init__(self) -> None:
        self.versions: set[str] = set()

    def read(self, seq: int, fields: dict[str, Any]) -> None:
        published = payload_from(fields["kind"], fields["data"], seq=seq)
        assert isinstance(published, RulesPublished)
        self.versions.add(published.rules_version)


def rules_published_in(store: LedgerStore) -> set[str]:
    """Every rules version the ledger holds a ``rules.published`` event for."""
    return set(tail.current(store, _Published).versions)


def _scan_kind(store: LedgerStore, kind: EventKind) -> Iterable[dict[str, Any]]:
    marker = f'"kind":"{kind.value}"'.encode()
    for _, body in store.scan():
        if marker in body:
            fields = json.loads(body)
            if fields["kind"] == kind.value:
                yield fields


def initiate(
    store: LedgerStore,
    pinned: PinnedRules,
    *,
    attempt_id: str,
    task_version: str,
    started_at: datetime,
    deadline: datetime,
    control_ids: Iterable[str] = (),
    verifier_version: str = "none",
    artefact_sha256: str | None = None,
    instance: str | None = None,
) -> int:
    """Record an attempt before it runs (spec 10.4), with every rule it will be judged by;
    return the position of its ``attempt.initiated``.  Raises like
    :func:`initiation_events`."""
    return store.append(initiation_events(
        store, pinned, attempt_id=attempt_id, task_version=task_version,
        started_at=started_at, deadline=deadline, control_ids=control_ids,
        verifier_version=verifier_version, artefact_sha256=artefact_sha256,
        instance=instance))[-1]


def initiation_events(
    store: LedgerStore,
    pinned: PinnedRules,
    *,
    attempt_id: str,
    task_version: str,
    started_at: datetime,
    deadline: datetime,
    control_ids: Iterable[str] = (),
    verifier_version: str = "none",
    artefact_sha256: str | None = None,
    instance: str | None = None,
) -> list[NewEvent]:
    """The events that record an attempt before it runs (spec 10.4): ``rules.published`` when
    the ledger does not hold its rules yet, then ``attempt.initiated`` (always last).  The
    caller appends them, before anything of the attempt or with it in one batch.

    ``instance`` is the task instance the attempt works on (default: the attempt itself); the
    rework rule credits an instance once across its attempts (spec 3.5, 8.6).  Raises
    InputError for an attempt already initiated, a malformed instance id, or an instance whose
    attempts belong to another task class.
    """
    tc = pinned.task_class
    instance = attempt_id if instance is None else instances.verify_instance(instance)
    # The three lookups read the ledger's new tail once (one round trip on PostgreSQL).
    with tail.read_once(store):
        if instances.is_initiated(store, attempt_id):
            raise InputError(f"attempt {attempt_id!r} was already initiated")
        other = instances.class_of(store, instance)
        published = pinned.version in rules_published_in(store)
    if other is not None and other != tc.id:
        raise InputError(
            f"instance {instance!r} is a task of class {other!r}, not {tc.id!r}: an instance "
            "belongs to one task class"
        )
    events = []
    if not published:
        events.append(
            _ev(
                EventKind.RULES_PUBLISHED,
                RulesPublished(
                    task_class=tc.id,
                    rules_version=pinned.version,
                    canonical_rules=canonical_rules(tc).decode("utf-8"),
                ),
                attempt=None,
                at=started_at,
            )
        )
    data = AttemptInitiated(
        task_class=tc.id,
        attempt_id=attempt_id,
        task_version=task_version,
        instance=instance,
        rules_version=pinned.version,
        functions=tuple(f.id for f in tc.functions),
        indicators=tuple(i.id for i in tc.indicators),
        benchmarks={
            ind: Benchmark(
                version=bm.version,
                value=None if bm.value is None else str(bm.value),
                low=None if bm.low is None else str(bm.low),
                high=None if bm.high is None else str(bm.high),
            )
            for ind, bm in sorted(pinned.benchmarks.items())
        },
        # spec 10.1: identifiers of the control data, never the control data itself.
        control_ids=tuple(sorted(control_ids)),
        sources={
            s.id: SourceRef(kind=s.kind.value, authentication=s.authentication)
            for s in tc.sources
        },
        # spec 10.1: the policy's access permissions for each source.
        policy_access={s.id: s.policy_access.value for s in tc.sources},
        checklist=tuple(c.id for c in tc.checklist),
        self_checks=tuple(c.id for c in tc.self_checks),
        formula=tc.formula.model.value,
        verifier_version=verifier_version,
        artefact_sha256=artefact_sha256,
        started_at=started_at.astimezone(UTC).isoformat(),
        deadline=deadline.astimezone(UTC).isoformat(),
    )
    events.append(_ev(EventKind.ATTEMPT_INITIATED, data, attempt=attempt_id, at=started_at))
    return events


def record_measurements(
    store: LedgerStore, attempt_id: str, inputs: AttemptInputs, *, at: datetime
) -> list[int]:
    """Record the original measurements, checklist states, self-checks, costs, obstacles and
    claims exactly as received (spec 10.3): one event each, each naming its source."""
    events = _measurement_events(attempt_id, inputs, at=at)
    return store.append(events) if events else []


#: The keyed raw inputs: the section of AttemptInputs and the record of each entry.
_KEYED: tuple[tuple[str, type[RawIndicator | RawChecklist | RawSelfCheck]], ...] = (
    ("measurements", RawIndicator),
    ("checklist", RawChecklist),
    ("self_checks", RawSelfCheck),
)


def raw_inputs(inputs: AttemptInputs) -> list[RawInput]:
    """The ``measurement.raw`` records of ``inputs``, in the order they are written: each
    indicator, checklist item and self-check by id, costs by id, obstacles, claims."""
    out: list[RawInput] = [
        model(id=key, **item.model_dump(mode="json"))
        for section, model in _KEYED
        for key, item in sorted(getattr(inputs, section).items())
    ]
    out += [RawCost(id=cost, value=str(value)) for cost, value in sorted(inputs.costs.items())]
    out += [RawObstacle(**obstacle.model_dump(mode="json")) for obstacle in inputs.obstacles]
    # spec 8.8: a claim is stored as what it is, a claim; it never becomes evidence.
    out += [RawClaim(text=claim) for claim in inputs.claims]
    return out


def _measurement_events(attempt_id: str, inputs: AttemptInputs, *, at: datetime
                        ) -> list[NewEvent]:
    # spec 10.3: one event per input, each by the source it came from.
    return [_ev(EventKind.MEASUREMENT_RAW, raw, attempt=attempt_id, at=at,
                actor=raw.actor() or HARNESS) for raw in raw_inputs(inputs)]


def indicators_payload(signal: Signal) -> IndicatorsComputed:
    """What ``indicators.computed`` holds: performance values, K, Perf_overall, blocks."""

    def n(v: object) -> str | None:
        return None if v is None else str(v)

    d = signal.to_dict()
    return IndicatorsComputed(
        performance={i["id"]: i["performance"] for i in d["indicators"]},
        status={i["id"]: i["status"] for i in d["indicators"]},
        below_minimum=tuple(sorted(i["id"] for i in d["indicators"] if i["below_minimum"])),
        checks={c["id"]: c["state"] for c in d["checks"]},
        quality_k=d["quality_k"],
        perf_overall=d["perf_overall"],
        blocks={b["id"]: b["value"] for b in d["blocks"]},
        cost=n(d["cost"]["value"]),
    )


def award_payload(
    signal: Signal, pinned: PinnedRules, *, rework: Mapping[str, Any] | None = None
) -> AwardDecision:
    """What ``award.decision`` holds: the signal and its preliminary / held / final parts,
    every violation, and (from ``evaluate``) the ``rework`` credit of the attempt's instance."""
    d = signal.to_dict()
    payload = AwardDecision(
        rules_version=signal.rules_version,
        outcome=d["outcome"],
        reasons=tuple(d["reasons"]),
        critical_violation=d["critical_violation"],
        violations=tuple(violations(signal, pinned)),
        verified=d["verified"],
        mode=d["mode"],
        training_use=d["training_use"],
        **d["signal"],
    )
    if rework is not None:
        payload = payload.model_copy(update={"rework": dict(rework)})
    return payload


def _serialised(store: LedgerStore) -> contextlib.AbstractContextManager[None]:
    """One transaction from reading the instance's awards to appending this one, where the
    store offers it (``group``): two evaluations of one instance cannot both be credited."""
    group = getattr(store, "group", None)
    return group() if callable(group) else contextlib.nullcontext()


def _blob_problem(store: LedgerStore, digest: str) -> str | None:
    try:
        store.get_evidence(digest)
    except IntegrityError as e:
        return e.message
    return None


def evaluate(
    store: LedgerStore,
    pinned: PinnedRules,
    inputs: AttemptInputs,
    *,
    attempt_id: str,
    at: datetime,
    instance: str | None = None,
) -> Signal:
    """Record the raw inputs, resolve their evidence, compute the signal, record indicators,
    award (with its rework credit), the held escrow if delayed and the training decision, then
    mark the attempt completed, all in one append.

    Every evidence digest must resolve to a blob stored for this attempt by a trusted
    component (``ledger.evidence``); what does not is recorded in ``evidence.resolved``, named
    in the reasons and removed from the calculator's inputs, so the value is not verified (fail
    closed).  ``instance``, when a trusted caller names it, must be the one the attempt was
    initiated with.  Raises InputError for an attempt not initiated or already finished, another
    instance, or inputs the rules refuse; nothing is written then.
    """
    with _serialised(store):
        events = store.attempt_events(attempt_id)
        initiated = next((e.data for e in events
                          if e.kind == EventKind.ATTEMPT_INITIATED.value), None)
        if initiated is None:
            raise InputError(f"attempt {attempt_id!r} was not initiated (spec 10.4)")
        if any(e.kind in OUTCOME_KINDS for e in events):
            raise InputError(f"attempt {attempt_id!r} already has an outcome")
        recorded = str(initiated.get("instance") or attempt_id)
        if instance is not None and instance != recorded:
            raise InputError(
                f"attempt {attempt_id!r} works on instance {recorded!r}, not {instance!r}: the "
                "instance is fixed when the attempt starts (spec 10.4)"
            )
        # Compute first: inputs the rules refuse (unknown ids, wrong units) leave no trace of
        # half an evaluation in the ledger.  One decision path: the calculator, on the inputs
        # whose evidence resolved.
        resolution = resolve(events, inputs, lambda digest: _blob_problem(store, digest))
        signal = SignalCalculator(pinned).compute(resolution.inputs)
        signal = signal._replace(reasons=(*signal.reasons, *resolution.reasons()),
                                 evidence_check="resolved")
        rework = instances.credit(signal, attempt_id=attempt_id, instance=recorded,
                                  earlier=instances.earlier_awards(store, recorded))
        quarantined = any(e.kind == EventKind.QUARANTINE_CHANGED.value
                          and e.data.get("status") == "quarantined" for e in events)
        _write_award(store, attempt_id, inputs, signal, pinned,
                     resolution=EvidenceResolved.model_validate(resolution.record()),
                     rework=rework, at=at,
                     quarantined=quarantined)
    return signal


def _write_award(
    store: LedgerStore,
    attempt_id: str,
    inputs: AttemptInputs,
    signal: Signal,
    pinned: PinnedRules,
    *,
    resolution: EvidenceResolved,
    rework: dict[str, Any],
    at: datetime,
    quarantined: bool = False,
) -> None:
    # spec 10.3: the raw inputs exactly as received, then each decision as its own record.
    award = award_payload(signal, pinned, rework=rework)
    out = _measurement_events(attempt_id, inputs, at=at)
    out += [
        _ev(EventKind.EVIDENCE_RESOLVED, resolution, attempt=attempt_id, at=at),
        _ev(EventKind.INDICATORS_COMPUTED, indicators_payload(signal), attempt=attempt_id, at=at),
        _ev(EventKind.AWARD_DECISION, award, attempt=attempt_id, at=at),
    ]
    if signal.delayed:
        out.append(
            _ev(
                EventKind.ESCROW_HELD,
                EscrowHeld(held=str(signal.held), payable_now=str(signal.payable_now)),
                attempt=attempt_id,
                at=at,
            )
        )
    # spec 10.1: whether the attempt goes into training, decided at award time (never in
    # shadow mode, never unverified); a later quarantine is its own record.
    # A stopping condition (pilot 12) quarantines the attempt before its award: never
    # included then.
    included = TrainingIncluded(included=award.training_use and not quarantined,
                                mode=award.mode, verified=award.verified)
    if quarantined:
        included = included.model_copy(update={"quarantined": True})
    # spec 4.7, 9.8, 9.11, 9.19 (issue 15): the class's operating mode and pressure limit.
    included = loop.training_decision(store, pinned.task_class.id, included, at)
    out.append(_ev(EventKind.TRAINING_INCLUDED, included, attempt=attempt_id, at=at))
    out.append(
        _ev(
            EventKind.ATTEMPT_COMPLETED,
            AttemptCompleted(outcome=signal.outcome.value),
            attempt=attempt_id,
            at=at,
        )
    )
    store.append(out)


def record_settlement(
    store: LedgerStore,
    attempt_id: str,
    settlement: Settlement,
    *,
    at: datetime,
    late_source: str | None,
) -> int:
    """Record an escrow settlement (spec 10.6): released or adjusted, under the original rules."""
    event = _settlement_event(attempt_id, settlement, at=at, late_source=late_source)
    return store.append([event])[-1]


def _settlement_event(
    attempt_id: str,
    settlement: Settlement,
    *,
    at: datetime,
    late_source: str | None,
    echo_collision: Sequence[dict[str, Any]] = (),
) -> NewEvent:
    kind = (
        EventKind.ESCROW_RELEASED
        if settlement.kind.value in ("released", "forfeited")
        else EventKind.ESCROW_ADJUSTED
    )
    # echo_collision: the late values applied on the strength of a report that repeats a
    # policy output, recorded for the auditor (spec 8.14, 9.15; docs/adr/0006).
    data = EscrowSettled.model_validate({**settlement.to_dict(), "late_source": late_source,
                                         "echo_collision": list(echo_collision)})
    return _ev(kind, data, attempt=attempt_id, at=at)


def reconcile(store: LedgerStore, *, now: datetime) -> list[str]:
    """Write ``attempt.abandoned`` for every initiated attempt past its deadline with no
    outcome (spec 10.4): an attempt never silently disappears."""
    initiated: dict[str, datetime] = {}
    finished: set[str] = set()
    for _, body in store.scan():
        fields = json.loads(body)
        kind, attempt = fields["kind"], fields["attempt"]
        if kind == EventKind.ATTEMPT_INITIATED.value:
            initiated[attempt] = datetime.fromisoformat(fields["data"]["deadline"])
        elif kind in OUTCOME_KINDS:
            finished.add(attempt)
    late = sorted(a for a, deadline in initiated.items() if a not in finished and deadline < now)
    if late:
        store.append(
            [
                _ev(
                    EventKind.ATTEMPT_ABANDONED,
                    AttemptAbandoned(reason="no outcome by the deadline"),
                    attempt=a,
                    at=now,
                    actor="reconciler",
                )
                for a in late
            ]
        )
    return late


def rules_in_ledger(store: LedgerStore, version: str) -> TaskClass:
    """The task class the ledger's ``rules.published`` event holds for ``version``, checked
    against its hash before use (issue 10, spec 10.5): rules edited in the database are an
    integrity failure, never used under the old label.

    Raises InputError when the ledger has no such event, IntegrityError when it does not hash
    to ``version``.
    """
    for fields in _scan_kind(store, EventKind.RULES_PUBLISHED):
        if fields["data"]["rules_version"] == version:
            return rules_from_canonical(fields["data"]["canonical_rules"], version)
    raise InputError(f"rules version {version[:12]} is not in the ledger")


def inputs_from_events(events: Iterable[Event]) -> AttemptInputs:
    """Rebuild the calculator's inputs from an attempt's original measurements, without the
    evidence digests its ``evidence.resolved`` event records as unresolved: the inputs its
    award was computed from (settlement recomputes the preliminary signal from them)."""
    events = list(events)
    doc: dict[str, Any] = {section: {} for section, _ in _KEYED}
    doc |= {"costs": {}, "obstacles": [], "claims": []}
    sections = {model: section for section, model in _KEYED}
    for event in events:
        if event.kind != EventKind.MEASUREMENT_RAW.value:
            continue
        raw = payload_of(event)
        if isinstance(raw, RawIndicator | RawChecklist | RawSelfCheck):
            entry = {k: v for k, v in raw.to_data().items() if k not in ("what", "id")}
            doc[sections[type(raw)]][raw.id] = entry
        elif isinstance(raw, RawCost):
            doc["costs"][raw.id] = raw.value
        elif isinstance(raw, RawObstacle):
            doc["obstacles"].append({k: v for k, v in raw.to_data().items() if k != "what"})
        elif isinstance(raw, RawClaim):
            doc["claims"].append(raw.text)
    return strip(AttemptInputs.model_validate(doc), unresolved_in(events))


class ConfirmationLookup(Protocol):
    """What settlement asks of a provenance register (``provenance.ProvenanceRegister``)."""

    def counts_as_independent(self, attempt: str) -> Sequence[Any]: ...

    def echo_collisions(self, attempt: str) -> Sequence[Any]: ...


def parse_late(late: Mapping[str, Any]) -> dict[str, Measurement]:
    """Late values as measurements.  Raises InputError naming the first malformed field."""
    try:
        return {k: Measurement.model_validate(v) for k, v in late.items()}
    except ValidationError as e:
        problem = e.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise InputError(f"late value {where}: {problem['msg']}") from e


def verify_settleable(store: LedgerStore, attempt_id: str) -> list[Event]:
    """The attempt's events, if it holds an escrow not yet settled.  Raises InputError."""
    events = store.attempt_events(attempt_id)
    kinds = [e.kind for e in events]
    if EventKind.ATTEMPT_INITIATED.value not in kinds:
        raise InputError(f"no attempt {attempt_id!r} in the ledger")
    if EventKind.ESCROW_HELD.value not in kinds:
        raise InputError(f"attempt {attempt_id!r} holds no escrow")
    if EventKind.ESCROW_RELEASED.value in kinds or EventKind.ESCROW_ADJUSTED.value in kinds:
        raise InputError(f"attempt {attempt_id!r} is already settled")
    return events


def verify_late_evidence(store: LedgerStore, late: Mapping[str, Measurement], *,
                         pending: frozenset[str] = frozenset()) -> None:
    """Every evidence digest of every late value resolves to a blob in the ledger's evidence
    store (spec 9.15: evidence is a stored record, not a string that looks like a hash).
    ``pending`` are digests of content about to be stored with it (a caller's pre-check before
    writing anything).  Raises IntegrityError naming the first digest that does not."""
    for k, m in sorted(late.items()):
        for digest in m.evidence:
            if digest in pending:
                continue
            problem = _blob_problem(store, digest)
            if problem is not None:
                raise IntegrityError(
                    f"late value for {k!r}: evidence {digest} does not resolve to a blob in the "
                    f"ledger's evidence store ({problem}); not applied"
                )


def _backs(entry: Any, measurement: Measurement) -> bool:
    return bool(entry.source == measurement.source
                and entry.content_sha256 in measurement.evidence)


def _echo_collisions_backing(provenance: ConfirmationLookup, attempt_id: str,
                             late: Mapping[str, Measurement]) -> list[dict[str, Any]]:
    """Check every late value is backed by the register; return those backed only by an echo
    collision, as the escrow event records them.  Raises IntegrityError for one not backed."""
    counted = provenance.counts_as_independent(attempt_id)
    collisions = provenance.echo_collisions(attempt_id)
    out = []
    for k, m in sorted(late.items()):
        if any(_backs(entry, m) for entry in counted):
            continue
        # spec 9.15, 11.21: only a confirmation the provenance register accepted as independent
        # (signed, not an echo, source not in quarantine) may confirm; an authenticated echo
        # collision may still count against the policy (8.14, 9.16; docs/adr/0006).
        entry = next((e for e in collisions if _backs(e, m)), None)
        if entry is None:
            raise IntegrityError(
                f"late value for {k!r} is not backed by an accepted, independent confirmation "
                f"from {m.source!r} in the provenance register; not applied"
            )
        out.append({"indicator": k, "receipt": entry.receipt, "confirmation": entry.id,
                    "source": entry.source, "reasons": [str(r) for r in entry.reasons]})
    return out


def _verify_only_lowers(
    calculator: SignalCalculator,
    inputs: AttemptInputs,
    late: Mapping[str, Measurement],
    collided: Sequence[dict[str, Any]],
    settlement: Settlement,
) -> None:
    """A late value backed only by an echo collision may settle only if the policy ends strictly
    worse off than if the report were discarded (spec 8.14, 9.16; docs/adr/0006): below the
    class's rule at the deadline (what happens when no control event counts) and below the
    settlement with those indicators left at the attempt's own preliminary measurements.
    Both are computed by the same calculator.  Raises IntegrityError otherwise."""
    names = sorted(c["indicator"] for c in collided)
    references = [settle_escrow(calculator, inputs, late=None).final]
    standing = {k: inputs.measurements[k] for k in names if k in inputs.measurements}
    if len(standing) == len(names):
        references.append(settle_escrow(calculator, inputs, late={**late, **standing}).final)
    if all(settlement.final < reference for reference in references):
        return
    receipts = ", ".join(c["receipt"] for c in collided)
    raise IntegrityError(
        f"late value for {', '.join(map(repr, names))} is backed only by a confirmation that "
        f"repeats the policy's own output (receipt {receipts}) and would not lower its signal: "
        f"an echo never confirms (spec 8.14, 9.16); it needs an accepted, independent "
        f"confirmation in the provenance register; not applied"
    )


def settle(
    store: LedgerStore,
    attempt_id: str,
    *,
    late: Mapping[str, Any] | None,
    at: datetime,
    provenance: ConfirmationLookup | None = None,
) -> Settlement:
    """Settle an attempt's escrow under the rules version it started with (spec 9.17, 10.6).

    ``late`` maps each late indicator to a measurement dict (value, source, evidence) from the
    class's control source; None means the deadline passed with no control event.  The rules are
    read from the ledger's own ``rules.published`` event, never from today's catalogue, so a newer
    version of the class cannot change how this attempt is settled (spec 11.20).

    Every evidence digest of a late value must resolve to a blob in the ledger's evidence store.
    With ``provenance``, each late value must be backed (same source, content digest among its
    evidence) by a confirmation the register counts as independent, or by an echo collision -
    then only if the settlement lowers the policy's signal (docs/adr/0006); the collisions used
    are recorded in the escrow event.  Raises InputError for an attempt that cannot be settled
    or malformed late values, IntegrityError for late values that do not hold; nothing is
    written then.
    """
    events = verify_settleable(store, attempt_id)
    initiated = payload_as(
        next(e for e in events if e.kind == EventKind.ATTEMPT_INITIATED.value), AttemptInitiated)
    tc = rules_in_ledger(store, initiated.rules_version)
    pinned = pin(
        tc,
        started_at=datetime.fromisoformat(initiated.started_at),
        version=initiated.rules_version,
    )
    late_m = None
    collided: list[dict[str, Any]] = []  # late values backed only by an echo collision
    if late is not None:
        late_m = parse_late(late)
        for k, m in late_m.items():
            declared = tc.indicator(k).source if k in {i.id for i in tc.indicators} else None
            # spec 9.15, 11.21: a late value that is not from the declared, authenticated source
            # with evidence never moves the escrow; it is refused, not counted as a zero.
            if m.source != declared or not m.evidence:
                raise IntegrityError(
                    f"late value for {k!r} from {m.source!r} is not an authenticated confirmation "
                    f"from {declared!r} with evidence; not applied"
                )
        if provenance is not None:
            collided = _echo_collisions_backing(provenance, attempt_id, late_m)
        verify_late_evidence(store, late_m)
    # Settle before writing anything: a late set the rules refuse leaves the ledger untouched,
    # and the late value and the settlement land in one transaction.
    calculator = SignalCalculator(pinned)
    inputs = inputs_from_events(events)
    settlement = settle_escrow(calculator, inputs, late=late_m)
    if collided:
        assert late_m is not None
        _verify_only_lowers(calculator, inputs, late_m, collided, settlement)
    written = [
        _ev(
            EventKind.MEASUREMENT_RAW,
            RawLateIndicator(id=k, **m.model_dump(mode="json")),
            attempt=attempt_id,
            at=at,
            actor=m.source,
        )
        for k, m in sorted((late_m or {}).items())
    ]
    written.append(
        _settlement_event(
            attempt_id,
            settlement,
            at=at,
            late_source=None if late_m is None else next(iter(late_m.values())).source,
            echo_collision=collided,
        )
    )
    store.append(written)
    return settlement
