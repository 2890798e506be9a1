"""Reading task classes from YAML files, with every problem located by file, line and field.

This module reads files; the models it fills do not.  Errors are collected, not stopped at the
first: the author of a catalogue file sees every problem in one run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import RuleError
from .task_class import Problem, TaskClass, loads_context

#: The bundled catalogue folder, shipped inside the package.
BUNDLED_CATALOGUE = Path(__file__).resolve().parent.parent / "catalogue"
#: Entry points whose value is a path to task-class YAML an installed package adds.
PLUGIN_GROUP = "triz_ri_smart_ai_evaluator.catalogues"


@dataclass(frozen=True, slots=True)
class Located:
    """A problem in a file: ``file:line: field: message``."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class CatalogueError(RuleError):
    """One or more task-class files are invalid.  ``problems`` lists them all."""

    def __init__(self, problems: Sequence[Located]) -> None:
        self.problems = tuple(problems)
        first = self.problems[0]
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        super().__init__(f"{first}{more}")


def _field(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(root)"


def line_of(root: yaml.Node | None, path: Sequence[str | int]) -> int:
    """The 1-based line of the deepest node of ``path`` that exists in the YAML tree."""
    node = root
    line = 1 if node is None else node.start_mark.line + 1
    for part in path:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    child = value
                    line = key.start_mark.line + 1
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def duplicate_keys(node: yaml.Node, path: tuple[str | int, ...]) -> Iterator[tuple[int, str]]:
    """(line, field path) of every key repeated within one YAML mapping, at any depth."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                yield key.start_mark.line + 1, _field((*path, name))
            seen.add(name)
            yield from duplicate_keys(value, (*path, name))
    elif isinstance(node, yaml.SequenceNode):
        for n, item in enumerate(node.value):
            yield from duplicate_keys(item, (*path, n))


class MalformedYaml(Exception):
    """The text is not YAML; ``located`` says where (``file:line: (yaml): ...``)."""

    def __init__(self, located: Located) -> None:
        super().__init__(str(located))
        self.located = located


def yaml_tree(text: str, *, file: str) -> tuple[yaml.Node | None, Any]:
    """The node tree (for line numbers) and the data of one YAML document, read safely.
    Raises MalformedYaml with the line of the syntax error."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise MalformedYaml(Located(file, line, "(yaml)", f"malformed YAML: {problem}")) from e
    return root, data


def parse_task_class(text: str, *, file: str) -> TaskClass:
    """Parse and validate one task class from YAML text.

    Raises CatalogueError listing every problem with its line and field path.
    """
    try:
        root, data = yaml_tree(text, file=file)
    except MalformedYaml as e:
        raise CatalogueError([e.located]) from e
    if root is not None:
        dups = [Located(file, ln, fld, "duplicate key") for ln, fld in duplicate_keys(root, ())]
        if dups:
            raise CatalogueError(dups)
    if not isinstance(data, dict):
        raise CatalogueError([Located(file, 1, "(root)", "a task class must be a YAML mapping")])
    context = loads_context()
    try:
        return TaskClass.model_validate(data, context=context)
    except ValidationError as e:
        raise CatalogueError(_locate(e, context["problems"], root, file)) from e


def _locate(
    error: ValidationError, problems: list[Problem], root: yaml.Node | None, file: str
) -> list[Located]:
    located: list[Located] = []
    for p in problems:
        located.append(Located(file, line_of(root, p.path), _field(p.path), p.message))
    errors = error.errors(include_url=False)
    locs = [tuple(e["loc"]) for e in errors]
    for err in errors:
        loc = tuple(err["loc"])
        if not loc and problems:
            continue  # the model-level summary of problems already listed above
        if err["type"] == "too_short" and any(
            other[: len(loc)] == loc and len(other) > len(loc) for other in locs
        ):
            continue  # pydantic's echo of a failed item: "at least 1 item after validation"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field (not part of the task-class schema)"
        elif err["type"] == "missing":
            message = "required field is missing"
        located.append(Located(file, line_of(root, loc), _field(loc), message))
    return located


def load_task_class(path: Path) -> TaskClass:
    """Read and validate one task-class file.

    Raises CatalogueError for an unreadable or invalid file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogueError([Located(str(path), 1, "(file)", f"cannot read: {e}")]) from e
    return parse_task_class(text, file=str(path))


def catalogue_files(path: Path) -> list[Path]:
    """The task-class files at ``path``: the file itself, or every ``*.yaml`` in a folder."""
    if path.is_dir():
        return sorted(p for p in path.glob("*.yaml") if p.is_file())
    if path.is_file():
        return [path]
    raise RuleError(f"{path}: no such file or folder")


def plugin_catalogue_files() -> list[Path]:
    """The task-class files installed packages add (issue 14 item 1): each entry point of the
    group :data:`PLUGIN_GROUP` names a path (a YAML file or a folder of them).  Raises RuleError
    naming the entry point when one does not load or is not a path."""
    files: list[Path] = []
    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            where = ep.load()
        except Exception as e:  # a broken plugin is the plugin's error, reported, not a crash
            raise RuleError(f"catalogue plugin {ep.name!r} ({ep.value}) does not load: "
                            f"{type(e).__name__}: {e}") from e
        if not isinstance(where, (str, Path)):
            raise RuleError(f"catalogue plugin {ep.name!r} ({ep.value}) is not a path")
        files.extend(catalogue_files(Path(where)))
    return files


def load_catalogue(path: Path = BUNDLED_CATALOGUE) -> dict[str, TaskClass]:
    """Load every task class at ``path`` keyed by id; the bundled catalogue includes the task
    classes installed packages add (:func:`plugin_catalogue_files`).

    Raises CatalogueError with the problems of every invalid file, and for two files declaring
    the same id.
    """
    classes: dict[str, TaskClass] = {}
    origin: dict[str, Path] = {}
    problems: list[Located] = []
    files = catalogue_files(path)
    if not files:
        raise RuleError(f"{path}: no task-class files (*.yaml)")
    if path == BUNDLED_CATALOGUE:
        files.extend(plugin_catalogue_files())
    for file in files:
        try:
            tc = load_task_class(file)
        except CatalogueError as e:
            problems.extend(e.problems)
            continue
        if tc.id in classes:
            problems.append(
                Located(str(file), 1, "id", f"task class {tc.id!r} already in {origin[tc.id]}")
            )
            continue
        classes[tc.id] = tc
        origin[tc.id] = file
    if problems:
        raise CatalogueError(problems)
    return classes
