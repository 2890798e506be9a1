"""The budget of a red-team campaign (spec 9.13; pilot 11) and each class's declared minimum.

Spec 9.13: every audit records its computational and organisational budget, the number of
attempts, the set of attacks and the success criterion.  A budget file says all of it for one
task class: how many automated scenarios and how many attempts per category of attack, a
wall-clock limit, who spent what, and the success criterion.  Pilot 11 fixes the least a
campaign on pilot 02 may spend; a campaign under a smaller budget still runs and is recorded,
but never passes (:func:`shortfall`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from .._io import load_model, validation_message
from .._safe_read import parse_yaml
from ..errors import InputError

#: The categories of adversarial attempts (pilot 11's minimum budget, in its order).
Category = Literal["input_mutations", "test_loop", "injection_and_secrets"]
CATEGORIES: tuple[Category, ...] = get_args(Category)
#: What the budget counts: automated scenarios run, then attempts per category.
COUNTED: tuple[str, ...] = ("scenarios", *CATEGORIES)
_LABELS = {"scenarios": "automated scenarios", "input_mutations": "input mutations",
           "test_loop": "attempts to change the test loop",
           "injection_and_secrets": "attacks on prompt injection and secrets"}

_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
_Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
_Count = Annotated[int, Field(ge=0, le=100_000, strict=True)]


class Attempts(BaseModel):
    """How much a campaign spends: ``scenarios`` automated scenarios run against adversarial
    candidates (each attempt runs its whole control set), and adversarial attempts per
    category."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenarios: _Count
    input_mutations: _Count
    test_loop: _Count
    injection_and_secrets: _Count

    def as_dict(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in COUNTED}

    def describe(self) -> str:
        """``150 automated scenarios, 50 input mutations, ...``."""
        return ", ".join(f"{getattr(self, n)} {_LABELS[n]}" for n in COUNTED)


class Budget(BaseModel):
    """A campaign's budget file (YAML or JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: _Name
    task_class: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{1,63}$")]
    attempts: Attempts
    #: The computational budget's wall clock: past it the campaign stops, incomplete.
    wall_clock_seconds: Annotated[int, Field(ge=1, le=7 * 24 * 3600, strict=True)]
    #: The organisational budget (spec 9.13): who attacked, with what, for how long.
    organisational: _Text
    success_criterion: _Text

    def describe(self) -> str:
        """The budget X of the permitted wording: its name and what it spends."""
        return (f"{self.name} ({self.attempts.describe()}; at most "
                f"{self.wall_clock_seconds} s of wall clock)")


class Minimum(BaseModel):
    """A class's declared least budget, bundled in ``audit/data/<class>.yaml``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: Attempts
    source: _Text


def load_budget(path: Path) -> Budget:
    """Read a budget file.  Raises InputError, one line naming the file and the field."""
    if not path.is_file():
        raise InputError(f"{path}: no such budget file")
    return load_model(path, Budget)


def data_file(task_class: str) -> Path:
    """The bundled audit data of ``task_class`` (it may not exist)."""
    return Path(str(resources.files(__package__) / "data" / f"{task_class}.yaml"))


def minimum_for(task_class: str) -> Minimum:
    """The class's declared minimum budget.  Raises InputError when the class declares none
    (a campaign against it could not be judged complete)."""
    path = data_file(task_class)
    if not path.is_file():
        raise InputError(f"task class {task_class!r} declares no red-team minimum budget "
                         f"(no {path.name} in the audit data)")
    doc = parse_yaml(path.read_text(encoding="utf-8"), where=str(path))
    if not isinstance(doc, dict) or "minimum" not in doc:
        raise InputError(f"{path}: no 'minimum' mapping")
    try:
        return Minimum.model_validate(doc["minimum"])
    except ValidationError as e:
        raise InputError(f"{path}: minimum.{validation_message(e)}") from e


def shortfall(budget: Budget, minimum: Minimum) -> list[str]:
    """Where ``budget`` asks for less than the class's minimum, one text each (empty: none).
    A campaign under such a budget is recorded but never passed (spec 11.23)."""
    low = budget.attempts.as_dict()
    least = minimum.attempts.as_dict()
    return [f"{name} {low[name]} < {least[name]} ({minimum.source})"
            for name in COUNTED if low[name] < least[name]]
