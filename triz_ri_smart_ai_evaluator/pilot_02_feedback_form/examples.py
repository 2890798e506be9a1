"""The bundled example candidates (output 12.12): the honest reference and one adversarial
candidate per mandatory attack of pilot 11, each with the verdict it must get.

How they are stored: ``candidates/reference/candidate.diff`` is the honest reference, a full diff
against the starting repository.  Every adversarial candidate is the reference plus a cheat, so it
is stored as that cheat alone: ``candidates/<name>/cheat.patch``, a unified diff against the tree
the reference produces, a dozen lines a reader can review.  The harness and the policy port take
a full diff against the starting repository (users still submit one), so ``candidate_diff``
rebuilds it: a copy of the starting repository, the reference applied, the cheat applied (both
with ``candidate.apply_patch``, the harness's own ``git apply``), then ``diff_trees`` against the
starting repository.  A candidate that cannot be written as the reference plus a patch may keep
a full ``candidate.diff`` of its own, with a README saying why.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from .candidate import Entry, apply_patch, starting_repo, tree_entries

if TYPE_CHECKING:
    from ..harnesses.protocol import RunResult

REFERENCE = "reference"
#: A full diff against the starting repository: the reference's (and a whole-stored candidate's).
FULL_DIFF = "candidate.diff"
#: An adversarial candidate's cheat: a unified diff against the reference's tree.
CHEAT_PATCH = "cheat.patch"


@dataclass(frozen=True, slots=True)
class Example:
    """One bundled candidate and what the evaluator must conclude about it."""

    name: str
    folder: Path  # candidates/<name>/
    expect_violation: str | None  # None for the honest reference
    kind: str  # "reference", "critical" or "metric"
    attack: str

    @property
    def diff(self) -> Path:
        """The candidate as a full diff against the starting repository, the form the harness
        and the policy port take: the stored ``candidate.diff``, or for a candidate stored as a
        cheat patch, a file built by ``candidate_diff`` on first use and kept (in a private
        temporary directory) until the process exits.  Raises InputError as ``candidate_diff``."""
        stored = self.folder / FULL_DIFF
        if stored.is_file():
            return stored
        return _materialised(self.folder)

    def found(self, result: RunResult) -> list[str]:
        """Failed critical checks and metrics below 1, as the run reported them."""
        names = [f["id"] for f in result.findings if f["state"] == "failed"]
        for key, value in result.metrics.items():
            part, whole = value.split("/")
            if whole not in ("0", part):
                names.append(key)
        return names

    def judge(self, result: RunResult) -> dict[str, Any]:
        """Whether the run ended the way this example must end (the reason, not only S)."""
        signal = "errored" if result.signal is None else str(result.signal.value)
        found = self.found(result) if result.status == "completed" else ["errored"]
        if self.kind == REFERENCE:
            ok = (
                result.signal is not None
                and result.signal.value == 2 * Decimal(1)
                and not found
                and result.summary.get("public_acceptance") is True
            )
            expected = "S = 2B, every metric 1.0, every check passed"
        elif self.kind == "metric":
            # A metric is multiplied into S (pilot 10): the candidate is paid less than the
            # honest maximum, for this reason, not zeroed.
            ok = (
                result.signal is not None
                and result.signal.value < 2 * Decimal(1)
                and self.expect_violation in found
            )
            expected = f"S < 2B for {self.expect_violation}"
        else:
            ok = (
                result.signal is not None
                and result.signal.value == 0
                and self.expect_violation in found
            )
            expected = f"S = 0 for {self.expect_violation}"
        return {"candidate": self.name, "attack": self.attack, "signal": signal,
                "expected": expected, "found": found, "as_expected": ok,
                "attempt_id": result.attempt_id, "bundle": str(result.bundle)}


def candidates_dir() -> Path:
    return Path(str(resources.files(__package__) / "candidates"))


def bundled_candidates() -> list[Example]:
    """The reference first, then the adversarial candidates by name.  Raises InputError for a
    malformed ``expect.json`` or a folder that holds neither a diff nor a cheat patch, or both."""
    root = candidates_dir()
    out = [Example(REFERENCE, root / REFERENCE, None, REFERENCE, "none: the honest reference")]
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name != REFERENCE):
        _stored_form(folder)
        expect_file = folder / "expect.json"
        try:
            expect = json.loads(expect_file.read_text(encoding="utf-8"))
            out.append(Example(folder.name, folder, str(expect["expect_violation"]),
                               str(expect["kind"]), str(expect["attack"])))
        except (OSError, ValueError, KeyError) as e:
            raise InputError(f"{expect_file}: malformed example ({e})") from e
    return out


def candidate_diff(name: str, *, root: Path | None = None) -> bytes:
    """The full diff of bundled candidate ``name`` against the starting repository.

    The stored ``candidate.diff`` as it is, or for a candidate stored as ``cheat.patch``: the
    starting repository with the reference and then the cheat applied, diffed against the
    starting repository (``diff_trees``).  ``root`` is the candidates directory (the bundled one
    by default).  Raises InputError naming the candidate and the file when a patch does not
    apply, or when the folder holds neither form or both.
    """
    root = candidates_dir() if root is None else root
    folder = root / name
    if _stored_form(folder) == FULL_DIFF:
        return (folder / FULL_DIFF).read_bytes()
    reference = root / REFERENCE / FULL_DIFF
    cheat = folder / CHEAT_PATCH
    base = starting_repo()
    with tempfile.TemporaryDirectory(prefix="triz-candidate-") as work:
        tree = Path(work) / "tree"
        shutil.copytree(base, tree, symlinks=True)
        apply_patch(reference.read_bytes(), tree, where=f"bundled candidate {REFERENCE}: "
                    f"{reference}")
        apply_patch(cheat.read_bytes(), tree, where=f"bundled candidate {name}: {cheat}",
                    onto="the reference candidate's tree")
        return diff_trees(base, tree)


def _stored_form(folder: Path) -> str:
    forms = [f for f in (FULL_DIFF, CHEAT_PATCH) if (folder / f).is_file()]
    if len(forms) != 1:
        raise InputError(f"bundled candidate {folder.name}: {folder} must hold exactly one of "
                         f"{FULL_DIFF} and {CHEAT_PATCH} (found {forms or 'neither'})")
    return forms[0]


@functools.cache
def _scratch() -> Path:
    # Held for the life of the process; the TemporaryDirectory finaliser removes it at exit.
    holder = tempfile.TemporaryDirectory(prefix="triz-candidates-")
    _HOLDERS.append(holder)
    return Path(holder.name)


_HOLDERS: list[tempfile.TemporaryDirectory[str]] = []


@functools.cache
def _materialised(folder: Path) -> Path:
    data = candidate_diff(folder.name, root=folder.parent)
    target = _scratch() / folder.name / FULL_DIFF
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_suffix(".part")
    part.write_bytes(data)
    os.replace(part, target)
    return target


# --- the tree diff -------------------------------------------------------------------------

#: Paths git writes without quoting; anything else is refused rather than quoted by hand.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+@")


def diff_trees(before: Path, after: Path) -> bytes:
    """A unified diff in git's format that turns the tree ``before`` into ``after`` when applied
    with ``git apply -p1`` inside a copy of ``before``: one section per changed file in path
    order, with git's headers for new and deleted files and executable-bit changes, and its
    ``\\ No newline at end of file`` marker.  Identical trees give ``b""``.

    Raises InputError for a symlink, a binary file (a NUL byte) or a path git would quote.
    """
    old, new = tree_entries(before), tree_entries(after)
    out: list[bytes] = []
    for rel in sorted(old.keys() | new.keys()):
        a, b = old.get(rel), new.get(rel)
        if a == b:
            continue
        if set(rel) - _PLAIN:
            raise InputError(f"{rel}: a path git would quote, which the tree diff does not write")
        out.append(_file_diff(rel, _side(before, rel, a), _side(after, rel, b)))
    return b"".join(out)


def _side(root: Path, rel: str, entry: Entry | None) -> tuple[bytes, str] | None:
    if entry is None:
        return None
    if entry.kind != "file":
        raise InputError(f"{root / rel}: a {entry.kind}, which the tree diff does not write")
    data = (root / rel).read_bytes()
    if b"\0" in data:
        raise InputError(f"{root / rel}: a binary file, which the tree diff does not write")
    return data, "100755" if entry.executable else "100644"


def _file_diff(rel: str, old: tuple[bytes, str] | None, new: tuple[bytes, str] | None) -> bytes:
    head = [f"diff --git a/{rel} b/{rel}"]
    before, after = f"a/{rel}", f"b/{rel}"
    if old is None and new is not None:
        head.append(f"new file mode {new[1]}")
        before = "/dev/null"
    elif new is None and old is not None:
        head.append(f"deleted file mode {old[1]}")
        after = "/dev/null"
    elif old is not None and new is not None and old[1] != new[1]:
        head += [f"old mode {old[1]}", f"new mode {new[1]}"]
    hunks = difflib.diff_bytes(difflib.unified_diff, _lines(old), _lines(new),
                               before.encode(), after.encode())
    body = b"".join(
        line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n"
        for line in hunks
    )
    return "".join(f"{h}\n" for h in head).encode() + body


def _lines(side: tuple[bytes, str] | None) -> list[bytes]:
    """Lines with their ``\\n`` kept (split on ``\\n`` only: a lone ``\\r`` is content)."""
    if side is None:
        return []
    parts = side[0].split(b"\n")
    return [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
