"""The service on PostgreSQL (issue 6: "PostgreSQL by configuration"): the real local server,
a throw-away schema whose writer role can only call ``append()``; the same ports, the same
refusals, and a ledger that verifies afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ledger.conftest import PgLedger, pg_admin_dsn, pg_ledger  # noqa: F401 - fixtures
from tests.service.conftest import Service, start_service
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.ledger.log import LOG_VKEY_FILE, check_ledger, load_vkey
from triz_ri_smart_ai_evaluator.service.client import ServiceError

CLASS = "document_step_faithfulness"


@pytest.fixture
def pg_service(tmp_path: Path, pg_ledger: PgLedger) -> Iterator[Service]:  # noqa: F811
    yield from start_service(tmp_path / "svc", edit={
        "ledger": {"postgres": pg_ledger.writer_dsn, "schema": pg_ledger.schema}})


def test_service_runs_on_postgres_and_the_ledger_verifies(pg_service: Service,
                                                          pg_ledger: PgLedger) -> None:  # noqa: F811
    with pg_service.policy() as policy:
        attempts = [policy.submit(CLASS, f"artefact {n}".encode(), claims=["done"])
                    for n in range(5)]
        with pytest.raises(ServiceError) as refused:
            policy.request("verifier_decisions", "append",
                           {"attempt_id": attempts[0], "decision": {"verdict": "verified"}})
    assert refused.value.status == 403
    with pg_service.trusted(Role.VERIFIER) as verifier:
        verifier.request("verifier_decisions", "append",
                         {"attempt_id": attempts[1], "decision": {"verdict": "verified"}})
    kinds = [e["kind"] for e in pg_service.events()]
    assert kinds.count("attempt.initiated") == 5
    assert kinds.count("access.violation") == 1
    assert kinds.count("verifier.decision") == 1
    runtime = pg_service.runtime
    runtime.call_sync(lambda: runtime.store.append([], force_checkpoint=True))
    log_key = load_vkey(pg_service.folder / "keys" / LOG_VKEY_FILE)
    report = runtime.call_sync(lambda: check_ledger(runtime.store, log_key=log_key))
    assert report.ok, report.to_dict()
