"""Factories for verified inputs of the bundled task classes."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from triz_ri_smart_ai_evaluator.rules import load_catalogue, pin
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.signal import AttemptInputs, SignalCalculator

#: A start time at which every bundled class's current rules and every benchmark's first version
#: are in force (defect_fix_delayed_confirmation's second version takes effect 2026-12-04T17:15Z).
STARTED = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)

CATALOGUE = load_catalogue()


def evidence(label: str) -> list[str]:
    return [hashlib.sha256(label.encode()).hexdigest()]


def task_class(class_id: str) -> TaskClass:
    return CATALOGUE[class_id]


def calculator(class_id: str, started_at: datetime = STARTED) -> SignalCalculator:
    return SignalCalculator(pin(task_class(class_id), started_at=started_at))


def inputs_for(
    class_id: str,
    values: dict[str, Any],
    *,
    failed: tuple[str, ...] = (),
    degrees: dict[str, str] | None = None,
    omitted: tuple[str, ...] = (),
    claims: tuple[str, ...] = (),
    cost: str | None = None,
    obstacles: tuple[dict[str, Any], ...] = (),
    drop_evidence: tuple[str, ...] = (),
) -> AttemptInputs:
    """Inputs in which every declared check passes unless named, with evidence from the
    source each indicator and item declares."""
    tc = task_class(class_id)
    measurements = {
        ind.id: {
            "value": values[ind.id],
            "source": ind.source,
            "evidence": [] if ind.id in drop_evidence else evidence(f"{ind.id}:{values[ind.id]}"),
        }
        for ind in tc.indicators
        if ind.id in values
    }
    degrees = degrees or {}
    checklist = {}
    for item in tc.checklist:
        state: dict[str, Any] = {"source": item.data_source, "evidence": evidence(item.id)}
        if item.id in degrees:
            state.update(state="degree", degree=degrees[item.id])
        else:
            state["state"] = "failed" if item.id in failed else "passed"
        checklist[item.id] = state
    self_checks = {
        c.id: {
            "performed": c.id not in omitted,
            "source": c.data_source,
            "evidence": evidence(c.id),
        }
        for c in tc.self_checks
    }
    costs = {tc.formula.cost.id: cost} if cost is not None and tc.formula.cost else {}
    return AttemptInputs.model_validate(
        {
            "measurements": measurements,
            "checklist": checklist,
            "self_checks": self_checks,
            "costs": costs,
            "claims": list(claims),
            "obstacles": list(obstacles),
        }
    )


PILOT = "pilot_02_feedback_form"
DOCS = "document_step_faithfulness"
DEFECT = "defect_fix_delayed_confirmation"


def pilot_values(
    delivered: int = 40, fields: int = 160, rejected: int = 40, status: int = 100,
    recovered: int = 10, regression: int = 4,
) -> dict[str, str]:
    return {
        "delivery": f"{delivered}/40",
        "field_fidelity": f"{fields}/160",
        "negative_rejection": f"{rejected}/40",
        "status_correctness": f"{status}/100",
        "recovery": f"{recovered}/10",
        "regression": f"{regression}/4",
    }

