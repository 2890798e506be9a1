"""Harnesses by task class, found through entry points (issue 14 item 1).

An installed distribution adds a task class by declaring, in its ``pyproject.toml``::

    [project.entry-points."triz_ri_smart_ai_evaluator.harnesses"]
    my_task_class = "my_package.harness:HARNESS"

    [project.entry-points."triz_ri_smart_ai_evaluator.catalogues"]
    my_task_class = "my_package:CATALOGUE"     # a Path to its task-class YAML

The service, the CLI and the examples find harnesses here only; the bundled classes are
registered the same way, by this package's own ``pyproject.toml``.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from ..errors import InputError
from .protocol import Harness

GROUP = "triz_ri_smart_ai_evaluator.harnesses"


def _entries() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        # The first distribution on the path wins, as Python's own import does.
        found.setdefault(ep.name, ep)
    return found


def task_classes() -> list[str]:
    """The task classes a harness is registered for, sorted."""
    return sorted(_entries())


def harness_for(task_class: str) -> Harness:
    """The harness registered for ``task_class``.  Raises InputError naming the class when
    none is, or when what is registered does not load or is not a harness."""
    entry = _entries().get(task_class)
    if entry is None:
        known = ", ".join(task_classes()) or "none"
        raise InputError(f"task class {task_class!r} has no executable harness (registered: "
                         f"{known})")
    try:
        harness = entry.load()
    except Exception as e:  # a broken plugin is the plugin's error, reported, not a crash
        raise InputError(f"task class {task_class!r}: its harness {entry.value!r} does not "
                         f"load: {type(e).__name__}: {e}") from e
    if not isinstance(harness, Harness) or harness.task_class != task_class:
        raise InputError(f"task class {task_class!r}: {entry.value!r} is not a harness for "
                         "this class")
    return harness
