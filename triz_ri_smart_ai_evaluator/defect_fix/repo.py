"""The candidate's tree: a unified diff applied to the bundled starting repository, and what it
changed (the declared scope, the supplied tests).

The candidate's code is never imported here; it is only read as bytes.  File digests come from
pilot 02's generic tree functions (``tree_entries``, ``archive_digest``); the patch applier is
this class's own, since pilot 02's is private to its pilot-specific ``prepare``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath

from ..errors import InputError
from ..pilot_02_feedback_form.candidate import Entry, archive_digest, tree_entries

__all__ = ["Changes", "Entry", "Scope", "Tree", "apply_candidate", "archive_digest", "compare",
           "copy_tree", "hidden_dir", "load_scope", "starting_repo", "supplied_tests",
           "tree_entries"]

MAX_PATCH_BYTES = 1024 * 1024
#: Build by-products, never part of a tree.
_IGNORED = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git"})
#: Files whose presence changes how Python or pytest starts: never within a candidate's scope.
_STARTUP_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini",
                            "tox.ini", "setup.cfg", "pyproject.toml"})


def starting_repo() -> Path:
    """The starting repository shipped inside the package."""
    return Path(str(resources.files(__package__) / "starting_repo"))


def hidden_dir() -> Path:
    """The hidden reproduction test and the tracker's record: outside the starting repo."""
    return Path(str(resources.files(__package__) / "hidden"))


def _ignore(_directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _IGNORED}


def copy_tree(source: Path, target: Path) -> None:
    """Copy a tree without build by-products, keeping symlinks as links."""
    shutil.copytree(source, target, symlinks=True, ignore=_ignore)


@dataclass(frozen=True, slots=True)
class Tree:
    """A materialised candidate: its tree, its files and the digests that identify it."""

    path: Path
    entries: Mapping[str, Entry]
    digest: str  # of the tree (pilot 02's canonical archive)
    patch_sha256: str  # of the diff exactly as handed in


def apply_candidate(candidate: Path, work: Path) -> Tree:
    """Apply the unified diff ``candidate`` to a copy of the starting repository at
    ``work/candidate``.  Raises InputError naming the file for a missing, oversized, malformed
    or non-applying patch, and for a patch that makes a symlink."""
    if not candidate.is_file():
        raise InputError(f"{candidate}: no such candidate (a unified diff file)")
    patch = candidate.read_bytes()
    if len(patch) > MAX_PATCH_BYTES:
        raise InputError(f"{candidate}: patch larger than {MAX_PATCH_BYTES} bytes")
    if not patch.strip():
        raise InputError(f"{candidate}: the patch is empty")
    tree = work / "candidate"
    copy_tree(starting_repo(), tree)
    # git refuses '..' and absolute paths unless told otherwise (--unsafe-paths), and we never
    # tell it; --check first, so a half-applied patch never exists.
    for check in (True, False):
        argv = ["git", "apply", "--whitespace=nowarn", "-p1", *(["--check"] if check else [])]
        try:
            proc = subprocess.run(argv, input=patch, cwd=tree, capture_output=True,  # noqa: S603
                                  timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InputError(f"{candidate}: cannot run git apply: {e}") from e
        if proc.returncode != 0:
            lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            why = "; ".join(lines[:2]) if lines else f"exit status {proc.returncode}"
            raise InputError(f"{candidate}: the patch does not apply to the starting "
                             f"repository ({why})")
    entries = tree_entries(tree)
    links = sorted(p for p, e in entries.items() if e.kind == "symlink")
    if links:
        raise InputError(f"{candidate}: the patch makes a symlink ({links[0]})")
    for path in [tree, *tree.rglob("*")]:  # the sandbox's own uid reads the tree
        path.chmod(path.stat().st_mode | (0o005 if path.is_dir() else 0o004))
    return Tree(tree, entries, archive_digest(entries), hashlib.sha256(patch).hexdigest())


@dataclass(frozen=True, slots=True)
class Scope:
    """``SCOPE.json``: the files a fix may touch, and where the supplied tests live."""

    defect: str
    permitted: frozenset[str]
    tests: str  # a folder, "tests/"


def load_scope(base: Path | None = None) -> Scope:
    """Read the starting repository's ``SCOPE.json``.  Raises InputError if malformed."""
    path = (base or starting_repo()) / "SCOPE.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        tests = doc["tests"]
        if not isinstance(tests, str) or not tests.endswith("/"):
            raise ValueError("'tests' must be one folder ending in '/'")
        return Scope(str(doc["defect"]), frozenset(str(p) for p in doc["permitted"]), tests)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: malformed scope file ({e})") from e


@dataclass(frozen=True, slots=True)
class Changes:
    """What a candidate changed relative to the starting repository."""

    added: tuple[str, ...]
    modified: tuple[str, ...]
    removed: tuple[str, ...]
    #: Supplied test files edited or deleted (spec: tests_unmodified, a hash comparison).
    tests_changed: tuple[str, ...]
    #: Test files the candidate added under the tests folder (its reproduction tests).
    tests_added: tuple[str, ...]
    #: Changed files that are neither in the declared scope nor new test files.
    outside_scope: tuple[str, ...]

    @property
    def changed(self) -> tuple[str, ...]:
        return (*self.added, *self.modified, *self.removed)

    def to_dict(self) -> dict[str, list[str]]:
        return {"added": list(self.added), "modified": list(self.modified),
                "removed": list(self.removed), "tests_changed": list(self.tests_changed),
                "tests_added": list(self.tests_added), "outside_scope": list(self.outside_scope)}


def _is_new_test(rel: str, scope: Scope) -> bool:
    path = PurePosixPath(rel)
    return (rel.startswith(scope.tests) and path.name.startswith("test_")
            and path.suffix == ".py" and path.name not in _STARTUP_NAMES)


def compare(entries: Mapping[str, Entry], base: Mapping[str, Entry], scope: Scope) -> Changes:
    """Every file added, modified and removed; which of them are supplied tests (edited or
    deleted), new tests, or outside the declared scope.  Pure."""
    added = sorted(set(entries) - set(base))
    removed = sorted(set(base) - set(entries))
    modified = sorted(p for p in set(entries) & set(base) if entries[p] != base[p])
    tests_changed = sorted(p for p in (*modified, *removed) if p.startswith(scope.tests))
    tests_added = sorted(p for p in added if _is_new_test(p, scope))
    outside = sorted(p for p in (*added, *modified, *removed)
                     if p not in scope.permitted and p not in tests_added
                     and p not in tests_changed)
    return Changes(tuple(added), tuple(modified), tuple(removed), tuple(tests_changed),
                   tuple(tests_added), tuple(outside))


def supplied_tests(base: Mapping[str, Entry], scope: Scope) -> list[str]:
    """The supplied test files (every file under the tests folder of the starting repo)."""
    return sorted(p for p in base if p.startswith(scope.tests))
