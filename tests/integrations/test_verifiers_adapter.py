"""The verifiers v1 reward against a real service and verifiers' real scoring boundary
(issue 16 item 2): a task's ``@vf.reward`` that awaits our reward gets a verified signal, a
real 0 for a not-verified attempt, and for an unscorable one an exception that verifiers
records as the rollout's ``TaskError``, with the trace's reward left ``None``, never 0."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import verifiers.v1 as vf
from verifiers.v1.errors import TaskError
from verifiers.v1.task import TaskData
from verifiers.v1.trace import AgentInfo, Trace, TraceTask

from tests.integrations.test_verl_openrlhf_contract import world  # noqa: F401 - fixture
from triz_ri_smart_ai_evaluator.integrations.verifiers_v1 import verifiers_reward


class Answer(TaskData):
    completion: str = ""


def _task(access: Any, *, text_of: Any = None) -> Any:
    kwargs = {} if text_of is None else {"text_of": text_of}
    triz = verifiers_reward(access, **kwargs)

    class FeedbackForm(vf.Task[Answer]):
        @vf.reward
        async def triz_signal(self, task: Any, trace: Any) -> float:
            return await triz(task, trace)

    return FeedbackForm


def _score(task_type: Any, completion: str) -> Trace:
    task = task_type(Answer(completion=completion))
    trace = Trace(task=TraceTask(type="FeedbackForm", data=task.data),
                  agent=AgentInfo(config={}))
    asyncio.run(task.score(trace))
    return trace


def test_verified_and_not_verified_are_numbers(world: Any) -> None:  # noqa: F811
    _, access = world
    task_type = _task(access, text_of=lambda task, trace: task.completion)
    honest = _score(task_type, "honest: a")
    assert honest.rewards["triz_signal"].score == 2.0
    unverified = _score(task_type, "unverified: b")
    assert unverified.rewards["triz_signal"].score == 0.0, "a real zero stays zero"


def test_unscorable_is_a_task_error_and_no_reward(world: Any) -> None:  # noqa: F811
    _, access = world
    task_type = _task(access, text_of=lambda task, trace: task.completion)
    task = task_type(Answer(completion="unscorable: c"))
    trace = Trace(task=TraceTask(type="FeedbackForm", data=task.data),
                  agent=AgentInfo(config={}))
    with pytest.raises(TaskError, match="pending"):
        asyncio.run(task.score(trace))
    assert trace.rewards["triz_signal"] is None, "verifiers keeps it unscored, not 0"


def test_a_trace_without_an_answer_is_refused_not_scored_empty(world: Any) -> None:  # noqa: F811
    service, access = world
    before = sum(e["kind"] == "attempt.initiated" for e in service.events())
    with pytest.raises(TaskError, match="no assistant message"):
        _score(_task(access), "ignored")
    assert sum(e["kind"] == "attempt.initiated" for e in service.events()) == before
