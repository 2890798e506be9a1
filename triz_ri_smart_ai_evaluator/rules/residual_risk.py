"""The residual-risk log (spec 11.24, output 12.16; issue 15 item 6), kept as catalogue data.

The system reports its known limitations, uncovered classes of attacks, compromised sets,
dependence on human verification and the conditions under which results cannot be considered
finally verified, plus the design-boundary record of spec 11.24.  Each entry names the boundary
that keeps the limit from becoming a wrong training signal, an owner, the test that would fail
if the limit crossed its boundary, and the task classes it applies to.

The file is ``catalogue/risks/residual_risk.yaml``: a folder of its own, because the task-class
loader reads every ``catalogue/*.yaml``.  :func:`load` validates it; a malformed file raises
:class:`~triz_ri_smart_ai_evaluator.errors.RuleError` with one line naming the entry and field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from .._safe_read import parse_yaml
from ..errors import RuleError
from .loader import BUNDLED_CATALOGUE

#: The bundled log.
BUNDLED_RISKS = BUNDLED_CATALOGUE / "risks" / "residual_risk.yaml"
FORMAT = "triz-residual-risk/1"
#: What spec 11.24 asks the log to report, plus its design-boundary record.
Kind = Literal["known limitation", "uncovered attack class", "compromised set",
               "human verification dependency", "not finally verified", "design boundary"]
KINDS: tuple[str, ...] = get_args(Kind)

_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
_Id = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{2,63}$")]
#: A pytest node id of a test function in this repository: ``tests/...py::test_name``.
_NodeId = Annotated[str, StringConstraints(pattern=r"^tests/[A-Za-z0-9_/]+\.py::test_\w+$")]
_ClassId = Annotated[str, StringConstraints(pattern=r"^(all|[a-z][a-z0-9_]{1,63})$")]


class Risk(BaseModel):
    """One entry of the log."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: _Id
    title: _Text
    kind: Kind
    boundary: _Text
    owner: _Text
    detected_by: _NodeId
    applies_to: tuple[_ClassId, ...]
    source: _Text

    def applies(self, task_class: str) -> bool:
        """Whether the entry applies to ``task_class``."""
        return "all" in self.applies_to or task_class in self.applies_to

    def text_line(self) -> str:
        """One readable line: kind, id, title, boundary, owner, test and classes."""
        return (f"[{self.kind}] {self.id}: {self.title} Boundary: {self.boundary} "
                f"Owner: {self.owner}. Detected by: {self.detected_by}. "
                f"Applies to: {', '.join(self.applies_to)}.")


def _entry_error(where: str, index: int, entry: object, error: ValidationError) -> RuleError:
    first = error.errors()[0]
    name = entry.get("id") if isinstance(entry, dict) else None
    field = ".".join(str(p) for p in first["loc"]) or "(entry)"
    label = f"risks[{index}]" + (f" ({name})" if isinstance(name, str) else "")
    return RuleError(f"{where}: {label}.{field}: {first['msg']}")


def parse(text: str, *, where: str) -> tuple[Risk, ...]:
    """The entries of a residual-risk log's text.  Raises RuleError (one line naming the entry
    and field) for a malformed file, an unknown format, no entries, a class list that mixes
    ``all`` with class ids, or a repeated id; InputError for malformed YAML."""
    doc = parse_yaml(text, where=where)
    if not isinstance(doc, dict) or set(doc) != {"format", "risks"}:
        raise RuleError(f"{where}: a residual-risk log is a mapping of exactly format and risks")
    if doc["format"] != FORMAT:
        raise RuleError(f"{where}: format: {doc['format']!r} is not {FORMAT!r}")
    entries = doc["risks"]
    if not isinstance(entries, list) or not entries:
        raise RuleError(f"{where}: risks: a non-empty list of entries is required")
    risks: list[Risk] = []
    for index, entry in enumerate(entries):
        try:
            risk = Risk.model_validate(entry)
        except ValidationError as e:
            raise _entry_error(where, index, entry, e) from e
        label = f"{where}: risks[{index}] ({risk.id})"
        if not risk.applies_to:
            raise RuleError(f"{label}.applies_to: name the classes or 'all'")
        if "all" in risk.applies_to and len(risk.applies_to) > 1:
            raise RuleError(f"{label}.applies_to: 'all' stands alone")
        if any(r.id == risk.id for r in risks):
            raise RuleError(f"{label}.id: repeated")
        risks.append(risk)
    return tuple(risks)


def load(path: Path = BUNDLED_RISKS) -> tuple[Risk, ...]:
    """The validated entries of the log at ``path`` (the bundled log by default).
    Raises RuleError or InputError with one line naming the entry and field."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise RuleError(f"{path}: cannot read the residual-risk log: {e.strerror}") from e
    return parse(text, where=str(path))


def as_dicts(path: Path = BUNDLED_RISKS) -> list[dict[str, Any]]:
    """The log as JSON-ready dictionaries, in file order."""
    return [risk.model_dump(mode="json") for risk in load(path)]


def text_lines(path: Path = BUNDLED_RISKS) -> list[str]:
    """One readable line per entry, in file order."""
    return [risk.text_line() for risk in load(path)]
