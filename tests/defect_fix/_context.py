"""A small stand-in for the runner's context, and a helper that runs one candidate through the
harness's own parts (test_end_to_end.py runs them through the runner, the CLI and the service)."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from triz_ri_smart_ai_evaluator.defect_fix.harness import HARNESS
from triz_ri_smart_ai_evaluator.harnesses.protocol import Outcome, RunOptions
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue
from triz_ri_smart_ai_evaluator.signal.calculator import SignalCalculator
from triz_ri_smart_ai_evaluator.signal.result import Signal

SEED = bytes(range(32))
SIZE = HARNESS.min_size


def candidates_dir() -> Path:
    from triz_ri_smart_ai_evaluator.defect_fix import repo

    return repo.starting_repo().parent / "candidates"


@dataclass
class FakeContext:
    work: Path
    bundle: Path
    seed: bytes = SEED
    attempt_id: str = "dfx-test"
    options: RunOptions = field(default_factory=RunOptions)
    stored: dict[str, bytes] = field(default_factory=dict)

    @property
    def seed_commitment(self) -> str:
        return hashlib.sha256(HARNESS.seed_tag + self.seed).hexdigest()

    def evidence(self, what: str, data: bytes, **extra: Any) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self.stored[what] = data
        return digest

    def progress(self, stage: str, done: int, total: int) -> None:
        pass


def signal_of(outcome: Outcome) -> Signal:
    """The signal under the class's current rules (pinned when they are in force)."""
    tc = load_catalogue()[HARNESS.task_class]
    started = max(datetime.now(UTC), tc.effective_from)
    return SignalCalculator(pin(tc, started_at=started)).compute(outcome.inputs)


def run_candidate(candidate: Path, *, seed: bytes = SEED, size: int = SIZE
                  ) -> tuple[Outcome, Signal, FakeContext]:
    with tempfile.TemporaryDirectory(prefix="trz-dfx-test-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        work.chmod(0o711)
        ctx = FakeContext(work, Path(tmp) / "bundle", seed=seed)
        prepared = HARNESS.prepare(candidate, work)
        controls = HARNESS.draw_controls(seed, size, frozenset())
        outcome = HARNESS.execute(ctx, prepared, controls)
        return outcome, signal_of(outcome), ctx
