"""Evidence resolution: does each digest an attempt cites point at evidence in the trusted record?

Issue 10 (spec 8.8, 9.3, 10.3): a digest is a claim that evidence exists.  Before a measured
value, checklist state, self-check or obstacle counts as verified, every digest it cites must
*resolve*:

1. an ``evidence.stored`` event of **this attempt**, written before the award, names it, so
   evidence stored for another attempt is never replayed;
2. that event is the record of a trusted component: the policy's own artefact (``artefact``,
   or the harness's copy of it, ``candidate``; origin ``evaluated_model_output``) and the record
   of a signed request are never evidence of a measured value (8.8, 8.14);
3. the blob is in the ledger's evidence store and hashes to the digest.

Attribution: the event records who stored the blob (``by`` for a signed append on the trusted
port, else the event's actor).  That is the declared source itself, or the trusted recorder that
runs it (the pilot 02 harness runs the SMTP receiver, HTTP driver and regression probe; the gate
process runs the mechanical layer and the verifier model; ``attempt evaluate --evidence-dir``
stores each file as the source named by its folder).  The record of each resolved digest names
its storer, so the auditor sees the attribution beside the source the value claims.

What does not resolve is removed from the calculator's inputs (the value is then
``no_evidence``: fail closed, never verified) and recorded in ``evidence.resolved`` with the
reason; the raw inputs are recorded exactly as received.  ``ledger/recompute.py`` implements the
same rule independently.

No I/O: the caller passes the attempt's events and a lookup of the evidence store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..signal.inputs import AttemptInputs
from .events import Event, EventKind

#: ``evidence.stored`` records that are the policy's own output or a request record, not
#: evidence of a result (spec 8.8): the policy port's artefact, the pilot harness's copy of the
#: candidate, and the trusted port's record of a signed request.
NOT_EVIDENCE_WHAT = frozenset({"artefact", "candidate", "signed_request"})
POLICY_ORIGIN = "evaluated_model_output"

#: Returns None when the blob with this digest is stored and intact, else what is wrong.
BlobCheck = Callable[[str], "str | None"]


@dataclass(frozen=True, slots=True)
class Citation:
    """One digest cited by one input item: ``what`` is indicator, checklist, self_check or
    obstacle; ``id`` the item (an obstacle's index); ``source`` the source it claims."""

    what: str
    id: str
    source: str
    digest: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """The outcome for one attempt: the inputs the calculator may see, and the record."""

    inputs: AttemptInputs
    resolved: dict[str, str]  # digest -> who stored it
    unresolved: tuple[tuple[Citation, str], ...]  # (citation, reason)

    def record(self) -> dict[str, Any]:
        """The ``evidence.resolved`` payload."""
        return {
            "resolved": [{"digest": d, "stored_by": by} for d, by in sorted(self.resolved.items())],
            "unresolved": [
                {"what": c.what, "id": c.id, "source": c.source, "digest": c.digest,
                 "reason": reason}
                for c, reason in self.unresolved
            ],
        }

    def reasons(self) -> list[str]:
        """One award reason per unresolved citation, naming the digest (never a silent zero)."""
        return [
            f"evidence {c.digest} of {c.what} {c.id} ({c.source}) does not resolve: {reason}"
            for c, reason in self.unresolved
        ]


def citations(inputs: AttemptInputs) -> list[Citation]:
    """Every digest the inputs cite, in a stable order."""
    out = [Citation("indicator", k, m.source, d)
           for k, m in sorted(inputs.measurements.items()) for d in m.evidence]
    out += [Citation("checklist", k, s.source, d)
            for k, s in sorted(inputs.checklist.items()) for d in s.evidence]
    out += [Citation("self_check", k, s.source, d)
            for k, s in sorted(inputs.self_checks.items()) for d in s.evidence]
    out += [Citation("obstacle", str(n), o.recorded_by, d)
            for n, o in enumerate(inputs.obstacles) for d in o.evidence]
    return out


def _storers(events: Iterable[Event]) -> tuple[dict[str, str], set[str]]:
    """Per digest, who first stored it as evidence for the attempt; and the digests only the
    policy's own output (or a request record) names."""
    trusted: dict[str, str] = {}
    policy: set[str] = set()
    for event in events:
        fields = event.fields
        if fields["kind"] != EventKind.EVIDENCE_STORED.value:
            continue
        data = fields["data"]
        digest = data.get("digest")
        if not isinstance(digest, str):
            continue
        if data.get("what") in NOT_EVIDENCE_WHAT or data.get("origin") == POLICY_ORIGIN:
            policy.add(digest)
            continue
        by = data.get("by")
        trusted.setdefault(digest, by if isinstance(by, str) else str(fields["actor"]))
    return trusted, policy


def resolve(events: Iterable[Event], inputs: AttemptInputs, blob: BlobCheck) -> Resolution:
    """Resolve every digest ``inputs`` cite against the attempt's ``events`` (those written
    before the award) and the evidence store (``blob``)."""
    stored, policy_only = _storers(events)
    problems: dict[str, str | None] = {}
    resolved: dict[str, str] = {}
    unresolved: list[tuple[Citation, str]] = []
    for c in citations(inputs):
        if c.digest not in problems:
            problems[c.digest] = _problem(c.digest, stored, policy_only, blob)
        problem = problems[c.digest]
        if problem is None:
            resolved[c.digest] = stored[c.digest]
        else:
            unresolved.append((c, problem))
    bad = {c.digest for c, _ in unresolved}
    return Resolution(strip(inputs, bad), resolved, tuple(unresolved))


def _problem(digest: str, stored: Mapping[str, str], policy_only: set[str],
             blob: BlobCheck) -> str | None:
    if digest not in stored:
        if digest in policy_only:
            return "only the policy's own output or a request record names it (spec 8.8)"
        return "not stored for this attempt (no evidence.stored event names it)"
    trouble = blob(digest)
    if trouble is not None:
        return f"not in the ledger's evidence store ({trouble})"
    return None


def strip(inputs: AttemptInputs, digests: set[str]) -> AttemptInputs:
    """``inputs`` with the given digests removed from every item's evidence."""
    if not digests:
        return inputs

    def keep(evidence: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(d for d in evidence if d not in digests)

    return inputs.model_copy(update={
        "measurements": {k: m.model_copy(update={"evidence": keep(m.evidence)})
                         for k, m in inputs.measurements.items()},
        "checklist": {k: s.model_copy(update={"evidence": keep(s.evidence)})
                      for k, s in inputs.checklist.items()},
        "self_checks": {k: s.model_copy(update={"evidence": keep(s.evidence)})
                        for k, s in inputs.self_checks.items()},
        "obstacles": tuple(o.model_copy(update={"evidence": keep(o.evidence)})
                           for o in inputs.obstacles),
    })


def unresolved_in(events: Iterable[Event]) -> set[str]:
    """The digests an attempt's ``evidence.resolved`` event records as unresolved."""
    out: set[str] = set()
    for event in events:
        if event.kind == EventKind.EVIDENCE_RESOLVED.value:
            out.update(str(u["digest"]) for u in event.data.get("unresolved", []))
    return out
