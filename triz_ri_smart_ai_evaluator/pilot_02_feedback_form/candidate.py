"""The candidate: a patch against, or a full copy of, the starting repository (pilot 2).

The candidate is fixed before anything about the control set exists: ``prepare`` materialises it
in a work directory and returns its digest, the SHA-256 of a canonical archive of its files
(pilot 2, 6).  ``check_scope`` then compares the tree with the starting repository and names
every change outside the permitted scope and every change to the tests (pilot 7, 12).

The candidate's code is never imported here; it is only read as bytes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath

from ..errors import InputError

#: Directories that are build by-products, never part of an artefact.
_IGNORED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git"})
#: Files whose mere presence changes how Python or pytest runs (pilot 7: no new conftest.py,
#: sitecustomize, .pth files).
_FORBIDDEN_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
_FORBIDDEN_SUFFIXES = (".pth",)
#: Dependency declarations: changing them is outside any candidate's scope.
_DEPENDENCY_FILES = frozenset(
    {"requirements.txt", "setup.py", "setup.cfg", "pyproject.toml", "Pipfile", "poetry.lock"}
)
MAX_CANDIDATE_BYTES = 20 * 1024 * 1024


def starting_repo() -> Path:
    """The starting repository shipped inside the package."""
    return Path(str(resources.files(__package__) / "starting_repo"))


@dataclass(frozen=True, slots=True)
class Entry:
    """One file of a tree: its kind (file or symlink), executable bit and content digest."""

    kind: str
    executable: bool
    sha256: str


def tree_entries(root: Path) -> dict[str, Entry]:
    """Every file under ``root`` by POSIX relative path, symlinks recorded as links (never
    followed).  Raises InputError for anything that is neither a file, a directory nor a link."""
    out: dict[str, Entry] = {}
    for path in sorted(_walk(root)):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            target = str(path.readlink()).encode()
            out[rel] = Entry("symlink", False, hashlib.sha256(target).hexdigest())
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[rel] = Entry("file", bool(path.stat().st_mode & 0o111), digest)
        else:
            raise InputError(f"{path}: not a regular file, directory or symlink")
    return out


def _walk(root: Path) -> Iterable[Path]:
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            if child.name not in _IGNORED_DIRS:
                yield from _walk(child)
        else:
            yield child


def archive_digest(entries: Mapping[str, Entry]) -> str:
    """SHA-256 of the canonical archive: one line per file, sorted by path, of path, kind,
    executable bit and content digest (pilot 2: the hash fixed before the control set)."""
    h = hashlib.sha256()
    for rel in sorted(entries):
        e = entries[rel]
        h.update(f"{rel}\0{e.kind}\0{int(e.executable)}\0{e.sha256}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A materialised candidate: where its tree is, what it was made from, and its digest."""

    tree: Path
    source: str  # "diff" or "directory"
    digest: str
    entries: Mapping[str, Entry]
    patch_sha256: str | None


def prepare(candidate: Path, workdir: Path) -> Candidate:
    """Materialise ``candidate`` (a unified diff file or a directory) as ``workdir/candidate``.

    Raises InputError for a missing path, a patch that does not apply, or a directory that is
    not a copy of the starting repository.
    """
    base = starting_repo()
    tree = workdir / "candidate"
    if tree.exists():
        raise InputError(f"{tree} already exists")
    if candidate.is_dir():
        _check_is_starting_repo(candidate, base)
        shutil.copytree(candidate, tree, symlinks=True, ignore=_ignore)
        entries = tree_entries(tree)
        return Candidate(tree, "directory", archive_digest(entries), entries, None)
    if not candidate.is_file():
        raise InputError(f"{candidate}: no such candidate (a .diff file or a directory)")
    patch = candidate.read_bytes()
    if len(patch) > MAX_CANDIDATE_BYTES:
        raise InputError(f"{candidate}: patch larger than {MAX_CANDIDATE_BYTES} bytes")
    shutil.copytree(base, tree, symlinks=True, ignore=_ignore)
    apply_patch(patch, tree, where=str(candidate))
    entries = tree_entries(tree)
    return Candidate(
        tree, "diff", archive_digest(entries), entries, hashlib.sha256(patch).hexdigest()
    )


def _ignore(_directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _IGNORED_DIRS}


def apply_patch(
    patch: bytes, tree: Path, *, where: str, onto: str = "the starting repository"
) -> None:
    """Apply with ``git apply`` (never outside ``tree``: git refuses ``..`` and absolute paths
    unless told otherwise, and we never tell it).  Checks first, so a patch that does not apply
    leaves ``tree`` untouched.  Raises InputError naming ``where`` and git's first complaint
    (for a failed hunk, the file and line)."""
    for check in (True, False):
        args = ["git", "apply", "--whitespace=nowarn", "-p1"]
        if check:
            args.append("--check")
        try:
            proc = subprocess.run(  # noqa: S603 - fixed argv; the patch goes to stdin only
                args, input=patch, cwd=tree, capture_output=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InputError(f"{where}: cannot run git apply: {e}") from e
        if proc.returncode != 0:
            message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            first = message[0] if message else f"exit status {proc.returncode}"
            raise InputError(f"{where}: the patch does not apply to {onto} ({first})")


def _check_is_starting_repo(candidate: Path, base: Path) -> None:
    """A directory candidate must be a copy of the starting repository: same layout of the
    application package and its tests, even if some files changed."""
    scope = load_scope(base)
    missing = [p for p in scope.anchors if not (candidate / p).exists()]
    if missing:
        raise InputError(
            f"{candidate}: not a copy of the starting repository (missing {', '.join(missing)})"
        )


@dataclass(frozen=True, slots=True)
class Scope:
    """The permitted scope of the starting repository (``SCOPE.json``)."""

    permitted: frozenset[str]
    tests: tuple[str, ...]
    anchors: tuple[str, ...] = ("feedback_app/__init__.py", "tests", "TASK.md")


def load_scope(base: Path) -> Scope:
    """Read ``SCOPE.json`` of the starting repository.  Raises InputError if malformed."""
    path = base / "SCOPE.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        permitted = frozenset(str(p) for p in doc["permitted"])
        tests = tuple(str(p) for p in doc["tests"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: malformed scope file ({e})") from e
    return Scope(permitted, tests)


@dataclass(frozen=True, slots=True)
class ScopeReport:
    """What changed relative to the starting repository, and what of it is not allowed."""

    added: tuple[str, ...]
    modified: tuple[str, ...]
    removed: tuple[str, ...]
    outside_scope: tuple[str, ...]
    forbidden: tuple[str, ...]
    tests_changed: tuple[str, ...]
    tests_digest_before: str
    tests_digest_after: str
    problems: tuple[str, ...] = field(default=())

    @property
    def scope_ok(self) -> bool:
        return not self.outside_scope and not self.forbidden

    @property
    def tests_ok(self) -> bool:
        return not self.tests_changed and self.tests_digest_before == self.tests_digest_after

    def to_dict(self) -> dict[str, object]:
        return {
            "added": list(self.added),
            "modified": list(self.modified),
            "removed": list(self.removed),
            "outside_scope": list(self.outside_scope),
            "forbidden": list(self.forbidden),
            "tests_changed": list(self.tests_changed),
            "tests_digest_before": self.tests_digest_before,
            "tests_digest_after": self.tests_digest_after,
            "scope_ok": self.scope_ok,
            "tests_ok": self.tests_ok,
        }


def check_scope(entries: Mapping[str, Entry], base: Path | None = None) -> ScopeReport:
    """Compare a candidate's files with the starting repository (pilot 7, 12)."""
    base = base or starting_repo()
    scope = load_scope(base)
    original = tree_entries(base)
    added = sorted(set(entries) - set(original))
    removed = sorted(set(original) - set(entries))
    modified = sorted(p for p in set(entries) & set(original) if entries[p] != original[p])
    changed = [*added, *modified, *removed]
    outside = [p for p in changed if p not in scope.permitted]
    forbidden = []
    for rel in sorted(entries):
        name = PurePosixPath(rel).name
        entry = entries[rel]
        if entry.kind == "symlink":
            forbidden.append(f"{rel} (symlink)")
        elif name in _FORBIDDEN_NAMES or name.endswith(_FORBIDDEN_SUFFIXES):
            if rel not in original:
                forbidden.append(f"{rel} (changes how Python or pytest starts)")
        elif name in _DEPENDENCY_FILES and rel in changed:
            forbidden.append(f"{rel} (dependency change)")
    # Tests: every original test file must be byte-identical; new test files are allowed
    # only where the scope permits them (the candidate's own self-check tests).
    def under_tests(rel: str) -> bool:
        return any(rel == t.rstrip("/") or rel.startswith(t) for t in scope.tests)

    tests_changed = sorted(
        p for p in [*modified, *removed] if under_tests(p)
    ) + sorted(p for p in added if under_tests(p) and p not in scope.permitted)
    before = archive_digest({p: e for p, e in original.items() if under_tests(p)})
    after = archive_digest({p: e for p, e in entries.items() if p in original and under_tests(p)})
    return ScopeReport(
        tuple(added),
        tuple(modified),
        tuple(removed),
        tuple(outside),
        tuple(forbidden),
        tuple(tests_changed),
        before,
        after,
    )
