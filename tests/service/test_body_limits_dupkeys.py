"""Request bodies are read as untrusted input (issue 10, defect classes 4 and 5).

FastAPI reads a JSON body with ``json.loads``: last-wins on a duplicate key, a RecursionError on
deep nesting, a ValueError on an integer past Python's 4,300-digit limit, and NaN accepted.  The
service reads every JSON body with the evaluator's own reader first, so each of these is a 400
in the API's error shape (``{"error": "..."}``) before any handler, authentication or ledger
write happens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from triz_ri_smart_ai_evaluator.access import Action, Resource, Role
from triz_ri_smart_ai_evaluator.access.enforce import Principal
from triz_ri_smart_ai_evaluator.access.trusted import sign_request
from triz_ri_smart_ai_evaluator.service.auth import signed_headers

from .conftest import Service, raw

CLASS = "document_step_faithfulness"
DEEP = 100_000
HARNESS = "harness-1"


@pytest.fixture
def http(service: Service) -> Iterator[httpx.Client]:
    with raw(service) as client:
        yield client


def _policy_headers(service: Service) -> dict[str, str]:
    return {"Authorization": f"Bearer {service.tokens['policy-1']}",
            "Content-Type": "application/json"}


def _refused(answer: httpx.Response) -> str:
    assert answer.status_code == 400, (answer.status_code, answer.text[:300])
    doc = answer.json()
    assert set(doc) == {"error"}, doc
    message = doc["error"]
    assert isinstance(message, str)
    assert "\n" not in message
    assert message.startswith("request body"), message
    return message


def _attempt(service: Service) -> str:
    with service.policy() as policy:
        return policy.submit(CLASS, b"an artefact", claims=["done"])


def _signed_append(service: Service, attempt: str, state: str) -> tuple[bytes, dict[str, Any]]:
    """A raw_measurements append by the harness reporting a critical item as ``state``, with a
    valid payload signature; the body as the client would send it."""
    payload = sign_request(
        service.keys[HARNESS], Principal(HARNESS, Role.HARNESS), Resource.RAW_MEASUREMENTS,
        Action.APPEND,
        {"attempt_id": attempt,
         "inputs": {"checklist": {"no_uninspected_release": {"state": state,
                                                             "source": "gate_ledger"}}}})
    doc = {"resource": "raw_measurements", "action": "append", "payload": payload}
    return json.dumps(doc).encode(), doc


def _post_signed(http: httpx.Client, service: Service, body: bytes) -> httpx.Response:
    path = "/v1/trusted/requests"
    headers = signed_headers(service.keys[HARNESS], HARNESS, "POST", path, "", body)
    headers["Content-Type"] = "application/json"
    return http.post(path, content=body, headers=headers)


# -- duplicate keys (defect class 4) ---------------------------------------------------------

def _only_the_refusal_recorded(service: Service, before: int) -> None:
    """Nothing of the refused request is in the ledger: the one new event is the
    ``service.refusal`` record of the refusal itself (issue 11).  The guard writes that record
    after the response has gone out, so on a busy machine it may land a moment later: wait
    for it (a bounded wait; its absence still fails)."""
    deadline = time.monotonic() + 10
    new = service.events(before + 1)
    while not new and time.monotonic() < deadline:
        time.sleep(0.05)
        new = service.events(before + 1)
    assert [e["kind"] for e in new] == ["service.refusal"], new


def test_duplicate_checklist_state_through_the_trusted_port_is_refused_unrecorded(
        service: Service, http: httpx.Client) -> None:
    """The harness signed 'passed'; a body that also carries an earlier 'failed' for the same
    critical item reads as 'passed' to a last-wins parser and 'failed' to a first-wins one.
    The service must not pick one: 400, and nothing of it reaches the ledger; only the
    refusal itself is recorded (issue 11: every refusal on the trusted port is visible)."""
    attempt = _attempt(service)
    body, _ = _signed_append(service, attempt, "passed")
    tampered = body.replace(b'"state": "passed"', b'"state": "failed", "state": "passed"', 1)
    assert tampered != body
    before = service.size()
    message = _refused(_post_signed(http, service, tampered))
    assert "duplicate key 'state'" in message
    _only_the_refusal_recorded(service, before)
    # the same request without the duplicate is accepted: the refusal is the duplicate's
    assert _post_signed(http, service, body).status_code == 200
    assert service.size() > before


def test_duplicate_checklist_item_through_the_trusted_port_is_refused_unrecorded(
        service: Service, http: httpx.Client) -> None:
    attempt = _attempt(service)
    body, _ = _signed_append(service, attempt, "passed")
    item = b'"no_uninspected_release": {'
    tampered = body.replace(
        item, b'"no_uninspected_release": {"state": "failed", "source": "gate_ledger"}, ' + item,
        1)
    before = service.size()
    assert "duplicate key 'no_uninspected_release'" in _refused(
        _post_signed(http, service, tampered))
    _only_the_refusal_recorded(service, before)


def test_duplicate_top_level_key_of_a_submission_is_refused_unrecorded(
        service: Service, http: httpx.Client) -> None:
    before = service.size()
    body = (b'{"class_id": "pilot_02_feedback_form", "class_id": "' + CLASS.encode()
            + b'", "artefact_b64": ""}')
    answer = http.post("/v1/policy/attempts", content=body, headers=_policy_headers(service))
    assert "duplicate key 'class_id'" in _refused(answer)
    assert service.size() == before


def test_duplicate_key_in_a_generic_policy_request_is_refused_unrecorded(
        service: Service, http: httpx.Client) -> None:
    before = service.size()
    body = (b'{"resource": "task_spec_public", "action": "read", '
            b'"payload": {"class_id": "a", "class_id": "' + CLASS.encode() + b'"}}')
    answer = http.post("/v1/policy/requests", content=body, headers=_policy_headers(service))
    assert "duplicate key 'class_id'" in _refused(answer)
    assert service.size() == before


def test_a_body_is_refused_before_authentication(service: Service, http: httpx.Client) -> None:
    """No credentials at all: the malformed body is what is reported (and nothing logged)."""
    before = service.size()
    answer = http.post("/v1/policy/requests", content=b'{"a": 1, "a": 2}',
                       headers={"Content-Type": "application/json"})
    assert "duplicate key 'a'" in _refused(answer)
    assert service.size() == before


# -- internal errors on bad input (defect class 5) -------------------------------------------

HOSTILE = {
    "nesting 100,000 deep": (
        b'{"resource": "attempts", "action": "read", "payload": {"x": '
        + b"[" * DEEP + b"]" * DEEP + b"}}", "nested deeper than 64 levels"),
    "an integer of 5,000 digits": (
        b'{"resource": "attempts", "action": "read", "payload": {"attempt_id": '
        + b"9" * 5000 + b"}}", "a number of 5,000 characters"),
    "NaN": (b'{"resource": "attempts", "action": "read", "payload": {"x": NaN}}',
            "NaN is not a JSON number"),
    "-Infinity": (b'{"resource": "attempts", "action": "read", "payload": {"x": -Infinity}}',
                  "-Infinity is not a JSON number"),
    "not utf-8": (b'{"resource": "\xff"}', "not valid UTF-8"),
    "malformed": (b'{"resource": ', "malformed JSON"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bodies_are_a_clear_400_unrecorded(service: Service, http: httpx.Client,
                                                   name: str) -> None:
    body, expected = HOSTILE[name]
    before = service.size()
    answer = http.post("/v1/policy/requests", content=body, headers=_policy_headers(service))
    assert expected in _refused(answer)
    assert service.size() == before


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "application/merge-patch+json", None])
def test_every_json_content_type_is_read_strictly(service: Service, http: httpx.Client,
                                                  content_type: str | None) -> None:
    headers = {"Authorization": f"Bearer {service.tokens['policy-1']}"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    answer = http.post("/v1/policy/requests", headers=headers,
                       content=b'{"resource": "x", "resource": "y", "action": "read"}')
    assert "duplicate key 'resource'" in _refused(answer)


def test_a_valid_body_is_still_served(service: Service, http: httpx.Client) -> None:
    answer = http.post("/v1/policy/requests", headers=_policy_headers(service),
                       content=json.dumps({"resource": "task_spec_public", "action": "read",
                                           "payload": {"class_id": CLASS}}).encode())
    assert answer.status_code == 200, answer.text[:300]
