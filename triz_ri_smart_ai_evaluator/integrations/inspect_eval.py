"""Inspect AI: a ``triz_signal`` scorer backed by the evaluator service, and hooks that record
every sample in the ledger, errored ones included (issue 16 item 2; docs/integrations.md).

**The scorer.** It hands the sample's output in through the policy port, as the evaluated
policy's artefact, and asks the rewards API for the result.
- An eval trains nothing, so it reads with ``purpose="evaluation"``.
- A number becomes ``Score(value=...)``. Anything else becomes ``Score.unscored``, Inspect's
  NaN that its metrics and reducers skip, with the evaluator's reason.
- The attempt id, the reason and the ledger position go into the score's metadata.

**The hooks.** :func:`record_samples` registers them. At each sample's end they write an
``inspect_sample`` record into the ledger: eval, run, sample id, epoch, the error if the sample
errored, and the score. The record goes on the attempt's evidence, signed by a trusted
principal of role ``harness``.
- A sample that errored before it was scored has no attempt yet. Its output, possibly empty, is
  handed in first, so the ledger holds it too.

Inspect is the ``inspect`` extra.  Its modules are imported when a scorer or the hooks are made,
never when this module is imported.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any, ClassVar

from .service_access import ServiceAccess

SAMPLE_RECORD = "inspect_sample"
#: Where the scorer leaves the attempt id in the score's metadata (the hooks read it).
ATTEMPT_KEY = "triz_attempt_id"


def _submit_and_read(access: ServiceAccess, sample_input: Any, text: str,
                     key: str) -> tuple[str, dict[str, Any]]:
    [result] = access.score([sample_input], [text], key=key, purpose="evaluation")
    return str(result["attempt_id"]), result


def triz_signal(access: ServiceAccess) -> Any:
    """An Inspect scorer (see the module docstring); its metrics are the mean and the standard
    error over the scored samples."""
    from inspect_ai.scorer import Score, Target, mean, scorer, stderr  # noqa: PLC0415
    from inspect_ai.solver import TaskState  # noqa: PLC0415

    @scorer(metrics=[mean(), stderr()], name="triz_signal")
    def make() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            key = f"inspect-{state.uuid}"
            attempt, result = await asyncio.to_thread(
                _submit_and_read, access, state.input, state.output.completion, key)
            metadata = {ATTEMPT_KEY: attempt, "reason": result["reason"],
                        "ledger_seq": result["ledger_seq"],
                        "reward_exact": result["reward_exact"]}
            explanation = f"{result['reason']}: {result.get('detail') or ''}".rstrip(": ")
            if result["reward"] is None:
                return Score.unscored(reason=result["reason"], answer=attempt,
                                      explanation=explanation, metadata=metadata)
            return Score(value=result["reward"], answer=attempt, explanation=explanation,
                         metadata=metadata)

        return score

    return make()


def _attempt_of(sample: Any) -> str | None:
    for score in (sample.scores or {}).values():
        attempt = (score.metadata or {}).get(ATTEMPT_KEY)
        if isinstance(attempt, str):
            return attempt
    return None


def _record(access: ServiceAccess, data: Any) -> str:
    """Write one sample's ``inspect_sample`` record; return the attempt it is on."""
    sample = data.sample
    attempt = _attempt_of(sample)
    if attempt is None:  # errored before scoring: the ledger holds it all the same
        with access.policy() as policy:
            attempt = policy.submit(access.task_class, access.to_artefact(
                sample.input, sample.output.completion if sample.output else ""))
    scores = {name: {"value": s.value, "reason": s.reason}
              for name, s in (sample.scores or {}).items()}
    record = {"eval_id": data.eval_id, "run_id": data.run_id, "sample_uuid": data.sample_id,
              "sample_id": sample.id, "epoch": sample.epoch,
              "error": None if sample.error is None else sample.error.message,
              "scores": scores}
    content = json.dumps(record, sort_keys=True, default=str, allow_nan=True).encode()
    with access.recorder() as recorder:
        recorder.request("evidence", "append", {
            "attempt_id": attempt, "what": SAMPLE_RECORD,
            "content_b64": base64.b64encode(content).decode()})
    return attempt


def record_samples(access: ServiceAccess) -> Any:
    """Register Inspect hooks that record every sample's end in the ledger (see the module
    docstring); returns the hooks' instance.  Inspect keeps one instance per process."""
    from inspect_ai.hooks import Hooks, SampleEnd, hooks  # noqa: PLC0415

    class LedgerHooks(Hooks):
        #: sample uuid -> the attempt its record is on
        recorded: ClassVar[dict[str, str]] = {}

        async def on_sample_end(self, data: SampleEnd) -> None:
            attempt = await asyncio.to_thread(_record, access, data)
            self.recorded[data.sample_id] = attempt

    hooks(name="triz_ledger", description="Record every sample in the evaluator's ledger")(
        LedgerHooks)
    return LedgerHooks
