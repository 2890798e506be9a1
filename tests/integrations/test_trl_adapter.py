"""The TRL reward function against a real service and TRL's real GRPO trainer (issue 16 item 2):
an unscorable attempt reaches TRL as ``None`` (TRL's NaN, advantage 0), never as 0, while a
not-verified attempt is a real 0 and a verified one its signal.

The service runs for real (uvicorn, SQLite ledger) with pilot 02's rules published in training
mode through the owner's port.  The awards come from a trusted harness outside the service, as
the service allows one: a thread that reads new attempts through the owner's port and
evaluates each through the harness's signed port.  What it does is set by the prompt the
completion answers: ``honest:`` gets the honest example's evidence, ``unverified:`` an award
with no measurements, ``unscorable:`` nothing at all (it stays pending past the wait).
"""

from __future__ import annotations

import base64
import importlib.util
import math
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service.conftest import Service, start_service
from tests.service.test_owner_loop_control import serve_training_rules
from tests.service.test_rework_service import _evaluate
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.integrations.trl import completion_text, make_trl_reward

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "integrations" / "trl_grpo.py"
PROMPTS = ["honest:", "unverified:", "unscorable:"]


def _example() -> Any:
    if str(EXAMPLE.parent) not in sys.path:  # the example imports its sibling _service
        sys.path.insert(0, str(EXAMPLE.parent))
    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class OutsideHarness(threading.Thread):
    """A trusted harness outside the service: evaluates each new attempt by its prompt."""

    def __init__(self, service: Service) -> None:
        super().__init__(daemon=True)
        self.service = service
        self.stop = threading.Event()
        self.seen = 1
        self.handled: dict[str, str] = {}

    def run(self) -> None:
        with self.service.trusted(Role.OWNER) as owner:
            while not self.stop.wait(0.1):
                page = owner.request("ledger", "read", {"start": self.seen, "limit": 1000})
                for event in page["events"]:
                    self.seen = event["seq"] + 1
                    if event["kind"] == "attempt.initiated":
                        self._handle(owner, event["attempt"])

    def _handle(self, owner: Any, attempt: str) -> None:
        sub = owner.request("submissions", "read", {"attempt_id": attempt})
        text = base64.b64decode(sub["artefact_b64"]).decode()
        kind = next(p for p in PROMPTS if text.startswith(p))
        self.handled[attempt] = kind
        if kind == "honest:":
            _evaluate(self.service, attempt, "pilot_02_honest")
        elif kind == "unverified:":
            with self.service.trusted(Role.HARNESS) as harness:
                harness.request("awards_and_signals", "append",
                                {"attempt_id": attempt, "inputs": {}})


@pytest.fixture
def training(tmp_path: Path) -> Iterator[Service]:
    for service in start_service(tmp_path / "svc"):
        with service.trusted(Role.OWNER) as owner:
            serve_training_rules(service.runtime, owner)
        yield service


def _reward(service: Service, **kwargs: Any) -> Any:
    return make_trl_reward(
        service.base_url, task_class="pilot_02_feedback_form",
        policy_token=service.tokens["policy-1"], trainer_id="trainer-1",
        trainer_key=service.folder / "principals" / "trainer-1.key",
        to_artefact=lambda prompt, text: f"{prompt}{text}".encode(), **kwargs)


def test_unscorable_reaches_trl_as_none_and_not_verified_as_zero(training: Service) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    harness = OutsideHarness(training)
    harness.start()
    try:
        reward = _reward(training, wait_seconds=4)
        model, tokenizer = _example().tiny_model()
        args = GRPOConfig(output_dir=str(training.folder / "grpo"), max_steps=2,
                          per_device_train_batch_size=6, num_generations=2,
                          max_completion_length=6, logging_steps=1, report_to=[],
                          use_cpu=True, bf16=False, save_strategy="no", disable_tqdm=True)
        trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args,
                              train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
                              processing_class=tokenizer)
        trainer.train()
    finally:
        harness.stop.set()
        harness.join(timeout=10)

    # TRL's own per-completion record of the last batch: the reward it used and the advantage.
    logs = trainer._logs
    rows = list(zip(logs["extra"]["triz_attempt_id"], logs["extra"]["triz_reason"],
                    logs["rewards"][reward.__name__], logs["advantages"], strict=True))
    assert len(rows) == 6
    kinds = {harness.handled[attempt] for attempt, *_ in rows}
    assert kinds == set(PROMPTS), "every kind of attempt is in the batch"
    for attempt, reason, value, advantage in rows:
        kind = harness.handled[attempt]
        if kind == "unscorable:":
            assert reason == "pending"
            assert math.isnan(value), "None reached TRL as its NaN, not as 0"
            assert advantage == 0.0, "an unscorable completion does not move the policy"
        elif kind == "unverified:":
            assert (reason, value) == ("not_verified", 0.0), "a real zero stays zero"
        else:
            assert (reason, value) == ("verified", 2.0)
    unscorable = [h["triz/unscorable_fraction"] for h in trainer.state.log_history
                  if "triz/unscorable_fraction" in h]
    assert unscorable == [pytest.approx(1 / 3)] * 2
    # TRL's per-step mean ignores the NaN: (2 + 2 + 0 + 0) / 4 = 1, where a 0 would give 2/3.
    means = [h["rewards/triz_signal/mean"] for h in trainer.state.log_history
             if "rewards/triz_signal/mean" in h]
    assert means == [pytest.approx(1.0)] * 2


def test_the_reward_is_a_plain_function_trl_calls_synchronously(training: Service) -> None:
    from trl.trainer.utils import is_async_callable

    reward = _reward(training, wait_seconds=0)
    assert not is_async_callable(reward)
    assert reward.__name__ == "triz_signal"
    got = reward(prompts=["unscorable:"], completions=[[{"role": "assistant",
                                                         "content": "x"}]])
    assert got == [None]


def test_completion_text_takes_strings_and_conversations() -> None:
    assert completion_text("abc") == "abc"
    assert completion_text([{"role": "user", "content": "q"},
                            {"role": "assistant", "content": "a"}]) == "a"
    with pytest.raises(TypeError):
        completion_text(42)
