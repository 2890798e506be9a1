"""No unused names in the package (issue 14 item 8.5): vulture at confidence 60 reports nothing
beyond ``vulture_whitelist.py``, a module with an unused function is reported, and the whitelist
names only what vulture would otherwise report.

The candidate template repositories and bundled candidates are data, not our code: excluded.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "triz_ri_smart_ai_evaluator"
WHITELIST = REPO / "vulture_whitelist.py"
EXCLUDE = "*/starting_repo/*,*/candidates/*,*/hidden/*"
MIN_CONFIDENCE = "60"
_FINDING = re.compile(r"^(?P<path>.+?):(?P<line>\d+): unused \w+ '(?P<name>[^']+)'")


def run_vulture(*extra: Path, whitelist: bool = True) -> subprocess.CompletedProcess[str]:
    """The venv's ``vulture`` on the package (and the whitelist, and ``extra`` files), with the
    project's excludes and minimum confidence.  Exit 0 and no output: nothing unused."""
    exe = Path(sys.executable).with_name("vulture")
    if not exe.exists():
        pytest.fail(f"{exe} is missing: install the dev extras (bash scripts/setup.sh)")
    paths = [PACKAGE, *([WHITELIST] if whitelist else []), *extra]
    return subprocess.run(
        [str(exe), *map(str, paths), "--exclude", EXCLUDE, "--min-confidence", MIN_CONFIDENCE],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )


def test_the_package_has_no_unused_names() -> None:
    result = run_vulture()
    report = result.stdout + result.stderr
    assert result.returncode == 0, (
        "vulture reports unused code: remove it, or if it is used (a framework calls it), add it "
        f"to vulture_whitelist.py with why\n{report}"
    )
    assert report == ""


def test_an_unused_function_is_reported(tmp_path: Path) -> None:
    module = tmp_path / "orphan.py"
    module.write_text(
        "def used_by_nobody(x: int) -> int:\n    return x + 1\n", encoding="utf-8"
    )
    result = run_vulture(module)
    assert result.returncode == 3, result.stdout + result.stderr  # 3: dead code found
    expected = f"{module}:1: unused function 'used_by_nobody' (60% confidence)"
    assert expected in result.stdout.splitlines(), result.stdout


def _whitelisted_names() -> set[str]:
    tree = ast.parse(WHITELIST.read_text(encoding="utf-8"))
    return {
        stmt.value.attr
        for stmt in tree.body
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Attribute)
    }


def test_the_whitelist_names_only_reported_names() -> None:
    # A line whose name vulture no longer reports (the code went away, or became used) would
    # hide a later unused definition of the same name: it must go.
    result = run_vulture(whitelist=False)
    reported = {m["name"] for line in result.stdout.splitlines() if (m := _FINDING.match(line))}
    whitelisted = _whitelisted_names()
    assert len(whitelisted) > 100
    assert whitelisted - reported == set(), "stale lines in vulture_whitelist.py"
