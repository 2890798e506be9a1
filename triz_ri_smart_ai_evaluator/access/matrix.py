"""The access matrix: who may read, append, change or delete what (output 12.8; spec 2.11, 9.2).

Reading the file is the only I/O here; the model and its checks are pure.  The file lists every
role x resource cell explicitly (no implicit default), and a matrix that breaks a rule of the
specification cannot be loaded at all: nobody may change or delete a record (spec 10.4: the log
is append-only), the evaluated policy gets nothing beyond the defaults of spec 9.2, the auditor
writes nothing and the training consumer reads only final signals.

The matrix version is the SHA-256 of the RFC 8785 canonical JSON of the file's content, the same
content addressing as rules versions (``rules.versions``): a changed cell is a new version, a
changed comment is not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from ..canonical import canonical_json, sha256_hex
from ..errors import InputError
from ..rules.loader import Located, MalformedYaml, duplicate_keys, line_of, yaml_tree

FORMAT = "triz-access-matrix/1"

#: The bundled matrix, shipped inside the package next to the task classes (not at the top of
#: ``catalogue/``: the task-class loader reads every ``catalogue/*.yaml``).
BUNDLED_MATRIX = Path(__file__).resolve().parent.parent / "catalogue" / "access" / "matrix.yaml"


class Role(StrEnum):
    """Who acts (spec 2.11, 9.3; issue 6)."""

    EVALUATED_POLICY = "evaluated_policy"
    VERIFIER = "verifier"
    HARNESS = "harness"
    CONFIRMATION_SOURCE = "confirmation_source"
    AUDITOR = "auditor"
    OWNER = "owner"
    TRAINING_CONSUMER = "training_consumer"


#: Roles that authenticate with an Ed25519 key registered in the provenance register and sign
#: what they record (issue 6; spec 9.3 bullet 1, 9.15).
TRUSTED_ROLES = frozenset(Role) - {Role.EVALUATED_POLICY}


class Resource(StrEnum):
    """What is acted on (spec 10.1, 10.3, 9.6, 1.22; issue 6)."""

    TASK_SPEC_PUBLIC = "task_spec_public"
    SUBMISSIONS = "submissions"  # artefacts, claims, diagnostic notes
    CONTROL_SETS = "control_sets"
    ATTEMPTS = "attempts"
    RAW_MEASUREMENTS = "raw_measurements"
    EVIDENCE = "evidence"
    VERIFIER_DECISIONS = "verifier_decisions"
    INDICATORS = "indicators"
    AWARDS_AND_SIGNALS = "awards_and_signals"
    LEDGER = "ledger"
    CHECKPOINTS = "checkpoints"
    RULES_AND_BENCHMARKS = "rules_and_benchmarks"
    CHECK_SCHEDULE = "check_schedule"
    QUARANTINE = "quarantine"
    #: The loop's operating mode of each task class: pause, rollback, shutdown (spec 9.19).
    LOOP_MODE = "loop_mode"


class Action(StrEnum):
    READ = "read"
    APPEND = "append"
    CHANGE = "change"
    DELETE = "delete"


class Scope(StrEnum):
    """Which records of a resource a grant covers (see the matrix file's header)."""

    ALL = "all"
    OWN = "own"
    FINAL = "final"
    #: Final values of the principal's own runs only (the training consumer, issue 16).
    OWN_FINAL = "own_final"


#: Everything the evaluated policy may ever be granted (spec 9.2 defaults): the public spec,
#: its own submissions and the sanitised status of its own attempts.
POLICY_CEILING: Mapping[Resource, frozenset[Action]] = MappingProxyType(
    {
        Resource.TASK_SPEC_PUBLIC: frozenset({Action.READ}),
        Resource.SUBMISSIONS: frozenset({Action.APPEND}),
        Resource.ATTEMPTS: frozenset({Action.READ}),
    }
)

#: What the training consumer may never see (spec 9.6: control data do not enter training).
_HIDDEN = frozenset(
    {
        Resource.CONTROL_SETS,
        Resource.CHECK_SCHEDULE,
        Resource.RAW_MEASUREMENTS,
        Resource.EVIDENCE,
        Resource.VERIFIER_DECISIONS,
        Resource.LEDGER,
        Resource.SUBMISSIONS,
    }
)


@dataclass(frozen=True, slots=True)
class Cell:
    """One role x resource grant: the allowed actions and the scope they cover."""

    allow: frozenset[Action]
    scope: Scope = Scope.ALL

    def to_data(self) -> dict[str, Any]:
        return {"allow": [a.value for a in Action if a in self.allow], "scope": self.scope.value}


#: One problem in a matrix file: ``file:line: cell: message`` (the catalogue's located problem).
Problem = Located


class AccessMatrixError(InputError):
    """The matrix file is invalid; ``problems`` lists every problem with its file and cell."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        super().__init__(f"access matrix invalid: {self.problems[0]}{more}")


class AccessMatrix:
    """A validated matrix.  Construct it with :func:`parse_matrix` or :func:`load_matrix`."""

    __slots__ = ("_cells", "source", "version")

    def __init__(self, cells: Mapping[tuple[Role, Resource], Cell], *, source: str) -> None:
        missing = [(r, s) for r in Role for s in Resource if (r, s) not in cells]
        if missing:
            raise InputError(f"{source}: matrix lacks cells {missing[:3]}")
        self._cells = MappingProxyType(dict(cells))
        self.source = source
        self.version = sha256_hex(canonical_json(self.to_data()))

    def cell(self, role: Role, resource: Resource) -> Cell:
        return self._cells[(role, resource)]

    def is_allowed(self, role: Role, resource: Resource, action: Action) -> bool:
        """True if the cell grants ``action``.  Only :class:`~.enforce.AccessGuard` asks this."""
        return action in self._cells[(role, resource)].allow

    def cells(self) -> Iterator[tuple[Role, Resource, Action, bool]]:
        """Every role x resource x action with whether it is allowed (the generated tests)."""
        for role in Role:
            for resource in Resource:
                for action in Action:
                    yield role, resource, action, self.is_allowed(role, resource, action)

    def grants(self, role: Role) -> list[str]:
        """A role's rights in words (``"read attempts (own)"``), for the public task spec."""
        out: list[str] = []
        for resource in Resource:
            cell = self.cell(role, resource)
            suffix = "" if cell.scope is Scope.ALL else f" ({cell.scope.value})"
            out.extend(f"{a.value} {resource.value}{suffix}" for a in Action if a in cell.allow)
        return out

    def to_data(self) -> dict[str, Any]:
        """The content the version is the hash of."""
        return {
            "format": FORMAT,
            "matrix": {
                role.value: {res.value: self.cell(role, res).to_data() for res in Resource}
                for role in Role
            },
        }


# -- reading -------------------------------------------------------------------------------


class _Collector:
    def __init__(self, file: str, root: yaml.Node | None) -> None:
        self.file, self.root, self.problems = file, root, list[Problem]()

    def add(self, path: Sequence[str | int], message: str) -> None:
        cell = ".".join(str(p) for p in path) or "(root)"
        self.problems.append(Problem(self.file, line_of(self.root, path), cell, message))


def _known(kind: type[StrEnum], value: object) -> Any:
    return kind(value) if isinstance(value, str) and value in {m.value for m in kind} else None


def _cell(out: _Collector, role: str, res: str, raw: object) -> Cell | None:
    path: tuple[str | int, ...] = ("matrix", role, res)
    if not isinstance(raw, dict):
        out.add(path, "a cell is a mapping {allow: [...], scope: ...}")
        return None
    for key in sorted(set(raw) - {"allow", "scope"}, key=str):
        out.add((*path, str(key)), "unknown field (a cell has only allow and scope)")
    if "allow" not in raw:
        out.add(path, "allow is missing: every cell states its actions, [] for none")
        return None
    allow = raw["allow"]
    if not isinstance(allow, list):
        out.add((*path, "allow"), "allow must be a list of actions")
        return None
    actions: set[Action] = set()
    ok = True
    for n, item in enumerate(allow):
        action = _known(Action, item)
        if action is None:
            known = ", ".join(a.value for a in Action)
            out.add((*path, "allow", n), f"unknown action {item!r}; known: {known}")
            ok = False
        elif action in actions:
            out.add((*path, "allow", n), f"action {item!r} is listed twice")
            ok = False
        else:
            actions.add(action)
    scope = _known(Scope, raw.get("scope", "all"))
    if scope is None:
        known = ", ".join(s.value for s in Scope)
        out.add((*path, "scope"), f"unknown scope {raw.get('scope')!r}; known: {known}")
        ok = False
    return Cell(frozenset(actions), scope) if ok else None


def _rules(out: _Collector, cells: Mapping[tuple[Role, Resource], Cell]) -> None:
    """The rules of the specification no matrix may break."""
    for (role, res), cell in cells.items():
        path = ("matrix", role.value, res.value, "allow")
        for action in sorted(cell.allow & {Action.CHANGE, Action.DELETE}):
            out.add(path, f"spec 10.4: {action.value} is never granted; the log is append-only "
                          "and a correction is a new event (append)")
        if role is Role.EVALUATED_POLICY:
            beyond = cell.allow - POLICY_CEILING.get(res, frozenset())
            if beyond:
                names = ", ".join(sorted(a.value for a in beyond))
                out.add(path, f"spec 9.2, 8.12: the evaluated policy may not be granted {names} "
                              f"on {res.value}")
            if cell.allow and res is not Resource.TASK_SPEC_PUBLIC and cell.scope is not Scope.OWN:
                out.add(path, f"spec 9.3: the evaluated policy's {res.value} must be scope own")
        if res is Resource.LOOP_MODE and role is not Role.OWNER and cell.allow - {Action.READ}:
            out.add(path, "spec 9.19: only the owner pauses, rolls back or shuts down the loop")
        if role is Role.AUDITOR and cell.allow - {Action.READ}:
            out.add(path, "spec 3.2, 9.12: the auditor reads and never writes")
        if role is Role.TRAINING_CONSUMER and cell.allow and (
            res in _HIDDEN or cell.allow - {Action.READ}
        ):
            out.add(path, f"spec 9.6: the training consumer may not be granted {res.value} "
                          f"({', '.join(sorted(a.value for a in cell.allow))})")
        if role is Role.TRAINING_CONSUMER and cell.allow and cell.scope not in (
            Scope.FINAL, Scope.OWN_FINAL
        ):
            out.add(path, "spec 9.17: the training consumer reads final values only "
                          "(scope final or own_final)")
        if cell.scope is Scope.OWN_FINAL and role is not Role.TRAINING_CONSUMER:
            out.add(path, "scope own_final belongs to the training consumer")


def parse_matrix(text: str, *, file: str) -> AccessMatrix:
    """Parse and validate a matrix file's text.

    Raises AccessMatrixError listing every problem with the file, line and cell it concerns.
    """
    try:
        root, data = yaml_tree(text, file=file)
    except MalformedYaml as e:
        raise AccessMatrixError([e.located]) from e
    out = _Collector(file, root)
    if root is not None:
        for line, cell in duplicate_keys(root, ()):
            out.problems.append(Problem(file, line, cell, "duplicate cell (each appears once)"))
    if not isinstance(data, dict):
        raise AccessMatrixError([*out.problems, Problem(file, 1, "(root)", "not a mapping")])
    for key in sorted(set(data) - {"format", "matrix"}, key=str):
        out.add((str(key),), "unknown field (a matrix file has format and matrix)")
    if data.get("format") != FORMAT:
        out.add(("format",), f"format must be {FORMAT!r}, not {data.get('format')!r}")
    grid = data.get("matrix")
    cells: dict[tuple[Role, Resource], Cell] = {}
    if not isinstance(grid, dict):
        out.add(("matrix",), "matrix must map each role to its resources")
        grid = {}
    for role_name, row in grid.items():
        role = _known(Role, role_name)
        if role is None:
            out.add(("matrix", str(role_name)),
                    f"unknown role {role_name!r}; known: {', '.join(r.value for r in Role)}")
            continue
        if not isinstance(row, dict):
            out.add(("matrix", role.value), "a role maps each resource to its cell")
            continue
        for res_name, raw in row.items():
            res = _known(Resource, res_name)
            if res is None:
                known = ", ".join(r.value for r in Resource)
                out.add(("matrix", role.value, str(res_name)),
                        f"unknown resource {res_name!r}; known: {known}")
                continue
            parsed = _cell(out, role.value, res.value, raw)
            if parsed is not None:
                cells[(role, res)] = parsed
        for res in Resource:
            if res.value not in row:
                out.add(("matrix", role.value, res.value),
                        "cell missing: every role x resource cell is explicit (allow: [] for none)")
    for role in Role:
        if role.value not in grid:
            out.add(("matrix", role.value), "role missing: every role has a row")
    _rules(out, cells)
    if out.problems:
        raise AccessMatrixError(out.problems)
    return AccessMatrix(cells, source=file)


def load_matrix(path: Path = BUNDLED_MATRIX) -> AccessMatrix:
    """Read and validate a matrix file.  Raises AccessMatrixError if unreadable or invalid."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise AccessMatrixError([Problem(str(path), 1, "(file)", f"cannot read: {e}")]) from e
    return parse_matrix(text, file=str(path))
