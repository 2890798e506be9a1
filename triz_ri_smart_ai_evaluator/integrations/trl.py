"""A reward function for TRL's trainers (GRPO, RLOO, ...) backed by the evaluator service
(issue 16 item 2; docs/integrations.md).

TRL calls ``reward_func(prompts=..., completions=..., completion_ids=..., **columns)`` and
takes one ``float | None`` per completion.  Since TRL 1.6, ``None`` means "unscorable": TRL
turns it into NaN, leaves it out of the group baseline and gives it no advantage, where a 0
would teach the policy that the sample was bad.  The function this module makes:

1. hands each completion in through the policy port, as the evaluated policy's artefact
   (``to_artefact`` turns a prompt and a completion into the bytes the task class takes);
2. asks the rewards API for one result per attempt, waiting up to ``wait_seconds``;
3. returns each ``reward`` as it came: a number, or ``None`` with the reason logged.  It never
   turns ``None`` into 0, and a real 0 (not verified) stays 0.

It logs the attempt id and the reason of each completion as extra columns of TRL's completions
table (``triz_attempt_id``, ``triz_reason``), and the unscorable fraction of each batch as the
metric ``triz/unscorable_fraction``.

The function is a plain ``def``: TRL's check for an asynchronous reward function also looks at
an object's ``async __call__``.  A blocking call is what TRL expects of a synchronous reward.
Nothing here imports TRL; the ``trl`` extra installs it for the examples and tests.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..service.client import PolicyClient, TrustedClient
from ..service.config import load_principal_key

#: ``to_artefact(prompt, completion_text)`` -> the artefact bytes the task class takes.
ToArtefact = Callable[[Any, str], bytes]


def completion_text(completion: Any) -> str:
    """The text of a completion: a string as it is, or the content of a conversational
    completion's last message (TRL passes ``[{"role": "assistant", "content": ...}]``)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        last = completion[-1]
        content = last.get("content") if isinstance(last, dict) else None
        if isinstance(content, str):
            return content
    raise TypeError(f"a completion is a string or a list of messages, not "
                    f"{type(completion).__name__}")


def _utf8(_prompt: Any, text: str) -> bytes:
    return text.encode("utf-8")


def make_trl_reward(service_url: str, *, task_class: str, policy_token: str,
                    trainer_id: str, trainer_key: Path,
                    to_artefact: ToArtefact = _utf8, wait_seconds: float = 120.0,
                    purpose: str = "training", name: str = "triz_signal",
                    timeout: float = 30.0) -> Callable[..., list[float | None]]:
    """A TRL reward function over the service at ``service_url`` (see the module docstring).

    ``policy_token`` is the bearer token of the evaluated-policy client the completions are
    handed in as; ``trainer_id`` and ``trainer_key`` (a key file of ``service init``) are the
    training consumer whose ``runs`` include that client.  The clients are opened once and
    reused for every batch.
    """
    policy = PolicyClient(service_url, policy_token, timeout=timeout)
    trainer = TrustedClient(service_url, trainer_id, "training_consumer",
                            load_principal_key(trainer_key), timeout=timeout)

    def reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        attempts = [policy.submit(task_class, to_artefact(prompt, completion_text(c)))
                    for prompt, c in zip(prompts, completions, strict=True)]
        # One key per batch: a retry of this call after a lost answer gets the same rewards.
        key = f"trl-{secrets.token_hex(12)}"
        results = trainer.rewards(attempts, idempotency_key=key, wait_seconds=wait_seconds,
                                  purpose=purpose)
        if [r["attempt_id"] for r in results] != attempts:
            raise RuntimeError("the rewards API answered for other attempts than asked")
        rewards: list[float | None] = [r["reward"] for r in results]
        log_extra, log_metric = kwargs.get("log_extra"), kwargs.get("log_metric")
        if callable(log_extra):
            log_extra("triz_attempt_id", attempts)
            log_extra("triz_reason", [r["reason"] for r in results])
        if callable(log_metric) and rewards:
            log_metric("triz/unscorable_fraction",
                       sum(r is None for r in rewards) / len(rewards))
        return rewards

    reward.__name__ = name
    reward.__qualname__ = name
    return reward
