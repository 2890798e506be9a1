"""The task-class catalogue: typed rules, YAML loading, validation and versioning."""

from .loader import BUNDLED_CATALOGUE, CatalogueError, load_catalogue, load_task_class
from .published import BUNDLED_STORE, RulesStore
from .task_class import TaskClass
from .versions import PinnedRules, pin, rules_version

__all__ = [
    "BUNDLED_CATALOGUE",
    "BUNDLED_STORE",
    "CatalogueError",
    "PinnedRules",
    "RulesStore",
    "TaskClass",
    "load_catalogue",
    "load_task_class",
    "pin",
    "rules_version",
]
