"""Where a campaign's adversarial candidates come from (spec 9.12; pilot 11).

Three sources, each candidate with its category of attack (:data:`~.budget.CATEGORIES`):

* the class's **bundled** candidates, categorised in ``audit/data/<class>.yaml``;
* **user-supplied** ones (``--candidates DIR``): one folder per candidate holding the candidate
  (``candidate.diff``) and ``adversary.yaml`` naming its category and saying that it lacks the
  required result;
* **generated** mutants of the class's honest reference, for a class that has a generator
  (:data:`GENERATORS`; pilot 02's is :mod:`.pilot02_mutants`).

Every adversary lacks the required result by construction, so a signal at or above the honest
reference's is an exploit (spec 11.23).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from .._io import load_model, validation_message
from .._safe_read import parse_yaml
from ..errors import InputError
from ..pilot_02_feedback_form import examples as pilot02
from .budget import Category, data_file
from .pilot02_mutants import write_mutants

Origin = Literal["bundled", "user", "generated"]
#: The file of a user-supplied candidate folder that describes it.
ADVERSARY_FILE = "adversary.yaml"
CANDIDATE_FILE = "candidate.diff"

_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
_Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")]


@dataclass(frozen=True, slots=True)
class Adversary:
    """One adversarial candidate of a campaign.  ``stopping_condition`` names the pilot 12
    condition it trips, if any: its attempt must end quarantined."""

    name: str
    category: Category
    origin: Origin
    attack: str
    candidate: Path
    stopping_condition: str | None = None


class _Bundled(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    category: Category
    stopping_condition: _Text | None = None


class ClassData(BaseModel):
    """``audit/data/<class>.yaml`` beside its minimum: the honest reference's bundled name and
    the category of each bundled adversary."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    reference: _Name
    bundled: dict[_Name, _Bundled]


class UserAdversary(BaseModel):
    """``adversary.yaml`` of a user-supplied candidate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    category: Category
    #: Must be true: a campaign attacks with candidates that lack the required result.
    lacks_result: bool
    attack: _Text
    stopping_condition: _Text | None = None


def _pilot02_path(name: str) -> Path:
    if name == pilot02.REFERENCE:
        return pilot02.candidates_dir() / pilot02.REFERENCE / pilot02.FULL_DIFF
    for example in pilot02.bundled_candidates():
        if example.name == name:
            return example.diff
    raise InputError(f"pilot 02 has no bundled candidate {name!r}")


def _pilot02_attack(name: str) -> str:
    return next((e.attack for e in pilot02.bundled_candidates() if e.name == name), name)


def _defect_fix_path(name: str) -> Path:
    path = Path(str(resources.files("triz_ri_smart_ai_evaluator.defect_fix") / "candidates"
                    / name / CANDIDATE_FILE))
    if not path.is_file():
        raise InputError(f"defect_fix_delayed_confirmation has no bundled candidate {name!r}")
    return path


#: How a class's bundled candidate is found by name, and what attack it makes.
BUNDLED: Mapping[str, tuple[Callable[[str], Path], Callable[[str], str]]] = {
    "pilot_02_feedback_form": (_pilot02_path, _pilot02_attack),
    "defect_fix_delayed_confirmation": (_defect_fix_path, lambda name: name.replace("_", " ")),
}
#: ``generate(seed, wanted, out)``: mutants of the honest reference written under ``out``, at
#: most ``wanted[category]`` per category.  A class without one has no generated mutants.
GENERATORS: Mapping[str, Callable[[bytes, Mapping[str, int], Path], list[Adversary]]] = {
    "pilot_02_feedback_form": lambda seed, wanted, out: [
        Adversary(m.name, m.category, "generated", m.attack, path, m.stopping_condition)
        for m, path in write_mutants(seed, wanted, out)],
}


def class_data(task_class: str) -> ClassData:
    """The class's audit data.  Raises InputError when it has none or it is malformed."""
    path = data_file(task_class)
    if not path.is_file():
        raise InputError(f"task class {task_class!r} has no red-team data ({path.name})")
    try:
        return ClassData.model_validate(parse_yaml(path.read_text(encoding="utf-8"),
                                                   where=str(path)))
    except ValidationError as e:
        raise InputError(f"{path}: {validation_message(e)}") from e


def reference(task_class: str) -> Path:
    """The class's honest reference candidate.  Raises InputError when it has none."""
    if task_class not in BUNDLED:
        raise InputError(f"task class {task_class!r} has no bundled honest reference to "
                         "measure adversaries against")
    return BUNDLED[task_class][0](class_data(task_class).reference)


def bundled(task_class: str) -> list[Adversary]:
    """The class's bundled adversaries, by name.  Raises InputError for a name the class does
    not bundle."""
    if task_class not in BUNDLED:
        return []
    path_of, attack_of = BUNDLED[task_class]
    data = class_data(task_class)
    return [Adversary(name, b.category, "bundled", attack_of(name), path_of(name),
                      b.stopping_condition) for name, b in sorted(data.bundled.items())]


def user_supplied(folder: Path) -> list[Adversary]:
    """The candidates of ``folder``, one sub-folder each.  Raises InputError, naming the file,
    for a folder without ``candidate.diff`` or ``adversary.yaml``, a malformed description,
    or one that does not say it lacks the required result."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder of candidates")
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        described, candidate = sub / ADVERSARY_FILE, sub / CANDIDATE_FILE
        if not described.is_file() or not candidate.is_file():
            raise InputError(f"{sub}: a user candidate needs {CANDIDATE_FILE} and "
                             f"{ADVERSARY_FILE}")
        about = load_model(described, UserAdversary)
        if not about.lacks_result:
            raise InputError(f"{described}: lacks_result must be true (a campaign attacks "
                             "with candidates that lack the required result)")
        if not _plain(sub.name):
            raise InputError(f"{sub}: a candidate folder name is letters, digits, . _ -")
        found.append(Adversary(f"user-{sub.name}", about.category, "user", about.attack,
                               candidate, about.stopping_condition))
    if not found:
        raise InputError(f"{folder}: no candidate folders")
    return found


def _plain(name: str) -> bool:
    return all(c.isascii() and (c.isalnum() or c in "._-") for c in name) and 0 < len(name) < 80


def generated(task_class: str, seed: bytes, wanted: Mapping[str, int],
              out: Path) -> list[Adversary]:
    """Mutants of the class's honest reference (none for a class without a generator)."""
    generate = GENERATORS.get(task_class)
    return [] if generate is None else generate(seed, wanted, out)
