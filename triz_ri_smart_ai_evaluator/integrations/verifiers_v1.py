"""verifiers v1: a reward backed by the evaluator service that raises on unscorable (issue 16
item 2; docs/integrations.md).

In verifiers v1 a task's rewards are ``@vf.reward`` methods ``(self, task, trace) -> float``,
run inside the framework's error boundary.  An exception there becomes a ``TaskError`` recorded
on the trace: the rollout is marked errored and its reward stays ``None``, and it is not
trained on.  That is exactly "unscorable", so the reward made here raises
:class:`~.service_access.Unscorable` whenever the evaluator holds no number.  It never returns
a made-up 0, and a real 0 (not verified, a caught cheat's penalty) is returned as 0.0.

    triz = verifiers_reward(access)

    class FeedbackFormTask(vf.Task[FormData]):
        @vf.reward
        async def triz_signal(self, task, trace) -> float:
            return await triz(task, trace)

The text handed in is the trace's last assistant message, or ``text_of(task, trace)``.  A
trace without one is refused (a ``ValueError``, which verifiers records as the rollout's
error), not scored as an empty answer.  Nothing here imports verifiers until a reward runs; the
``verifiers`` extra installs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .service_access import ServiceAccess, unscorable

TextOf = Callable[[Any, Any], str]


def last_assistant_text(_task: Any, trace: Any) -> str:
    """The text of the trace's last assistant message.  Raises ValueError when it has none."""
    from verifiers.v1.types import content_text  # noqa: PLC0415

    messages = list(trace.assistant_messages)
    if not messages:
        raise ValueError("the trace has no assistant message to hand in")
    return str(content_text(messages[-1].content))


def verifiers_reward(access: ServiceAccess, *, text_of: TextOf = last_assistant_text,
                     purpose: str = "training") -> Callable[[Any, Any], Awaitable[float]]:
    """An async ``(task, trace) -> float`` for a ``@vf.reward`` method (see the module
    docstring)."""

    async def triz_signal(task: Any, trace: Any) -> float:
        text = text_of(task, trace)
        [result] = await asyncio.to_thread(access.score, [task], [text],
                                           key=f"verifiers-{trace.id}", purpose=purpose)
        if result["reward"] is None:
            raise unscorable(result)
        return float(result["reward"])

    return triz_signal
