"""A valid payload for every (role, resource, action) of the matrix, shared by the port tests
(``tests/access``) and the HTTP tests (``tests/service``), so both drive every cell."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from triz_ri_smart_ai_evaluator.access import Action, Resource, Role


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def cell_payload(role: Role, resource: Resource, action: Action, *, attempt: str,
                 class_id: str, task_class: Callable[[], dict[str, Any]],
                 confirmation: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The unsigned body of a valid request for this cell on ``attempt`` of ``class_id``."""
    a = attempt
    if action is not Action.APPEND:
        if resource in (Resource.TASK_SPEC_PUBLIC, Resource.CONTROL_SETS,
                        Resource.RULES_AND_BENCHMARKS, Resource.LOOP_MODE):
            return {"class_id": class_id}
        if resource is Resource.LEDGER:
            return {"start": 1, "limit": 10}
        if resource is Resource.CHECKPOINTS:
            return {}
        return {"attempt_id": a}
    if resource is Resource.SUBMISSIONS:
        return {"class_id": class_id, "artefact_b64": b64(b"another artefact"),
                "claims": ["done"], "diagnostics": ["unsure about step 3"]}
    if resource is Resource.ATTEMPTS:
        return {"attempt_id": a, "outcome": "cancelled", "reason": "test"}
    if resource in (Resource.RAW_MEASUREMENTS, Resource.INDICATORS,
                    Resource.AWARDS_AND_SIGNALS):
        return {"attempt_id": a, "inputs": {}}
    if resource is Resource.EVIDENCE and role is Role.CONFIRMATION_SOURCE:
        return {"confirmation": confirmation()}
    if resource is Resource.EVIDENCE:
        return {"attempt_id": a, "what": "verifier_log", "content_b64": b64(b"log")}
    if resource is Resource.VERIFIER_DECISIONS:
        return {"attempt_id": a, "decision": {"verdict": "verified"}}
    if resource is Resource.CONTROL_SETS:
        return {"class_id": class_id, "content": {"cases": [{"id": "rotated"}]}}
    if resource is Resource.CHECK_SCHEDULE:
        return {}
    if resource is Resource.QUARANTINE:
        return {"attempt_id": a, "status": "quarantined", "reason": "test"}
    if resource is Resource.RULES_AND_BENCHMARKS:
        return {"task_class": task_class()}
    if resource is Resource.LOOP_MODE:  # spec 9.19: pause training use of the class
        return {"class_id": class_id, "mode": "shadow", "reason": "test"}
    return {"attempt_id": a}
