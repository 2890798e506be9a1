"""What the ports read and append besides the ledger: task classes, control sets, the schedule.

Small holders shared by the ports of one evaluator.  The policy port is given only the
:class:`Catalogue`; control sets and the schedule are handed to trusted ports alone, so no code
path from the policy side reaches them (spec 9.6, 4.1).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from fractions import Fraction
from typing import Any, Protocol

from ..canonical import canonical_json, sha256_hex
from ..errors import InputError, RuleError
from ..rules.task_class import TaskClass
from ..rules.versions import check_no_retrospective_change, rules_version
from .schedule import CheckSchedule


class Catalogue:
    """The task classes in force, by id, and every version this evaluator has served.

    A new version is published by appending (spec 10.5): it applies to attempts that start
    afterwards; attempts already started keep the version they were pinned to.
    """

    def __init__(self, classes: Mapping[str, TaskClass]) -> None:
        self._lock = threading.Lock()
        self._current = dict(classes)
        self._versions = {rules_version(tc): tc for tc in classes.values()}
        #: per class, the versions in the order this evaluator put them in force (the file's
        #: first, then each one published through the trusted port)
        self._served = {tc.id: [rules_version(tc)] for tc in classes.values()}

    def get(self, class_id: object) -> TaskClass:
        """The class in force.  Raises InputError for an unknown id."""
        tc = self._current.get(class_id) if isinstance(class_id, str) else None
        if tc is None:
            raise InputError(f"unknown task class {class_id!r}")
        return tc

    def version(self, version: str) -> TaskClass | None:
        """A class by rules version, if this evaluator has served it."""
        return self._versions.get(version)

    def served(self, class_id: str) -> list[tuple[str, TaskClass]]:
        """The versions of a class this evaluator served, oldest first (empty if unknown)."""
        return [(v, self._versions[v]) for v in self._served.get(class_id, [])]

    def publish(self, tc: TaskClass, *, at: datetime) -> str:
        """Put a new version of a class in force; return its rules version.

        Raises RuleError if it would change published benchmarks or apply a new one
        retrospectively (spec 4.4, 10.5).
        """
        with self._lock:
            before = self._current.get(tc.id)
            if before is not None:
                problems = check_no_retrospective_change(before, tc, published_at=at)
                if problems:
                    raise RuleError(f"{tc.id}: " + "; ".join(problems))
            version = rules_version(tc)
            self._current[tc.id] = tc
            self._versions[version] = tc
            served = self._served.setdefault(tc.id, [])
            if version not in served:
                served.append(version)
            return version


class ControlSetStore(Protocol):
    """Hidden control sets by task class (spec 9.6): versioned, append-only."""

    def read(self, class_id: str) -> dict[str, Any]:
        """``{"class_id", "version", "content"}`` of the latest set.  Raises InputError if none."""
        ...

    def append(self, class_id: str, content: dict[str, Any]) -> str:
        """Add a new version (rotation); return its version (SHA-256 of its canonical JSON)."""
        ...


class MemoryControlSets:
    """A :class:`ControlSetStore` in memory (tests, a single-process service)."""

    def __init__(self, initial: Mapping[str, dict[str, Any]] | None = None) -> None:
        self._lock = threading.Lock()
        self._sets: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for class_id, content in (initial or {}).items():
            self.append(class_id, content)

    def read(self, class_id: str) -> dict[str, Any]:
        versions = self._sets.get(class_id)
        if not versions:
            raise InputError(f"no control set for task class {class_id!r}")
        version, content = versions[-1]
        return {"class_id": class_id, "version": version, "content": content}

    def append(self, class_id: str, content: dict[str, Any]) -> str:
        if not isinstance(content, dict):
            raise InputError("a control set is a JSON object")
        data = canonical_json(content)  # also refuses what JSON cannot carry
        version = sha256_hex(data)
        with self._lock:
            self._sets.setdefault(class_id, []).append((version, content))
        return version


class ScheduleBook:
    """The schedule in force.  The owner rotates it (a fresh secret seed, spec 9.6)."""

    def __init__(self, schedule: CheckSchedule) -> None:
        self._lock = threading.Lock()
        self._current = schedule

    @property
    def current(self) -> CheckSchedule:
        return self._current

    def rotate(self, *, verifiers: Sequence[str] | None = None,
               control_rate: Fraction | None = None) -> CheckSchedule:
        """Replace the schedule with one under a fresh seed, optionally with a new pool or rate.

        Attempts already dispatched keep what they were assigned (the harness reads and acts on
        an assignment when it starts the attempt).  Raises InputError for bad parameters.
        """
        with self._lock:
            old = self._current
            self._current = CheckSchedule.create(
                old.verifiers if verifiers is None else verifiers,
                control_rate=old.control_rate if control_rate is None else control_rate,
                flow_length=old.flow_length,
            )
            return self._current
