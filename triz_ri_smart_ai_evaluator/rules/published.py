"""The store of published rules versions: a folder of content-addressed task classes.

A published version never changes: the store keeps each under its own hash and checks the hash
when it reads the file, so an edited file is a new version and the old one stays loadable (spec
10.5).  This module reads and writes files; the pure versioning and pinning it builds on are in
``rules.versions``.

What a file held is kept, keyed by the file's identity (device, inode, modification and change
times, size), and read again - hash checked again - as soon as any of them differs: a service
pins the rules of every submission, and parsing and hashing them each time cost more than the
rest of the submission (issue 16 item 4).  An edit in place changes the times and usually the
size; a replaced file (``write_atomic``) is a new inode.  The change time is in the key because
``touch -d`` can set a modification time back but never the change time, and a file modified
less than ``_SETTLED_NS`` before it was read is not kept at all: a second write within the
filesystem's timestamp granularity could leave every field as it was (git's "racily clean"
rule).
"""

from __future__ import annotations

import json
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from .._io import write_atomic
from ..errors import InputError, IntegrityError, RuleError
from .task_class import TaskClass
from .versions import (
    PinnedRules,
    canonical_rules,
    check_no_retrospective_change,
    pin,
    rules_from_canonical,
    rules_version,
)

#: Published versions of the bundled task classes, shipped with the package.
BUNDLED_STORE = Path(__file__).resolve().parent.parent / "catalogue" / "published"

T = TypeVar("T")
#: Files modified more recently than this (ns) are read each time (see the module docstring).
_SETTLED_NS = 2_000_000_000
_KEPT_FILES = 1024
_kept: dict[Path, tuple[tuple[int, ...], Any]] = {}
_kept_lock = threading.Lock()


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _has_settled(st: os.stat_result) -> bool:
    """Whether the file was last modified long enough ago to be kept (module docstring)."""
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS


def _read_kept(path: Path, parse: Callable[[bytes], T]) -> T:
    """``parse`` of the file's bytes, kept while the file's identity is unchanged.  Raises
    OSError (FileNotFoundError when there is no file) and whatever ``parse`` raises; a failure
    is never kept."""
    key = _identity(os.stat(path))
    with _kept_lock:
        kept = _kept.get(path)
    if kept is not None and kept[0] == key:
        found: T = kept[1]
        return found
    value = parse(path.read_bytes())
    after = os.stat(path)
    # Kept only if the file did not change while it was read and has settled.
    if _identity(after) == key and _has_settled(after):
        with _kept_lock:
            if len(_kept) >= _KEPT_FILES:
                _kept.clear()
            _kept[path] = (key, value)
    return value


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

        def parse(data: bytes) -> tuple[tuple[str, str], ...]:
            out = []
            for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
                try:
                    record = json.loads(line)
                    if not isinstance(record, dict) or set(record) != {"version",
                                                                       "published_at"}:
                        raise ValueError("unexpected fields")
                except ValueError as e:
                    raise IntegrityError(f"{path}:{n}: corrupt publication record ({e})") from e
                out.append((record["version"], record["published_at"]))
            return tuple(out)

        try:
            records = _read_kept(path, parse)
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as e:
            raise IntegrityError(f"{path}: corrupt publication records ({e})") from e
        return [{"version": v, "published_at": at} for v, at in records]

    def load(self, class_id: str, version: str) -> TaskClass:
        """Load a published version, checking its hash.

        Raises RuleError if it is not in the store, IntegrityError if its bytes changed.
        """
        path = self._file(class_id, version)

        def parse(data: bytes) -> TaskClass:
            try:
                return rules_from_canonical(data, version)
            except IntegrityError as e:
                raise IntegrityError(f"{path}: {e.message}") from e

        try:
            return _read_kept(path, parse)
        except FileNotFoundError as e:
            raise RuleError(f"rules version {class_id}@{version[:12]} is not published") from e

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


@dataclass(frozen=True, slots=True)
class _Pins:
    """What :func:`pin_in_force` answered for one task class object and store: the identities
    of the files the answers were read from (publication record first), the instants at which
    an answer can change, and the answer per interval between them."""

    tc: TaskClass  # held, so its id cannot be reused while the entry lives
    files: tuple[tuple[Path, tuple[int, ...]], ...]
    instants: tuple[datetime, ...]
    answers: dict[int, PinnedRules]


_pins: dict[tuple[int, Path], _Pins] = {}


def _unchanged(files: tuple[tuple[Path, tuple[int, ...]], ...]) -> bool:
    try:
        return all(_identity(os.stat(path)) == kept for path, kept in files)
    except FileNotFoundError:
        return False


def _settled(store: RulesStore, tc: TaskClass) -> tuple[tuple[Path, tuple[int, ...]], ...] | None:
    """The identities of the class's publication record and version files, or None when one
    of them was modified too recently to be kept (see the module docstring) or is missing."""
    paths = [store.root / tc.id / "history.jsonl",
             *(store._file(tc.id, str(r["version"])) for r in store.history(tc.id))]
    files = []
    for path in paths:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        if not _has_settled(st):
            return None
        files.append((path, _identity(st)))
    return tuple(files)


def _instants(store: RulesStore, tc: TaskClass) -> tuple[datetime, ...]:
    """Every moment at which the answer of :func:`pin_in_force` for ``tc`` can change: when a
    published version or one of its benchmark versions takes effect.  Between two of them every
    ``effective_from <= started_at`` comparison the answer rests on comes out the same."""
    moments = set()
    for record in store.history(tc.id):
        published = store.load(tc.id, str(record["version"]))
        moments.add(published.effective_from)
        moments.update(v.effective_from for bm in published.benchmarks for v in bm.versions)
    return tuple(sorted(moments))


def pin_in_force(tc: TaskClass, *, started_at: datetime,
                 store: Path = BUNDLED_STORE) -> PinnedRules:
    """The rules an attempt of ``tc``'s class that starts at ``started_at`` runs under: the
    published version in force then (:func:`pin_published`), so a version published ahead of
    its ``effective_from`` leaves the previous one in force until that moment (spec 4.4,
    10.5).  A class with no publication in ``store`` (a task class an installed package adds,
    with its own file) is pinned from its file.

    A service asks this for every submission (issue 16 item 4), so an answer is kept per
    interval between the instants where it can change, and only while none of the files it
    was read from changed (their identities are checked on every call; a changed file is read
    and hash checked again, as in :func:`_read_kept`).  A refusal is never kept."""
    if started_at.tzinfo is None:
        raise InputError("an attempt's start time must be timezone-aware (UTC)")
    key = (id(tc), store)
    with _kept_lock:
        entry = _pins.get(key)
    if entry is not None and entry.tc is tc and _unchanged(entry.files):
        found = entry.answers.get(bisect_right(entry.instants, started_at))
        if found is not None:
            return found
    records = RulesStore(store)
    if not records.history(tc.id):
        return pin(tc, started_at=started_at)
    files = _settled(records, tc)
    answer = pin_published(records, tc, started_at=started_at)
    if files is not None and _settled(records, tc) == files:
        if entry is None or entry.tc is not tc or entry.files != files:
            entry = _Pins(tc, files, _instants(records, tc), {})
        entry.answers[bisect_right(entry.instants, started_at)] = answer
        with _kept_lock:
            if len(_pins) >= _KEPT_FILES:
                _pins.clear()
            _pins[key] = entry
    return answer
