"""SWE-bench's report from the ledger (issue 16 item 3): infrastructure failures kept apart from
the model's own failures, pending attempts incomplete, quarantined ones withheld, and one report
per model and run.  The attempts are recorded the way ``import-predictions`` records them; the
outcomes are ledger events written as the harness and the owner write them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.integrations.swebench import (
    Prediction,
    record_prediction,
    report,
)
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.payloads import AttemptEnded, QuarantineChanged
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore

CLASS = "defect_fix_delayed_confirmation"
AT = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore.open(tmp_path / "ledger.db")
    yield s
    s.close()


def _record(store: SqliteStore, model: str, patch: str = "--- a\n+++ b\n",
            run: str = "r1") -> str:
    return record_prediction(store, Prediction(CLASS, patch, model, "test"), task_class=CLASS,
                             run_id=run)


def _end(store: SqliteStore, attempt: str, kind: EventKind, stage: str | None) -> None:
    store.append([NewEvent.make(kind, AttemptEnded(reason="broke", stage=stage),
                                actor="harness", at=AT, attempt=attempt)])


@pytest.mark.parametrize(("kind", "stage", "listed"), [
    (EventKind.ATTEMPT_ERRORED, "isolation", "error_ids"),
    (EventKind.ATTEMPT_ERRORED, "run", "error_ids"),
    (EventKind.ATTEMPT_ERRORED, "service restart", "error_ids"),
    (EventKind.ATTEMPT_ABANDONED, None, "error_ids"),
    # the model's own failures: completed and unresolved, never an infrastructure error
    (EventKind.ATTEMPT_ERRORED, "prepare", "unresolved_ids"),
    (EventKind.ATTEMPT_VERIFICATION_FAILED, None, "unresolved_ids"),
])
def test_infrastructure_failures_are_kept_apart(store: SqliteStore, kind: EventKind,
                                                stage: str | None, listed: str) -> None:
    attempt = _record(store, "model-a")
    if kind is EventKind.ATTEMPT_ABANDONED:
        store.append([NewEvent.make(kind, {"reason": "no outcome by the deadline"},
                                    actor="reconciler", at=AT, attempt=attempt)])
    else:
        _end(store, attempt, kind, stage)
    data = report(store, "r1")
    assert data[listed] == [CLASS]
    lists = ("resolved_ids", "unresolved_ids", "error_ids", "empty_patch_ids",
             "incomplete_ids", "withheld_ids")
    assert sum(CLASS in data[name] for name in lists) == 1
    assert (CLASS in data["completed_ids"]) == (listed == "unresolved_ids")
    assert data["error_instances"] == len(data["error_ids"])
    assert data["schema_version"] == 2


def test_empty_pending_and_withheld(store: SqliteStore) -> None:
    empty = _record(store, "model-e", patch="  \n")
    _record(store, "model-p")  # no outcome yet
    withheld = _record(store, "model-q")
    store.append([NewEvent.make(EventKind.QUARANTINE_CHANGED,
                                QuarantineChanged(status="quarantined", reason="exploit"),
                                actor="owner-1", at=AT, attempt=withheld)])
    assert report(store, "r1", "model-e")["empty_patch_ids"] == [CLASS]
    instance = report(store, "r1", "model-e")["triz"]["instances"][CLASS]
    assert (instance["attempt_id"], instance["reward"], instance["reason"]) == (
        empty, 0.0, "invalid_artefact")
    assert report(store, "r1", "model-p")["incomplete_ids"] == [CLASS]
    q = report(store, "r1", "model-q")
    assert q["withheld_ids"] == [CLASS]
    assert q["resolved_ids"] == []


def test_one_report_per_model_and_run(store: SqliteStore) -> None:
    _record(store, "model-a")
    _record(store, "model-b")
    _record(store, "model-a", run="r2")
    with pytest.raises(InputError, match="2 models"):
        report(store, "r1")
    with pytest.raises(InputError, match="no prediction of 'model-c'"):
        report(store, "r1", "model-c")
    with pytest.raises(InputError, match="no predictions were imported"):
        report(store, "r3")
    assert report(store, "r2")["submitted_ids"] == [CLASS]
    assert report(store, "r1", "model-b")["triz"]["model_name_or_path"] == "model-b"
