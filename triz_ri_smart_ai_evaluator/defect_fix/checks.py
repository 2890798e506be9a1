"""What the harness runs: pytest on two run trees in the sandbox, the candidate served under
gunicorn, and ruff on the changed files (static, on the host: ruff parses, never imports).

The run trees are copies made for this run only: the candidate's tree with every supplied test
restored byte for byte (so an edited or deleted test is measured as supplied, and reported as
edited by ``tests_unmodified``), and a copy of the starting repository; each gets the hidden
reproduction test under a folder name drawn for the run, and the candidate's own added tests.
pytest starts isolated (``-I``, ``--noconftest``, the harness's own ini file), so no file of the
candidate changes how the tests are collected or run.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..sandbox import Limits, Sandbox, SandboxedProcess, SandboxError, wait_for_port
from . import repo, traffic
from .traffic import Exchange

TEST_LIMITS = Limits(memory_bytes=1024**3, max_pids=128)
TEST_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
INI_NAME = "harness_pytest.ini"
INI = b"[pytest]\npythonpath = .\n"
TEST_TIMEOUT = 120.0
#: One line of ``pytest -v``: a node id and its outcome.
TEST_LINE = re.compile(
    r"^(\S+?\.py::.+?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: +\[ *\d+%\])?$", re.M)
CASE_ID = re.compile(r"::test_reproduction\[(r\d+)\]$")
WSGI_APP = "quote_service:create_app()"
RUFF_FORMAT = "json"


@functools.cache
def supplied_nodes() -> tuple[str, ...]:
    """The node ids of the supplied tests, collected once from our bundled starting
    repository (trusted code, never the candidate's)."""
    # -c and --rootdir: no ini file of an enclosing project may apply.
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
            "-c", os.devnull, "--rootdir", ".", "tests/"]
    proc = subprocess.run(argv, cwd=repo.starting_repo(), capture_output=True,  # noqa: S603
                          text=True, timeout=120, check=False, env={**os.environ, **TEST_ENV})
    nodes = tuple(line.strip() for line in proc.stdout.splitlines()
                  if line.startswith("tests/") and "::" in line)
    if not nodes:
        raise InputError("cannot collect the starting repository's tests: "
                         f"{proc.stderr[-300:]}")
    return nodes


@dataclass(frozen=True, slots=True)
class TestRuns:
    """Outcomes by node id (case id for the hidden test), and every run's output."""

    regression: dict[str, str]
    hidden_candidate: dict[str, str]
    hidden_base: dict[str, str]
    added_candidate: dict[str, str]
    added_base: dict[str, str]
    log: bytes


def _readable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | (0o005 if path.is_dir() else 0o004))


def _run_tree(source: Path, target: Path, *, restore: Mapping[str, bytes],
              extra: Mapping[str, bytes]) -> None:
    repo.copy_tree(source, target)
    for rel, data in {**restore, **extra}.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (target / INI_NAME).write_bytes(INI)
    _readable(target)


def _pytest(box: Sandbox, tree: Path, paths: Sequence[str]) -> SandboxedProcess:
    argv = [box.python, "-I", "-m", "pytest", "-v", "--noconftest", "-c", INI_NAME,
            "-p", "no:cacheprovider", *paths]
    return box.start(argv, code_dir=tree, env=TEST_ENV, limits=TEST_LIMITS,
                     wall_timeout=TEST_TIMEOUT)


def _outcomes(proc: SandboxedProcess, name: str, log: list[bytes]) -> dict[str, str]:
    proc.wait(TEST_TIMEOUT + 10)
    ended = proc.stop()
    out, err = proc.read_output()
    log.append(f"=== {name}: {ended.ended}, exit {ended.exit_code}\n".encode() + out
               + b"\n--- stderr ---\n" + err + b"\n")
    found: dict[str, str] = {}
    for node, outcome in TEST_LINE.findall(out.decode("utf-8", "replace")):
        found.setdefault(node, outcome)
    return found


def _split(found: Mapping[str, str], hidden: str) -> tuple[dict[str, str], dict[str, str]]:
    """(hidden case id -> outcome, other node -> outcome)."""
    cases, other = {}, {}
    for node, outcome in found.items():
        match = CASE_ID.search(node)
        if node.startswith(hidden + "/") and match:
            cases[match.group(1)] = outcome
        elif not node.startswith(hidden + "/"):
            other[node] = outcome
    return cases, other


def run_tests(box: Sandbox, work: Path, tree: Path, reproduction: Sequence[Mapping[str, Any]],
              scope: repo.Scope, changes: repo.Changes) -> TestRuns:
    """The supplied suite on the candidate; the hidden reproduction and the candidate's added
    tests on the candidate and on the starting repository."""
    base = repo.starting_repo()
    supplied = {rel: (base / rel).read_bytes() for rel in repo.supplied_tests(
        repo.tree_entries(base), scope)}
    hidden = f"hidden_{secrets.token_hex(4)}"  # a name the candidate cannot know in advance
    hidden_files = {
        f"{hidden}/test_reproduction.py": (repo.hidden_dir() / "test_reproduction.py"
                                           ).read_bytes(),
        f"{hidden}/cases.json": json.dumps(list(reproduction), indent=1).encode()}
    added = {rel: (tree / rel).read_bytes() for rel in changes.tests_added}
    on_candidate, on_base = work / "run-candidate", work / "run-base"
    _run_tree(tree, on_candidate, restore=supplied, extra=hidden_files)
    _run_tree(base, on_base, restore={}, extra={**hidden_files, **added})
    targets = [hidden, *changes.tests_added]
    log: list[bytes] = []
    first = [_pytest(box, on_candidate, targets), _pytest(box, on_base, targets)]
    cand_found = _outcomes(first[0], "hidden and added tests, candidate", log)
    base_found = _outcomes(first[1], "hidden and added tests, starting repository", log)
    suite = sorted({n.split("::")[0] for n in supplied_nodes()})
    regression = _outcomes(_pytest(box, on_candidate, suite), "supplied tests, candidate", log)
    hidden_candidate, added_candidate = _split(cand_found, hidden)
    hidden_base, added_base = _split(base_found, hidden)
    return TestRuns(
        regression={n: regression.get(n, "NOT RUN") for n in supplied_nodes()},
        hidden_candidate=hidden_candidate, hidden_base=hidden_base,
        added_candidate=added_candidate, added_base=added_base, log=b"".join(log))


@dataclass(frozen=True, slots=True)
class Served:
    traffic: list[Exchange]
    probe: list[Exchange]
    app_outcome: dict[str, Any]
    output: bytes


def serve_and_drive(box: Sandbox, tree: Path, ordered: Sequence[Mapping[str, Any]], seed: bytes,
                    start_timeout: float) -> Served:
    """Serve the candidate's own tree (never the run trees: no hidden file is in it), send the
    ordinary traffic, then the explicit probe."""
    app = box.start_gunicorn(tree, WSGI_APP, workers=2, wall_timeout=600)
    try:
        _wait_serving(box, app, start_timeout)
        host, port = box.app_address, box.app_port
        ordinary = traffic.ordinary_traffic(host, port, ordered, seed)
        probe = traffic.explicit_probe(host, port, ordered)
    finally:
        ended = app.stop()
        out, err = app.read_output()
    return Served(ordinary, probe, {"ended": ended.ended, "exit_code": ended.exit_code,
                                    "oom_killed": ended.oom_killed},
                  out + b"\n--- stderr (gunicorn, access log) ---\n" + err)


def _wait_serving(box: Sandbox, app: SandboxedProcess, timeout: float) -> None:
    """Until ``GET /health`` answers (gunicorn listens before its workers import the app).
    Raises InputError naming how the candidate ended otherwise."""
    deadline = time.monotonic() + timeout
    try:
        wait_for_port(box.app_address, box.app_port, timeout, process=app)
        while not _healthy(box):
            if app.poll() is not None:
                raise SandboxError("the application exited before it answered")
            if time.monotonic() > deadline:
                raise SandboxError(f"no HTTP answer within {timeout} s")
            time.sleep(0.05)
    except SandboxError as e:
        _, err = app.read_output()
        tail = " | ".join(err.decode("utf-8", "replace").strip().splitlines()[-2:])
        raise InputError(f"the candidate never started ({e.message}){'; ' + tail if tail else ''}"
                         ) from e


def _healthy(box: Sandbox) -> bool:
    import http.client  # noqa: PLC0415 - only the readiness check needs it

    conn = http.client.HTTPConnection(box.app_address, box.app_port, timeout=1.0)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


@dataclass(frozen=True, slots=True)
class Static:
    """Ruff findings per ``file:code`` on the changed Python files, base and candidate; the
    new ones per file (None when ruff could not be run: not measured)."""

    base: dict[str, int]
    candidate: dict[str, int]
    new: dict[str, int] | None
    error: str | None = None


def _ruff(tree: Path, files: Sequence[str], config: Path) -> Counter[str]:
    ruff = Path(sys.executable).parent / "ruff"
    exe = str(ruff) if ruff.exists() else shutil.which("ruff")
    if exe is None:
        raise OSError("ruff is not installed")
    present = [f for f in files if (tree / f).is_file()]
    if not present:
        return Counter()
    proc = subprocess.run(  # noqa: S603 - fixed argv; ruff parses the files, never runs them
        [exe, "check", "--no-cache", "--config", str(config), "--output-format", RUFF_FORMAT,
         "--exit-zero", *present], cwd=tree, capture_output=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise OSError(proc.stderr.decode("utf-8", "replace")[-300:])
    found = json.loads(proc.stdout or b"[]")
    return Counter(f"{Path(f['filename']).relative_to(tree.resolve()).as_posix()}:{f['code']}"
                   for f in found)


def static_findings(base: Path, tree: Path, changes: repo.Changes) -> Static:
    """spec: "no new findings on changed files": ruff under the starting repository's own
    ``ruff.toml`` (never the candidate's), base against candidate."""
    files = [f for f in (*changes.added, *changes.modified) if f.endswith(".py")]
    config = base / "ruff.toml"
    try:
        before, after = _ruff(base, files, config), _ruff(tree, files, config)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return Static({}, {}, None, f"{type(e).__name__}: {e}")
    new = {key: count - before[key] for key, count in after.items() if count > before[key]}
    return Static(dict(before), dict(after), new)
