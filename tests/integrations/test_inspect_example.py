"""The runnable Inspect example (examples/integrations/inspect_pilot02.py) as a user runs it:
an Inspect eval of a scripted solver on pilot 02 against a real service with the sandboxed
harness pool; the ledger holds every sample, the errored one included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "integrations" / \
    "inspect_pilot02.py"


def test_the_inspect_example_records_every_sample(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE), "--json"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    by_sample = {s["sample"]: s for s in summary["samples"]}
    assert (by_sample["reference"]["score"], by_sample["reference"]["reason"]) == (
        2.0, "verified")
    assert (by_sample["false_ui_success"]["score"], by_sample["false_ui_success"]["reason"]) \
        == (0.0, "quarantined_penalty")
    assert by_sample["breaks"]["score"] is None
    assert "broke on purpose" in by_sample["breaks"]["error"]
    ledger = summary["ledger"]
    assert ledger["ok"] is True
    records = ledger["sample_records"]
    assert set(records) == {s["attempt"] for s in summary["samples"]}, \
        "one ledger record per sample, on its own attempt"
    assert len(records) == 3
    broken = next(r for r in records.values() if r["sample_id"] == "breaks")
    assert "broke on purpose" in broken["error"]
    assert broken["scores"] == {}
    assert summary["metrics"]["mean"] == 1.0
