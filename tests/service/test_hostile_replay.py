"""Issue 11 item 2: replay after a restart, and idempotent trusted appends.

A signed trusted request captured on the wire before the service stops is sent again after it
starts on the same configuration: refused, and the ledger holds the decision once.  The nonces
live in the ledger's database (``access/nonces.py``), not in the process.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ledger.conftest import PgLedger, pg_admin_dsn, pg_ledger  # noqa: F401 - fixtures
from tests.service._server_process import ServerProcess
from tests.service.conftest import Service
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.access.enforce import Principal
from triz_ri_smart_ai_evaluator.access.nonces import book_for
from triz_ri_smart_ai_evaluator.access.trusted import sign_request
from triz_ri_smart_ai_evaluator.ledger.events import parse_body
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.service.auth import signed_headers
from triz_ri_smart_ai_evaluator.service.client import PolicyClient, ServiceError
from triz_ri_smart_ai_evaluator.service.config import init_service_dir, load_principal_key

CLASS = "document_step_faithfulness"
TRIZ_EVAL = str(Path(sys.executable).parent / "triz-eval")


@contextmanager
def serving(folder: Path, *, stop: signal.Signals = signal.SIGTERM) -> Iterator[str]:
    """``triz-eval serve`` as a child process on a free loopback port; stopped by its pid."""
    server = ServerProcess(folder)
    server.start(timeout=60)
    try:
        yield server.base_url
    finally:
        server.stop(stop)


def captured_decision(folder: Path, attempt: str) -> tuple[bytes, dict[str, str]]:
    """The exact bytes and headers of a verifier's signed decision, as a sniffer would keep."""
    key = load_principal_key(folder / "principals" / "verifier-1.key")
    principal = Principal("verifier-1", Role.VERIFIER)
    payload = sign_request(key, principal, "verifier_decisions", "append",
                           {"attempt_id": attempt, "decision": {"verdict": "verified"}})
    body = json.dumps({"resource": "verifier_decisions", "action": "append",
                       "payload": payload}).encode()
    headers = signed_headers(key, principal.id, "POST", "/v1/trusted/requests", "", body)
    return body, {**headers, "Content-Type": "application/json"}


def decisions(folder: Path, attempt: str) -> list[dict[str, Any]]:
    store = SqliteStore.open(folder / "ledger.db", read_only=True)
    try:
        return [parse_body(body, seq=seq) for seq, body in store.scan()
                if parse_body(body, seq=seq)["kind"] == "verifier.decision"
                and parse_body(body, seq=seq)["attempt"] == attempt]
    finally:
        store.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_replay_of_a_captured_decision_after_a_restart_is_refused(
        tmp_path: Path, stop: signal.Signals) -> None:
    folder = tmp_path / "svc"
    init_service_dir(folder)
    token = json.loads((folder / "credentials.json").read_text())["policy_tokens"]["policy-1"]
    with serving(folder, stop=stop) as url:
        with PolicyClient(url, token) as policy:
            attempt = policy.submit(CLASS, b"artefact", claims=["done"])
        body, headers = captured_decision(folder, attempt)
        first = httpx.post(f"{url}/v1/trusted/requests", content=body, headers=headers,
                           trust_env=False)
        assert first.status_code == 200, first.text
    with serving(folder) as url:
        again = httpx.post(f"{url}/v1/trusted/requests", content=body, headers=headers,
                           trust_env=False)
        assert again.status_code in (401, 409), again.text
        assert "replay" in again.json()["error"]
    assert len(decisions(folder, attempt)) == 1


def test_same_request_id_twice_gives_the_first_answer_and_one_event(service: Service) -> None:
    with service.policy() as policy:
        attempt = policy.submit(CLASS, b"artefact", claims=["done"])
    payload = {"attempt_id": attempt, "decision": {"verdict": "verified"}}
    with service.trusted(Role.VERIFIER) as verifier:
        first = verifier.request("verifier_decisions", "append", payload, request_id="r-1")
        size = service.size()
        second = verifier.request("verifier_decisions", "append", payload, request_id="r-1")
        assert second == first
        assert service.size() == size
        with pytest.raises(ServiceError) as reused:
            verifier.request("verifier_decisions", "append",
                             {**payload, "decision": {"verdict": "rejected"}},
                             request_id="r-1")
        assert reused.value.status in (400, 409)
        other = verifier.request("verifier_decisions", "append", payload, request_id="r-2")
        assert other["seq"] != first["seq"]
    kinds = [e["kind"] for e in service.events() if e["attempt"] == attempt]
    assert kinds.count("verifier.decision") == 2


def test_a_replayed_nonce_is_refused_by_the_running_service(service: Service) -> None:
    with service.policy() as policy:
        attempt = policy.submit(CLASS, b"artefact", claims=["done"])
    body, headers = captured_decision(service.folder, attempt)
    url = f"{service.base_url}/v1/trusted/requests"
    assert httpx.post(url, content=body, headers=headers, trust_env=False).status_code == 200
    again = httpx.post(url, content=body, headers=headers, trust_env=False)
    assert again.status_code == 401


def _exercise(book: Any) -> None:
    now = 1_000_000
    assert book.use("verifier-1", "a" * 32, expires=now + 300, now=now)
    assert not book.use("verifier-1", "a" * 32, expires=now + 300, now=now + 1)
    assert book.use("harness-1", "a" * 32, expires=now + 300, now=now)  # per principal
    # once its window is over, the row may go (the timestamp check refuses the request anyway)
    assert book.use("verifier-1", "a" * 32, expires=now + 1000, now=now + 301)
    assert book.answer("verifier-1", "request-id:x", now=now) is None
    assert book.record("verifier-1", "request-id:x", request="d1", answer=b'{"seq":1}',
                       expires=now + 86400, now=now)
    assert book.answer("verifier-1", "request-id:x", now=now + 5) == ("d1", b'{"seq":1}')
    assert not book.record("verifier-1", "request-id:x", request="d2", answer=b"{}",
                           expires=now + 86400, now=now + 5)
    assert book.answer("verifier-1", "request-id:x", now=now + 86401) is None


def test_sqlite_nonce_table_survives_reopening(tmp_path: Path) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db")
    _exercise(book_for(store))
    store.close()
    store = SqliteStore.open(tmp_path / "ledger.db")
    assert not book_for(store).use("verifier-1", "a" * 32, expires=1_001_000, now=1_000_400)
    store.close()


def test_postgres_nonce_table_through_the_writer_role(pg_ledger: PgLedger) -> None:  # noqa: F811
    store = pg_ledger.open()
    _exercise(book_for(store))
    again = pg_ledger.open()
    assert not book_for(again).use("verifier-1", "a" * 32, expires=1_001_000, now=1_000_400)
    with pg_ledger.connect(pg_ledger.writer) as conn, pytest.raises(Exception, match="denied"):
        conn.execute(f'DELETE FROM "{pg_ledger.schema}".nonces')


def test_replay_after_restart_on_postgres(tmp_path: Path, pg_ledger: PgLedger) -> None:  # noqa: F811
    folder = tmp_path / "svc"
    init_service_dir(folder, postgres=pg_ledger.writer_dsn)
    import yaml

    doc = yaml.safe_load((folder / "service.yaml").read_text())
    doc["ledger"]["schema"] = pg_ledger.schema
    doc["harness"] = {"workers": 0, "out": "runs"}
    (folder / "service.yaml").write_text(yaml.safe_dump(doc))
    token = json.loads((folder / "credentials.json").read_text())["policy_tokens"]["policy-1"]
    with serving(folder, stop=signal.SIGKILL) as url:
        with PolicyClient(url, token) as policy:
            attempt = policy.submit(CLASS, b"artefact", claims=["done"])
        body, headers = captured_decision(folder, attempt)
        assert httpx.post(f"{url}/v1/trusted/requests", content=body, headers=headers,
                          trust_env=False).status_code == 200
    with serving(folder) as url:
        again = httpx.post(f"{url}/v1/trusted/requests", content=body, headers=headers,
                           trust_env=False)
        assert again.status_code in (401, 409), again.text
    store = pg_ledger.open()
    found = [e for e in (parse_body(b, seq=s) for s, b in store.scan())
             if e["kind"] == "verifier.decision" and e["attempt"] == attempt]
    assert len(found) == 1
