"""The rewards API over real HTTP (issue 16): ``POST /v1/rewards:batch`` and
``GET /v1/rewards/{attempt_id}`` on a real service (uvicorn, SQLite ledger), the policy
submitting through its port and the harness evaluating through the trusted port.

What a trainer must be able to rely on: ``reward`` is null with a reason whenever the ledger
holds no number training may use (shadow, pending, quarantined), never a made-up 0; a
not-verified attempt is a real 0; a trainer reads only its own runs; a retried call with the
same idempotency key gets the first answer; a call waits for pending attempts only as long as
it asked and the service allows.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.conftest import Service, raw, start_service
from tests.service.test_owner_loop_control import serve_training_rules
from tests.service.test_rework_service import _attempt, _evaluate
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.service.auth import signed_headers
from triz_ri_smart_ai_evaluator.service.client import ServiceError, TrustedClient

TRAINER = "trainer-1"


def trainer(service: Service) -> TrustedClient:
    return service.trusted(Role.TRAINING_CONSUMER)


def batch(service: Service, ids: list[str], key: str, **extra: Any) -> list[dict[str, Any]]:
    with trainer(service) as t:
        return t.rewards(ids, idempotency_key=key, **extra)


def _post(service: Service, body: dict[str, Any], principal: str = TRAINER) -> httpx.Response:
    data = json.dumps(body).encode()
    headers = signed_headers(service.keys[principal], principal, "POST", "/v1/rewards:batch",
                             "", data)
    headers["Content-Type"] = "application/json"
    with raw(service) as http:
        return http.post("/v1/rewards:batch", content=data, headers=headers)


@pytest.fixture
def training(service: Service) -> Service:
    """The service with pilot 02's rules in force in training mode (the bundled rules keep the
    class in shadow, pilot 10)."""
    with service.trusted(Role.OWNER) as owner:
        serve_training_rules(service.runtime, owner)
    return service


def test_shadow_rules_give_null_to_training_and_the_number_to_an_evaluation(
        service: Service) -> None:
    attempt = _attempt(service, None)
    award = _evaluate(service, attempt, "pilot_02_honest")
    assert award["verified"] is True
    assert award["mode"] == "shadow"
    [got] = batch(service, [attempt], "k-shadow")
    assert (got["reward"], got["reason"], got["training_use"]) == (None, "shadow", False)
    [seen] = batch(service, [attempt], "k-eval", purpose="evaluation")
    assert (seen["reward"], seen["reason"]) == (float(award["value"]), "verified")
    assert seen["reward_exact"] == award["value"]
    assert seen["training_use"] is False


def test_training_rules_pay_the_signal_and_an_unverified_attempt_is_a_real_zero(
        training: Service) -> None:
    honest, false = _attempt(training, None), _attempt(training, None)
    paid = _evaluate(training, honest, "pilot_02_honest")
    with training.trusted(Role.HARNESS) as harness:  # no measurements: nothing verified
        unpaid = harness.request("awards_and_signals", "append",
                                 {"attempt_id": false, "inputs": {}})["award"]
    assert paid["verified"] is True
    assert unpaid["verified"] is False
    got = batch(training, [honest, false], "k-1")
    assert [g["attempt_id"] for g in got] == [honest, false]
    assert (got[0]["reward"], got[0]["reason"], got[0]["training_use"]) == (
        float(paid["value"]), "verified", True)
    assert (got[1]["reward"], got[1]["reason"]) == (0.0, "not_verified")
    # each result names the ledger event it rests on: the award
    events = {e["seq"]: e for e in training.events()}
    assert events[got[0]["ledger_seq"]]["kind"] == "award.decision"
    assert events[got[0]["ledger_seq"]]["attempt"] == honest
    with trainer(training) as t:
        assert t.reward(honest) == got[0]


def test_a_pending_attempt_is_null_and_a_waiting_call_gets_the_award(training: Service) -> None:
    attempt = _attempt(training, None)
    [now] = batch(training, [attempt], "k-now")
    assert (now["reward"], now["reason"]) == (None, "pending")
    started = time.monotonic()
    [short] = batch(training, [attempt], "k-short", wait_seconds=0.6)
    assert short["reason"] == "pending"
    assert 0.5 <= time.monotonic() - started < 10

    later = threading.Timer(1.0, lambda: _evaluate(training, attempt, "pilot_02_honest"))
    later.start()
    try:
        started = time.monotonic()
        [waited] = batch(training, [attempt], "k-wait", wait_seconds=30)
        took = time.monotonic() - started
    finally:
        later.join()
    assert (waited["reason"], waited["reward"]) == ("verified", 2.0)
    assert took < 25, "the call answers when the award lands, not at its deadline"


def test_a_retried_call_gets_its_first_answer_and_a_reused_key_is_refused(
        training: Service) -> None:
    attempt = _attempt(training, None)
    [first] = batch(training, [attempt], "k-retry")
    _evaluate(training, attempt, "pilot_02_honest")
    body = {"idempotency_key": "k-retry", "attempt_ids": [attempt], "wait_seconds": 0.0,
            "purpose": "training"}
    again = _post(training, body)
    assert again.status_code == 200, again.text
    assert again.json() == {"results": [first], "replayed": True}
    assert batch(training, [attempt], "k-fresh")[0]["reason"] == "verified"
    other = _post(training, {**body, "attempt_ids": [attempt, attempt]})
    assert other.status_code == 400
    assert "different request" in other.json()["error"]


@pytest.fixture
def two_runs(tmp_path: Path) -> Iterator[Service]:
    yield from start_service(tmp_path / "svc", trainer_runs=["policy-1"])


def test_a_trainer_reads_only_its_own_runs(two_runs: Service) -> None:
    mine = _attempt(two_runs, None)
    from tests.service.test_rework_service import _submit

    theirs = str(_submit(two_runs, None, policy="policy-2").json()["attempt_id"])
    assert batch(two_runs, [mine], "k-mine")[0]["reason"] == "pending"
    before = two_runs.size()
    refused = _post(two_runs, {"idempotency_key": "k-theirs", "attempt_ids": [mine, theirs]})
    assert refused.status_code == 403
    violation = refused.json()["violation"]
    logged = [e for e in two_runs.events(before + 1) if e["seq"] == violation]
    assert logged
    assert logged[0]["kind"] == "access.violation"
    assert logged[0]["data"]["principal"] == TRAINER
    # an attempt that does not exist is refused the same way: no oracle of attempt ids
    assert _post(two_runs, {"idempotency_key": "k-none",
                            "attempt_ids": ["att-none"]}).status_code == 403
    # the owner reads every attempt
    with two_runs.trusted(Role.OWNER) as owner:
        assert owner.rewards([theirs], idempotency_key="k-owner")[0]["reason"] == "pending"


def test_only_signed_principals_with_the_right_may_call(service: Service) -> None:
    attempt = _attempt(service, None)
    body = {"idempotency_key": "k", "attempt_ids": [attempt]}
    with raw(service) as http:
        assert http.post("/v1/rewards:batch", json=body).status_code == 401
        policy = http.post("/v1/rewards:batch", json=body,
                           headers={"Authorization": f"Bearer {service.tokens['policy-1']}"})
        assert policy.status_code == 401
    assert _post(service, body, principal="confirm-1").status_code == 403


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"idempotency_key": "k", "attempt_ids": []}, 422, "attempt_ids"),
    ({"idempotency_key": "k", "attempt_ids": ["a"] * 513}, 422, "attempt_ids"),
    ({"idempotency_key": "k", "attempt_ids": ["a"], "wait_seconds": -1}, 422, "wait_seconds"),
    ({"idempotency_key": "k", "attempt_ids": ["a"], "wait_seconds": 121}, 400, "limit"),
    ({"idempotency_key": "k", "attempt_ids": ["a"], "purpose": "reward"}, 422, "purpose"),
    ({"idempotency_key": "bad key", "attempt_ids": ["a"]}, 422, "idempotency_key"),
    ({"attempt_ids": ["a"]}, 422, "idempotency_key"),
    ({"idempotency_key": "k", "attempt_ids": ["a"], "extra": 1}, 422, "extra"),
])
def test_malformed_calls_are_refused_with_a_clear_error(service: Service, body: dict[str, Any],
                                                        status: int, words: str) -> None:
    before = service.size()
    answer = _post(service, body)
    assert answer.status_code == status, answer.text
    assert words in answer.json()["error"]
    kinds = {e["kind"] for e in service.events(before + 1)}
    assert kinds <= {"service.refusal"}, "a malformed call writes nothing but its refusal"


@pytest.fixture
def one_waiter(tmp_path: Path) -> Iterator[Service]:
    yield from start_service(tmp_path / "svc", edit={"limits": {"rewards_waiting": 1}})


def test_waiting_calls_are_capped(one_waiter: Service) -> None:
    attempt = _attempt(one_waiter, None)
    first: dict[str, Any] = {}

    def wait() -> None:
        first["answer"] = batch(one_waiter, [attempt], "k-long", wait_seconds=4)

    holder = threading.Thread(target=wait)
    holder.start()
    time.sleep(1.0)
    busy = _post(one_waiter, {"idempotency_key": "k-2", "attempt_ids": [attempt],
                              "wait_seconds": 2})
    holder.join()
    assert busy.status_code == 429
    assert busy.headers["Retry-After"] == "1"
    # a call that does not wait is never turned away by the cap
    assert batch(one_waiter, [attempt], "k-3")[0]["reason"] == "pending"
    assert first["answer"][0]["reason"] == "pending"


def test_a_quarantined_attempt_is_null(training: Service) -> None:
    attempt = _attempt(training, None)
    _evaluate(training, attempt, "pilot_02_honest")
    assert batch(training, [attempt], "k-before")[0]["reward"] == 2.0
    with training.trusted(Role.OWNER) as owner:
        owner.request("quarantine", "append", {"attempt_id": attempt, "status": "quarantined",
                                               "reason": "exploit under investigation"})
    [got] = batch(training, [attempt], "k-after")
    assert (got["reward"], got["reason"], got["training_use"]) == (None, "quarantined", False)


def test_service_error_names_the_refusal(service: Service) -> None:
    with trainer(service) as t, pytest.raises(ServiceError, match="403"):
        t.rewards(["att-unknown"], idempotency_key="k-x")


@pytest.mark.parametrize(("runs", "role", "words"), [
    (["policy-9"], "training_consumer", "runs name no policy client"),
    (["policy-1"], "auditor", "runs belong to a training_consumer"),
])
def test_a_configuration_with_wrong_runs_is_refused(tmp_path: Path, runs: list[str],
                                                     role: str, words: str) -> None:
    import yaml

    from triz_ri_smart_ai_evaluator.errors import InputError
    from triz_ri_smart_ai_evaluator.service.config import init_service_dir, load_config

    init_service_dir(tmp_path, policies=1)
    path = tmp_path / "service.yaml"
    doc = yaml.safe_load(path.read_text("utf-8"))
    principal = next(t for t in doc["trusted"] if t["role"] == role)
    principal["runs"] = runs
    path.write_text(yaml.safe_dump(doc), "utf-8")
    with pytest.raises(InputError, match=words):
        load_config(path)


def test_service_init_gives_the_trainer_every_policy(tmp_path: Path) -> None:
    from triz_ri_smart_ai_evaluator.service.config import init_service_dir, load_config

    init_service_dir(tmp_path, policies=3)
    config, _ = load_config(tmp_path / "service.yaml")
    [trainer_config] = [t for t in config.trusted if t.role is Role.TRAINING_CONSUMER]
    assert trainer_config.runs == ("policy-1", "policy-2", "policy-3")
