"""The Inspect AI scorer against a real service and Inspect's real eval loop (issue 16 item 2):
an unscorable sample is ``Score.unscored`` (Inspect's NaN, skipped by its metrics), never 0; a
not-verified one is a real 0; a verified one its signal.  Awards come from the trusted harness
outside the service of the TRL test (by the text the solver hands in)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput
from inspect_ai.solver import Generate, TaskState, solver

from tests.integrations.test_trl_adapter import PROMPTS, OutsideHarness
from tests.service.conftest import Service, start_service
from triz_ri_smart_ai_evaluator.integrations.inspect_eval import triz_signal
from triz_ri_smart_ai_evaluator.integrations.service_access import ServiceAccess


@solver
def says_its_prompt() -> Any:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.output = ModelOutput.from_content(model="scripted", content=state.input_text)
        return state

    return solve


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    yield from start_service(tmp_path / "svc")


def test_unscorable_samples_are_unscored_not_zero(service: Service, tmp_path: Path) -> None:
    access = ServiceAccess(url=service.base_url, task_class="pilot_02_feedback_form",
                           policy_token=service.tokens["policy-1"], reader_id="trainer-1",
                           reader_key=service.folder / "principals" / "trainer-1.key",
                           wait_seconds=3)
    harness = OutsideHarness(service)
    harness.start()
    try:
        task = Task(dataset=[Sample(input=p, id=p.rstrip(":")) for p in PROMPTS],
                    solver=says_its_prompt(), scorer=triz_signal(access))
        [log] = eval(task, model="mockllm/model", log_dir=str(tmp_path / "logs"),
                     display="none")
    finally:
        harness.stop.set()
        harness.join(timeout=10)
    assert log.status == "success"
    scores = {s.id: s.scores["triz_signal"] for s in log.samples or [] if s.scores}
    assert scores["honest"].value == 2.0
    assert scores["unverified"].value == 0.0
    unscored = scores["unscorable"]
    assert math.isnan(unscored.value), "unscorable is Inspect's NaN, not 0"
    assert unscored.reason == "pending"
    assert unscored.metadata["triz_attempt_id"] == unscored.answer
    assert harness.handled[unscored.answer] == "unscorable:"
    # Inspect's mean skips the unscored sample: (2 + 0) / 2, where a 0 would give 2/3
    [result] = log.results.scores if log.results else []
    assert result.metrics["mean"].value == pytest.approx(1.0)
