"""Rules versions: content addresses, pinning and the check against retrospective changes.

A rules version is the SHA-256 of the task class's RFC 8785 canonical JSON.  Pinning picks the
benchmarks in force when an attempt *started* (spec 10.5, 11.7, 11.8); nothing about an attempt's
result enters it.

Nothing here does I/O (the signal calculator imports this module); the folder of published
versions is ``rules.published``.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from pydantic import ValidationError

from ..canonical import canonical_json, sha256_hex
from ..errors import InputError, IntegrityError, RuleError
from .indicators import BenchmarkVersion
from .task_class import TaskClass

#: Canonical bytes of the task classes seen last (a frozen model's bytes never change); a
#: service pins the same class for every submission, and canonicalising it costs ~1 ms.
_CANONICAL: OrderedDict[int, tuple[TaskClass, bytes]] = OrderedDict()
_CANONICAL_KEPT = 64
_CANONICAL_LOCK = threading.Lock()


def canonical_rules(tc: TaskClass) -> bytes:
    """The canonical bytes of a task class: what its rules version is the hash of."""
    hit = _CANONICAL.get(id(tc))
    if hit is not None and hit[0] is tc:
        return hit[1]
    data = canonical_json(tc.model_dump(mode="json"))
    with _CANONICAL_LOCK:
        _CANONICAL[id(tc)] = (tc, data)  # the entry holds tc, so its id cannot be reused
        while len(_CANONICAL) > _CANONICAL_KEPT:
            _CANONICAL.popitem(last=False)
    return data


def rules_version(tc: TaskClass) -> str:
    """The rules version of a task class: SHA-256 (hex) of its canonical JSON."""
    return sha256_hex(canonical_rules(tc))


@dataclass(frozen=True, slots=True)
class PinnedRules:
    """A task class at one rules version with the benchmark version in force per indicator."""

    task_class: TaskClass
    version: str
    benchmarks: Mapping[str, BenchmarkVersion]


def pin(tc: TaskClass, *, started_at: datetime, version: str | None = None) -> PinnedRules:
    """Pin the rules for an attempt that started at ``started_at`` (UTC, timezone-aware).

    Each indicator gets the latest benchmark version whose effective date is not after the
    start.  Raises RuleError when a benchmark has no version in force yet: an attempt with no
    benchmark established in advance cannot be evaluated (spec 1.4, 2.6).
    """
    if started_at.tzinfo is None:
        raise InputError("an attempt's start time must be timezone-aware (UTC)")
    chosen: dict[str, BenchmarkVersion] = {}
    for bm in tc.benchmarks:
        in_force = [v for v in bm.versions if v.effective_from <= started_at]
        if not in_force:
            raise RuleError(
                f"spec 2.6: no benchmark for {tc.id}.{bm.indicator} was in force at "
                f"{started_at.isoformat()}; the first takes effect "
                f"{bm.versions[0].effective_from.isoformat()}"
            )
        chosen[bm.indicator] = in_force[-1]
    if tc.effective_from > started_at:
        # spec 10.5: rules apply only to attempts that start after they take effect.
        raise RuleError(
            f"spec 10.5: the rules of {tc.id} take effect {tc.effective_from.isoformat()}, "
            f"after the attempt started at {started_at.isoformat()}"
        )
    return PinnedRules(tc, version or rules_version(tc), MappingProxyType(chosen))


def check_no_retrospective_change(
    previous: TaskClass, new: TaskClass, *, published_at: datetime
) -> list[str]:
    """Problems with publishing ``new`` after ``previous`` at ``published_at`` (spec 4.4, 10.5).

    Benchmark versions already published may not change or disappear; a new benchmark version
    must take effect after the moment it is published, so it never reaches an attempt that had
    already started.
    """
    problems: list[str] = []
    if new == previous:
        return problems
    if new.effective_from <= previous.effective_from or new.effective_from <= published_at:
        # spec 10.5: formulas, thresholds, caps and escrow shares change only for attempts that
        # start after the new version takes effect; a version that took effect at once, or with
        # the date of the one before, would change the rules of attempts already running.
        problems.append(
            f"spec 10.5: the new version takes effect {new.effective_from.isoformat()}; it must "
            f"take effect after its publication ({published_at.isoformat()}) and after the "
            f"version before ({previous.effective_from.isoformat()})"
        )
    old = {b.indicator: b for b in previous.benchmarks}
    kept = {b.indicator for b in new.benchmarks}
    for gone in sorted(set(old) - kept):
        problems.append(
            f"spec 4.4: the published benchmark of {gone} may not disappear; a changed function "
            "is a new task class"
        )
    for bm in new.benchmarks:
        before = old.get(bm.indicator)
        known = before.versions if before is not None else ()
        for v in known:
            match = [n for n in bm.versions if n.version == v.version]
            if not match or match[0] != v:
                problems.append(
                    f"spec 4.4: benchmark {bm.indicator} version {v.version} was published and "
                    "may not be changed or removed; add a new version instead"
                )
        for v in bm.versions[len(known) :]:
            if v.effective_from <= published_at:
                problems.append(
                    f"spec 10.5: new benchmark {bm.indicator} version {v.version} takes effect "
                    f"{v.effective_from.isoformat()}, not after its publication "
                    f"{published_at.isoformat()}: it would apply retrospectively"
                )
    return problems


def rules_from_canonical(text: str | bytes, version: str) -> TaskClass:
    """The task class recorded as canonical JSON under ``version`` (in a ledger event, a
    service request), checked against its hash before it is used.

    Raises IntegrityError when the bytes do not hash to ``version`` or are not canonical.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    if sha256_hex(data) != version:
        raise IntegrityError(f"content does not match its rules version {version[:12]}")
    try:
        tc = TaskClass.model_validate(json.loads(data))
    except (ValueError, ValidationError) as e:
        raise IntegrityError(f"rules {version[:12]} no longer validate: {e}") from e
    if canonical_rules(tc) != data:
        raise IntegrityError(f"rules {version[:12]} are not in canonical form")
    return tc
