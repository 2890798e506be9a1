"""Late confirmation through the provenance register (spec 11.20 with 11.21, 9.15, 8.14).

A delayed-class attempt holds half its signal in escrow.  The late value may settle it only when
the provenance register accepted, as independent, a signed confirmation from the class's control
source whose content is the late value's evidence.  An echo of the policy's own output, an
unsigned statement or one signed by another key never moves the escrow.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.errors import IntegrityError
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.provenance import (
    ComponentKey,
    Confirmation,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    SourceRecord,
    sign_confirmation,
)
from triz_ri_smart_ai_evaluator.rules import pin

from ..signal.factories import DEFECT, inputs_for, task_class

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)  # defect_fix rules v2 in force
ATTEMPT = "defect-1"
POLICY_TEXT = (
    "The defect is fixed: the connection pool no longer leaks, recurrence is impossible and "
    "the issue can be closed as verified by the engineering team after review today."
)
REPORT = {"defect": "D-17", "recurrence_reports": 0, "observation_days": 14}


class Clock:
    def __init__(self) -> None:
        self.now = T0 + timedelta(days=15)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def setup(tmp_path):
    store = SqliteStore.open(tmp_path / "l.db")
    pinned = pin(task_class(DEFECT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id=ATTEMPT, task_version="1", started_at=T0,
                      deadline=T0 + timedelta(days=14))
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    attempts.evaluate(store, pinned, inputs_for(DEFECT, values), attempt_id=ATTEMPT, at=T0)
    register = ProvenanceRegister(store, actor="provenance-register", clock=Clock())
    key = ComponentKey.from_private_bytes(b"t" * 32)
    register.register_source(SourceRecord(
        id="issue_tracker", party="issue tracker webhook", created_at=T0 - timedelta(days=30),
        origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
        independence="operators file recurrences; no path from the policy",
        policy_access=PolicyAccess.NONE, authentication=key.authentication))
    register.record_policy_output(ATTEMPT, POLICY_TEXT)
    yield store, register, key
    store.close()


def _late(content) -> dict:
    digest = hashlib.sha256(
        content.encode() if isinstance(content, str) else canonical_json(content)
    ).hexdigest()
    return {"recurrence_free": {"value": "1", "source": "issue_tracker", "evidence": [digest]}}


def _escrow_kinds(store) -> list[str]:
    return [e.kind for e in store.attempt_events(ATTEMPT) if e.kind.startswith("escrow.")]


def test_an_accepted_signed_confirmation_settles_the_escrow(setup):
    store, register, key = setup
    confirmation = sign_confirmation(key, source="issue_tracker", attempt=ATTEMPT,
                                     content=REPORT, issued_at=T0 + timedelta(days=14))
    entry = register.submit_confirmation(confirmation)
    assert entry.counted
    settled = attempts.settle(store, ATTEMPT, late=_late(REPORT), at=T0 + timedelta(days=15),
                              provenance=register)
    assert settled.kind.value == "released"
    assert _escrow_kinds(store) == ["escrow.held", "escrow.released"]


@pytest.mark.parametrize("attack", ["echo_of_policy_output", "unsigned", "signed_by_another_key"])
def test_an_unaccepted_confirmation_never_moves_the_escrow(setup, attack):
    store, register, key = setup
    issued = T0 + timedelta(days=14)
    if attack == "echo_of_policy_output":
        content = POLICY_TEXT.upper()  # the policy's own claim, repeated through the tracker
        confirmation = sign_confirmation(key, source="issue_tracker", attempt=ATTEMPT,
                                         content=content, issued_at=issued)
    elif attack == "unsigned":
        content = REPORT
        confirmation = Confirmation(source="issue_tracker", attempt=ATTEMPT, content=content,
                                    issued_at=issued)
    else:
        content = REPORT
        confirmation = sign_confirmation(ComponentKey.from_private_bytes(b"x" * 32),
                                         source="issue_tracker", attempt=ATTEMPT,
                                         content=content, issued_at=issued)
    entry = register.submit_confirmation(confirmation)
    assert not entry.counted
    before = store.size()
    with pytest.raises(IntegrityError, match="provenance register"):
        attempts.settle(store, ATTEMPT, late=_late(content), at=T0 + timedelta(days=15),
                        provenance=register)
    assert store.size() == before  # nothing written
    assert _escrow_kinds(store) == ["escrow.held"]
