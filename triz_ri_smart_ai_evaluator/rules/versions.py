"""Rules versions: content addresses, a store of published versions, and pinning.

A rules version is the SHA-256 of the task class's RFC 8785 canonical JSON.  A published version
never changes: the store keeps each under its own hash and checks the hash on every read, so an
edited file is a new version and the old one stays loadable (spec 10.5).  Pinning picks the
benchmarks in force when an attempt *started* (spec 10.5, 11.7, 11.8); nothing about an attempt's
result enters it.

Pure functions here do no I/O; ``RulesStore`` reads and writes its folder.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from .._io import write_atomic
from ..canonical import canonical_json, sha256_hex
from ..errors import InputError, IntegrityError, RuleError
from .indicators import BenchmarkVersion
from .task_class import TaskClass

#: Published versions of the bundled task classes, shipped with the package.
BUNDLED_STORE = Path(__file__).resolve().parent.parent / "catalogue" / "published"


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


class RulesStore:
    """A folder of published rules versions: ``<id>/<version>.json`` plus ``<id>/history.jsonl``.

    Content-addressed and append-only: publishing never overwrites, and every read checks that
    the bytes still hash to their name.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def _file(self, class_id: str, version: str) -> Path:
        if not (len(version) == 64 and all(c in "0123456789abcdef" for c in version)):
            raise InputError(f"{version!r} is not a rules version (64 hex digits)")
        return self.root / class_id / f"{version}.json"

    def history(self, class_id: str) -> list[dict[str, Any]]:
        """Publication records of a class, oldest first: ``{"version", "published_at"}``."""
        path = self.root / class_id / "history.jsonl"
        if not path.exists():
            return []
        out: list[dict[str, Any]] = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                record = json.loads(line)
                if not isinstance(record, dict) or set(record) != {"version", "published_at"}:
                    raise ValueError("unexpected fields")
            except ValueError as e:
                raise IntegrityError(f"{path}:{n}: corrupt publication record ({e})") from e
            out.append(record)
        return out

    def load(self, class_id: str, version: str) -> TaskClass:
        """Load a published version, checking its hash.

        Raises RuleError if it is not in the store, IntegrityError if its bytes changed.
        """
        path = self._file(class_id, version)
        try:
            data = path.read_bytes()
        except FileNotFoundError as e:
            raise RuleError(f"rules version {class_id}@{version[:12]} is not published") from e
        try:
            return rules_from_canonical(data, version)
        except IntegrityError as e:
            raise IntegrityError(f"{path}: {e.message}") from e

    def in_force(self, class_id: str, started_at: datetime) -> tuple[str, TaskClass]:
        """The published version in force for an attempt that started at ``started_at``: the
        latest whose ``effective_from`` is not after it (spec 10.5, 11.7).  Every version read
        is checked against its hash.  Raises RuleError when none is in force yet."""
        published = [(str(r["version"]), self.load(class_id, str(r["version"])))
                     for r in self.history(class_id)]
        in_force = [p for p in published if p[1].effective_from <= started_at]
        if not in_force:
            first = min((tc.effective_from for _, tc in published), default=None)
            raise RuleError(
                f"spec 2.6, 10.5: no published rules of {class_id} were in force at "
                f"{started_at.isoformat()}"
                + (f"; the first take effect {first.isoformat()}" if first else "")
            )
        # Versions take effect in publication order (check_no_retrospective_change).
        return max(in_force, key=lambda p: p[1].effective_from)

    def latest(self, class_id: str) -> tuple[str, TaskClass] | None:
        """The most recently published version of a class, or None."""
        records = self.history(class_id)
        if not records:
            return None
        version = str(records[-1]["version"])
        return version, self.load(class_id, version)

    def publish(self, tc: TaskClass, *, published_at: datetime) -> tuple[str, bool]:
        """Publish ``tc``; return (version, newly_published).

        Re-publishing an existing version changes nothing.  Raises RuleError if the new version
        would change published benchmarks or apply a new one retrospectively.
        """
        version = rules_version(tc)
        path = self._file(tc.id, version)
        if path.exists():
            self.load(tc.id, version)  # verifies the stored bytes
            return version, False
        previous = self.latest(tc.id)
        if previous is not None:
            problems = check_no_retrospective_change(
                previous[1], tc, published_at=published_at
            )
            if problems:
                raise RuleError(f"{tc.id}: " + "; ".join(problems))
        write_atomic(path, canonical_rules(tc))
        record = {"version": version, "published_at": published_at.isoformat()}
        history = self.root / tc.id / "history.jsonl"
        with history.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return version, True


def pin_published(
    store: RulesStore, tc: TaskClass, *, started_at: datetime
) -> PinnedRules:
    """Pin the published rules in force at ``started_at`` for the class that ``tc`` (read from
    a catalogue file) declares, after checking the file against what was published.

    A file that changes a published version in place (a benchmark, formula, threshold, cap or
    escrow share under a version label that was already published) raises IntegrityError: it
    would be used under the old label (issue 10, spec 4.4, 10.5).  A valid successor that is not
    yet published raises RuleError: publish it first.  Unknown classes raise RuleError.
    """
    records = store.history(tc.id)
    if not records:
        raise RuleError(
            f"{tc.id}: no rules version is published in {store.root}; publish it first "
            "(triz-eval catalogue publish --store DIR)"
        )
    version = rules_version(tc)
    if version not in {str(r["version"]) for r in records}:
        latest = store.latest(tc.id)
        assert latest is not None
        last_published = datetime.fromisoformat(str(records[-1]["published_at"]))
        changed = check_no_retrospective_change(latest[1], tc, published_at=last_published)
        if changed:
            raise IntegrityError(
                f"{tc.id}: the catalogue file differs from the published rules "
                f"{latest[0][:12]} in place: " + "; ".join(changed)
            )
        raise RuleError(
            f"{tc.id}: rules version {version[:12]} of the catalogue file is not published; "
            "publish it first (triz-eval catalogue publish)"
        )
    chosen_version, chosen = store.in_force(tc.id, started_at)
    return pin(chosen, started_at=started_at, version=chosen_version)


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
