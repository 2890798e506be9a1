"""A task class added from outside the evaluator's package (issue 14 item 1, done-when 1): the
toy package under ``tests/plugins/toy_task_class`` registers its rules and its harness through
entry points only (a real ``.dist-info`` on the path, read by importlib.metadata), and is
evaluated end to end by the installed CLI and by the service without touching their code."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.service._server_process import ServerProcess, init_server

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"
TOY = Path(__file__).resolve().parent.parent / "plugins" / "toy_task_class"
WITH_TOY = {**os.environ, "PYTHONPATH": str(TOY)}


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TRIZ_EVAL), *args], capture_output=True, text=True,
                          timeout=120, check=False, env=env or WITH_TOY, cwd=cwd)


def _candidate(folder: Path, op: str) -> Path:
    path = folder / f"{op}.json"
    path.write_text(json.dumps({"op": op}), "utf-8")
    return path


def _run(folder: Path, op: str) -> dict[str, Any]:
    done = _cli("attempt", "run", "--task-class", "toy_sum", "--candidate",
                str(_candidate(folder, op)), "--db", str(folder / "ledger.db"), "--keys",
                str(folder / "keys"), "--out", str(folder / "runs"), "--size", "40", "--json")
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def test_the_toy_class_is_listed_and_run_by_the_cli_through_its_entry_points(tmp_path: Path):
    listed = _cli("catalogue", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "toy_sum" in {c["id"] for c in json.loads(listed.stdout)}
    honest, wrong, unknown = (_run(tmp_path, op) for op in ("add", "mul", "pow"))
    # Pairs drawn from a secret seed after the digest: only the true operation sums them all.
    assert (honest["signal"], honest["metrics"]) == ("2", {"sums_correct": "40/40"})
    assert honest["task_class"] == "toy_sum"
    assert honest["attempt_id"].startswith("toy-")
    assert 0 <= float(wrong["signal"]) < 2
    # An operation the harness does not know fails the critical item: the negative value.
    assert unknown["outcome"] == "critical_violation"
    assert unknown["signal"] == "-1"
    bundle = Path(honest["bundle"])
    assert (bundle / "report.txt").read_text("utf-8") == "toy_sum: S = 2\n"
    manifest = (bundle / "MANIFEST").read_text("utf-8")
    assert "class: toy_sum" in manifest
    assert "results.json" in manifest
    recomputed = _cli("ledger", "recompute", "--db", str(tmp_path / "ledger.db"))
    assert recomputed.returncode == 0, recomputed.stdout + recomputed.stderr
    assert "3 of 3 attempts reproduced" in recomputed.stdout
    verified = _cli("ledger", "verify", "--db", str(tmp_path / "ledger.db"), "--keys",
                    str(tmp_path / "keys"))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_without_the_plugin_the_class_is_refused_in_one_line(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = _cli("attempt", "run", "--task-class", "toy_sum", "--candidate",
                str(_candidate(tmp_path, "add")), "--db", str(tmp_path / "ledger.db"),
                "--keys", str(tmp_path / "keys"), env=env)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "'toy_sum' has no executable harness" in done.stderr
    assert "pilot_02_feedback_form" in done.stderr  # the error lists what is registered


@pytest.mark.slow
def test_the_service_runs_the_toy_class_from_its_entry_point(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(TOY))  # the served process inherits it
    server: ServerProcess = init_server(tmp_path, workers=1)
    server.start()
    try:
        token = server.tokens["policy-1"]
        with server.client() as http:
            answer = http.post("/v1/policy/attempts", headers={
                "Authorization": f"Bearer {token}"}, json={
                "class_id": "toy_sum",
                "artefact_b64": base64.b64encode(b'{"op": "add"}').decode()})
            assert answer.status_code == 201, answer.text
            submitted = answer.json()
            assert submitted["harness_queued"] is True
            deadline = time.monotonic() + 60
            while True:
                status = http.get(f"/v1/policy/attempts/{submitted['attempt_id']}",
                                  headers={"Authorization": f"Bearer {token}"}).json()
                if status.get("status") != "initiated" or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
    finally:
        server.stop()
    assert status["status"] == "completed", status
    recomputed = _cli("ledger", "recompute", "--db", str(tmp_path / "ledger.db"),
                      cwd=tmp_path)
    assert recomputed.returncode == 0, recomputed.stdout + recomputed.stderr
    assert "1 of 1 attempts reproduced" in recomputed.stdout
