"""The rooms keep their layers: the import-linter contracts of ``.importlinter`` hold (DESIGN.md,
"Components and their rooms"; issue 14 item 3), and a broken contract is reported as broken.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / ".importlinter"
PACKAGE = "triz_ri_smart_ai_evaluator"


def lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    """Run the venv's ``lint-imports`` on ``config`` from the repository root, without a cache
    (so a stale graph can neither pass nor fail a run) and with wide lines (so a chain of
    imports is printed on one line each)."""
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.fail(f"{exe} is missing: install the dev extras (bash scripts/setup.sh)")
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [str(exe), "--no-cache", "--no-logo", str(config)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )


def test_the_layer_contracts_hold() -> None:
    result = lint_imports(CONFIG)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert " 0 broken" in out, out
    # Every contract of the file was checked, none skipped.
    declared = CONFIG.read_text(encoding="utf-8").count("[importlinter:contract:")
    assert declared >= 9
    assert f"Contracts: {declared} kept, 0 broken." in out, out


def test_the_pure_core_contracts_name_httpx_and_yaml() -> None:
    # The contract that keeps HTTP and YAML out of the signal calculator and the verdict state
    # machine must stay in the file, with both packages forbidden.
    parser = configparser.ConfigParser()
    parser.read(CONFIG, encoding="utf-8")
    contract = parser["importlinter:contract:pure-core-no-io-packages"]
    assert contract["type"] == "forbidden"
    assert {"httpx", "yaml"} <= set(contract["forbidden_modules"].split())
    sources = set(contract["source_modules"].split())
    for source in ("signal", "rules.versions", "verifier.gate", "verifier.verdict"):
        assert f"{PACKAGE}.{source}" in sources
    assert parser["importlinter"]["include_external_packages"] == "True"


def test_a_violated_contract_fails(tmp_path: Path) -> None:
    # DESIGN lets the ledger import signal (recompute), so "ledger must not import signal" is
    # violated today: lint-imports must say so and exit non-zero, or the passing run above
    # proves nothing.
    config = tmp_path / "violated.ini"
    config.write_text(
        "[importlinter]\n"
        f"root_package = {PACKAGE}\n"
        "\n"
        "[importlinter:contract:ledger-without-signal]\n"
        "name = ledger does not import signal\n"
        "type = forbidden\n"
        f"source_modules = {PACKAGE}.ledger\n"
        f"forbidden_modules = {PACKAGE}.signal\n",
        encoding="utf-8",
    )
    result = lint_imports(config)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "ledger does not import signal BROKEN" in out, out
    assert f"{PACKAGE}.ledger is not allowed to import {PACKAGE}.signal" in out, out


def test_the_pure_core_would_fail_if_the_gate_imported_the_http_client(tmp_path: Path) -> None:
    # The same check on a copy of the package where the gate imports the httpx client again
    # (the import this issue removed): the pure-core contracts must break on it.
    copy = tmp_path / "src"
    pkg = copy / PACKAGE
    for path in (REPO / PACKAGE).rglob("*.py"):
        target = pkg / path.relative_to(REPO / PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    gate = pkg / "verifier" / "gate.py"
    text = gate.read_text(encoding="utf-8")
    anchor = "from .chat import ChatModel, VerifierCrashed\n"
    assert anchor in text
    gate.write_text(text.replace(anchor, anchor + "from .client import ChatClient  # noqa\n"),
                    encoding="utf-8")
    exe = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1",
           "PYTHONPATH": str(copy)}
    result = subprocess.run(
        [str(exe), "--no-cache", "--no-logo", str(CONFIG),
         "--contract", "pure-core-no-io-modules", "--contract", "pure-core-no-io-packages"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert f"{PACKAGE}.verifier.gate is not allowed to import {PACKAGE}.verifier.client" in out
    assert f"{PACKAGE}.verifier.gate is not allowed to import httpx" in out, out
