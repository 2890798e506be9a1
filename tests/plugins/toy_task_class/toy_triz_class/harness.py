"""The toy class's harness: a candidate names an operation (a JSON object ``{"op": NAME}``),
the control set is pairs of integers drawn from the run's seed, and the harness applies the
operation to each pair outside any sandbox (the candidate is data, never code)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation.controls import fingerprint
from triz_ri_smart_ai_evaluator.harnesses.protocol import (
    Controls,
    Outcome,
    Prepared,
    RunContext,
)
from triz_ri_smart_ai_evaluator.signal.inputs import AttemptInputs
from triz_ri_smart_ai_evaluator.signal.result import Signal

OPERATIONS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


class ToySumHarness:
    task_class = "toy_sum"
    version = "toy-sum-harness/1"
    artefact = 'a JSON object {"op": "add" | "sub" | "mul"}'
    id_prefix = "toy"
    seed_tag = b"toy sum control seed\x00"
    sandboxed = False
    min_size = 5

    def prepare(self, candidate: Path, work: Path) -> Prepared:
        try:
            raw = candidate.read_bytes()
            doc = json.loads(raw)
        except (OSError, ValueError) as e:
            raise InputError(f"{candidate.name}: not a JSON candidate: {e}") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("op"), str):
            raise InputError(f'{candidate.name}: expected {{"op": NAME}}')
        digest = hashlib.sha256(raw).hexdigest()
        return Prepared(digest, digest, raw, doc["op"])

    def draw_controls(self, seed: bytes, size: int, retired: frozenset[str]) -> Controls:
        """``size`` pairs from the seed; a pair an earlier run revealed is skipped and the
        next one drawn from the same stream (a case is the pair ``[a, b]``)."""
        rng = random.Random(seed)
        pairs: list[tuple[int, int]] = []
        cases: list[str] = []
        skipped = 0
        while len(pairs) < size:
            pair = (rng.randint(-999, 999), rng.randint(-999, 999))
            case = fingerprint(list(pair))
            if case in retired:
                skipped += 1
                continue
            pairs.append(pair)
            cases.append(case)
        return Controls(json.dumps(pairs).encode(), len(pairs), pairs, tuple(cases), skipped)

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        op = OPERATIONS.get(prepared.state)
        pairs: list[tuple[int, int]] = controls.state
        results = [op(a, b) if op else None for a, b in pairs]
        correct = sum(r == a + b for r, (a, b) in zip(results, pairs, strict=True))
        data = json.dumps({"op": prepared.state, "pairs": pairs, "results": results}).encode()
        digest = ctx.evidence("results.json", data)
        known = "passed" if op else "failed"
        inputs = AttemptInputs.model_validate({
            "measurements": {"sums_correct": {"value": f"{correct}/{len(pairs)}",
                                              "source": "toy_harness", "evidence": [digest]}},
            "checklist": {
                "operation_known": {"state": known, "source": "toy_harness",
                                    "evidence": [digest]},
                "integer_for_every_pair": {"state": known, "source": "toy_harness",
                                           "evidence": [digest]}},
            "self_checks": {"checked_one_pair": {"performed": True, "source": "toy_harness",
                                                 "evidence": [digest]}},
        })
        return Outcome(
            inputs=inputs, isolation="full",
            findings=[{"id": "operation_known", "state": known,
                       "details": [] if op else [f"unknown operation {prepared.state!r}"]}],
            metrics={"sums_correct": f"{correct}/{len(pairs)}"},
            files={"results.json": data})

    def publish(self, bundle: Path, outcome: Outcome, summary: Mapping[str, Any],
                signal: Signal) -> None:
        (bundle / "report.txt").write_text(f"toy_sum: S = {signal.value}\n", encoding="utf-8")


HARNESS = ToySumHarness()
