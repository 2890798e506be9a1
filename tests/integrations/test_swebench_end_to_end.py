"""``import-predictions`` and ``export-report`` end to end (issue 16 item 3): the real command
line, the patch-task class's real harness in the sandbox, one predictions file holding an
honest fix, a fix that edits the supplied test, a patch that does not apply and an empty
patch, each from its own model."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance._cli import cli

CLASS = "defect_fix_delayed_confirmation"
CANDIDATES = Path(__file__).resolve().parents[2] / "triz_ri_smart_ai_evaluator" / \
    "defect_fix" / "candidates"


def test_predictions_in_report_out(tmp_path: Path) -> None:
    patches = {
        "model-honest": (CANDIDATES / "honest" / "candidate.diff").read_text(),
        "model-edits-test": (CANDIDATES / "edits_test" / "candidate.diff").read_text(),
        "model-garbage": "--- a/nowhere.py\n+++ b/nowhere.py\n@@ -1 +1 @@\n-x\n+y\n",
        "model-empty": "",
    }
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps({"instance_id": CLASS, "model_patch": patch,
                                        "model_name_or_path": model}) + "\n"
                            for model, patch in patches.items()))
    done = cli(tmp_path, "attempt", "import-predictions", path, "--run-id", "r1", "--json")
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)["imported"]
    assert len(imported) == 4, "every prediction is recorded, the empty one too"

    reports = {}
    for model in patches:
        shown = cli(tmp_path, "attempt", "export-report", "--run-id", "r1", "--model", model)
        assert shown.returncode == 0, shown.stderr
        reports[model] = json.loads((tmp_path / f"{model}.r1.json").read_text())
    assert reports["model-honest"]["resolved_ids"] == [CLASS]
    assert reports["model-edits-test"]["resolved_ids"] == []
    assert reports["model-edits-test"]["unresolved_ids"] == [CLASS]
    assert reports["model-garbage"]["unresolved_ids"] == [CLASS]
    assert reports["model-garbage"]["error_ids"] == [], "the model's failure, not ours"
    assert reports["model-empty"]["empty_patch_ids"] == [CLASS]
    assert reports["model-empty"]["completed_ids"] == []
    honest = reports["model-honest"]["triz"]["instances"][CLASS]
    assert honest["reason"] == "pending_confirmation", "half of S is held in escrow"

    again = cli(tmp_path, "attempt", "import-predictions", path, "--run-id", "r1")
    assert again.returncode == 2
    assert "already holds" in again.stderr
    several = cli(tmp_path, "attempt", "export-report", "--run-id", "r1")
    assert several.returncode == 2
    assert "--model" in several.stderr
    verified = cli(tmp_path, "ledger", "verify")
    assert verified.returncode == 0, verified.stderr + verified.stdout
