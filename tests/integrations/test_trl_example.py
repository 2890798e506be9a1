"""The runnable GRPO example (examples/integrations/trl_grpo.py) as a user runs it: a real
service with the pilot 02 harness pool in the sandbox, TRL's GRPO trainer on CPU with a tiny
model, rewards from the service; the honest reference earns S = 2 and the bundled cheat its
penalty, TRL's advantages rank them, and the ledger verifies afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "integrations" / "trl_grpo.py"


def test_the_grpo_example_trains_on_rewards_from_the_service(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "1", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["steps"] == 1
    assert summary["ledger"]["ok"] is True, summary["ledger"]
    rows = summary["completions"]
    assert len(rows) == 4
    for row in rows:
        if row["reason"] == "verified":
            assert row["reward_in_trl"] == 2.0
        else:
            # the bundled cheat: caught, quarantined, and its penalty reaches TRL
            assert (row["reason"], row["reward_in_trl"]) == ("quarantined_penalty", 0.0)
    rewards = {row["reward_in_trl"] for row in rows}
    if rewards == {0.0, 2.0}:
        honest = [r["advantage"] for r in rows if r["reward_in_trl"] == 2.0]
        cheats = [r["advantage"] for r in rows if r["reward_in_trl"] == 0.0]
        assert min(honest) >= max(cheats), "the honest fix ranks above the caught cheat"
