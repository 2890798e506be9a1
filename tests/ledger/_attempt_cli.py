"""Helpers shared by the attempt tests of issue 10: ``triz-eval`` (run in process, see
``tests/_inprocess.py``) on a real SQLite ledger, and inputs whose every evidence digest is a
stored blob."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.signal import AttemptInputs

from .._inprocess import run_cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "signal"
EVIDENCE = EXAMPLES / "evidence"
PILOT = "pilot_02_feedback_form"


@dataclass
class Home:
    """A ledger folder for the CLI: database and log keys."""

    root: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "TRIZ_EVAL_DB": str(self.root / "ledger.db"),
                "TRIZ_EVAL_KEYS": str(self.root / "keys"), "COLUMNS": "200"}

    def run(self, *args: str | Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
        proc = run_cli(*args, env=self.env, cwd=self.root)
        if ok:
            assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc

    def evaluate(self, example: str, attempt_id: str, *extra: str | Path) -> dict[str, Any]:
        """``attempt evaluate --json`` of a bundled example; the parsed answer."""
        proc = self.run("attempt", "evaluate", "-t", PILOT, "-i", EXAMPLES / f"{example}.json",
                        "--attempt-id", attempt_id, "--json", *extra)
        answer = json.loads(proc.stdout)
        assert isinstance(answer, dict)
        return answer

    def events(self, attempt_id: str) -> list[dict[str, Any]]:
        """The attempt's events, parsed, in ledger order."""
        from triz_ri_smart_ai_evaluator.ledger.log import open_sqlite_ledger

        ledger = open_sqlite_ledger(self.root / "ledger.db", read_only=True)
        try:
            return [e.fields for e in ledger.attempt_events(attempt_id)]
        finally:
            ledger.close()


def make_home(tmp_path: Path) -> Home:
    home = Home(tmp_path)
    home.run("ledger", "init")
    return home


def example(name: str) -> dict[str, Any]:
    doc = json.loads((EXAMPLES / f"{name}.json").read_text("utf-8"))
    assert isinstance(doc, dict)
    return doc


def cited(inputs: AttemptInputs) -> set[str]:
    """Every evidence digest the inputs cite."""
    digests: set[str] = set()
    for group in (inputs.measurements, inputs.checklist, inputs.self_checks):
        for item in group.values():
            digests.update(item.evidence)
    for obstacle in inputs.obstacles:
        digests.update(obstacle.evidence)
    return digests


def with_stored_evidence(store: LedgerStore, attempt_id: str, inputs: AttemptInputs, *,
                         actor: str | None = None) -> AttemptInputs:
    """The same inputs, each digest replaced by the digest of a blob stored for
    ``attempt_id`` with an ``evidence.stored`` event by the item's source (or ``actor``)."""

    def stored(label: str, source: str) -> tuple[str, ...]:
        data = f"{attempt_id}:{label}".encode()
        digest = store.put_evidence(data)
        store.append([NewEvent.make(EventKind.EVIDENCE_STORED,
                                    {"what": label, "digest": digest, "size": len(data)},
                                    actor=actor or source, at="2026-12-01T10:00:00.000000Z",
                                    attempt=attempt_id)])
        return (digest,)

    doc = inputs.model_dump(mode="json")
    for what in ("measurements", "checklist", "self_checks"):
        for key, item in doc[what].items():
            if item["evidence"]:
                item["evidence"] = list(stored(f"{what}.{key}", item["source"]))
    for n, obstacle in enumerate(doc["obstacles"]):
        if obstacle["evidence"]:
            obstacle["evidence"] = list(stored(f"obstacle.{n}", obstacle["recorded_by"]))
    return AttemptInputs.model_validate(doc)
