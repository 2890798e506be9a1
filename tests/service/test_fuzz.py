"""Fuzzing the evaluator service from its own OpenAPI document (issue 6 acceptance).

The schema is read from the running service (``/openapi.json`` of a real uvicorn server over a
fresh SQLite ledger) and every operation in it is driven with schemathesis-generated requests,
in both generation modes (positive: what the schema allows; negative: what it forbids) and
with three kinds of caller:

* **anonymous**: whatever credentials the generator makes up (nearly always none or garbage);
* **policy**: a valid policy bearer token on every request;
* **trusted**: every request signed by one of the trusted principals (drawn per example) with
  ``auth.signed_headers`` over the exact bytes sent, so the generated body reaches the access
  matrix and the port instead of stopping at authentication.

Generation is steered a little towards the interesting part of the input space: sometimes the
class id is a real class, the attempt id a real attempt, the resource and action of a generic
request real names of the matrix, and a trusted append's payload carries a valid payload
signature, so random payloads get all the way into the handlers.

Every answer must be: no 5xx; for an error, a 4xx whose body is the JSON ``{"error": "..."}``
the API promises; for a success, a JSON object; and nothing logged at ERROR by the server.
Bounded and reproducible: hypothesis is derandomised with a small ``max_examples``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.access.payloads import cell_payload
from triz_ri_smart_ai_evaluator.access import Action, Resource, Role
from triz_ri_smart_ai_evaluator.access.enforce import Principal
from triz_ri_smart_ai_evaluator.access.trusted import sign_request
from triz_ri_smart_ai_evaluator.errors import EvaluatorError
from triz_ri_smart_ai_evaluator.ledger.events import utc_stamp
from triz_ri_smart_ai_evaluator.ledger.log import LOG_VKEY_FILE, check_ledger, load_vkey
from triz_ri_smart_ai_evaluator.provenance import sign_confirmation
from triz_ri_smart_ai_evaluator.service.auth import signed_headers
from triz_ri_smart_ai_evaluator.service.config import DEFAULT_TRUSTED

from .conftest import Service, start_service

CLASS = "document_step_faithfulness"
EXAMPLES = 30  # per operation, caller and generation mode: 9 x 3 x 2 x 30 = 1,620 requests
OPERATIONS = {
    ("GET", "/v1/health"),
    ("GET", "/v1/policy/tasks/{class_id}"),
    ("POST", "/v1/policy/attempts"),
    ("GET", "/v1/policy/attempts/{attempt_id}"),
    ("POST", "/v1/policy/requests"),
    ("POST", "/v1/trusted/requests"),
    ("GET", "/v1/trusted/attempts/{attempt_id}"),
    ("POST", "/v1/rewards:batch"),
    ("GET", "/v1/rewards/{attempt_id}"),
}
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large, HealthCheck.large_base_example),
)


class _Errors(logging.Handler):
    """Collects every ERROR the server side logs (an unhandled exception in a handler is
    logged by uvicorn as 'Exception in ASGI application')."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from start_service(tmp_path_factory.mktemp("fuzz") / "svc")


@pytest.fixture(scope="module")
def api(live: Service) -> Any:
    return schemathesis.openapi.from_url(f"{live.base_url}/openapi.json")


@pytest.fixture(scope="module")
def attempt(live: Service) -> str:
    client = live.policy()
    try:
        return client.submit(CLASS, b"the fuzzer's own artefact", claims=["done"])
    finally:
        client.close()


@pytest.fixture
def server_errors() -> Iterator[_Errors]:
    handler = _Errors()
    loggers = [logging.getLogger(n) for n in ("uvicorn.error", "uvicorn", "triz_eval.service")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        time.sleep(0.1)  # a late record of this test's requests lands here, not in the next
        for logger in loggers:
            logger.removeHandler(handler)


def _no_server_errors(errors: _Errors) -> None:
    time.sleep(0.1)  # uvicorn logs an unhandled exception just after sending the 500
    assert not errors.records, [r.getMessage() + str(r.exc_info) for r in errors.records]


# -- steering ----------------------------------------------------------------------------------

def _maybe(data: st.DataObject, value: Any, label: str) -> Any:
    """Half the time, ``value`` instead of what was generated (hypothesis decides, so shrinking
    and derandomisation keep working)."""
    return value if data.draw(st.booleans(), label=label) else None


def _payload(data: st.DataObject, role: Role, res: Resource, act: Action, generated: Any,
             live: Service, attempt: str) -> Any:
    """The generated payload, a valid one for the cell (tests/access/payloads.py), or a valid
    one with the generated fields written over it."""
    choice = data.draw(st.sampled_from(["generated", "valid", "valid+generated"]),
                       label="payload")
    if choice == "generated":
        return generated

    def confirmation() -> dict[str, Any]:
        source = next(pid for pid, r in DEFAULT_TRUSTED if r is role)
        c = sign_confirmation(live.keys[source], source=source, attempt=attempt,
                              content="the operator confirmed it", issued_at=datetime.now(UTC))
        return {"source": c.source, "attempt": c.attempt, "content": c.content,
                "issued_at": utc_stamp(c.issued_at), "signature": c.signature}

    valid = cell_payload(role, res, act, attempt=attempt, class_id=CLASS,
                         task_class=lambda: live.runtime.catalogue.get(CLASS)
                         .model_dump(mode="json"),
                         confirmation=confirmation)
    if choice == "valid+generated" and isinstance(generated, dict):
        valid.update(generated)
    return valid


def _steer(case: Any, data: st.DataObject, attempt: str, role: Role | None,
           live: Service) -> None:
    """Point a generated case at real names and ids now and then (see the module docstring)."""
    params = case.path_parameters
    if isinstance(params, dict):
        if "class_id" in params and _maybe(data, CLASS, "real class"):
            params["class_id"] = CLASS
        if "attempt_id" in params and _maybe(data, attempt, "real attempt"):
            params["attempt_id"] = attempt
    body = case.body
    if not isinstance(body, dict):
        return
    if isinstance(body.get("attempt_ids"), list) and _maybe(data, True, "real attempt ids"):
        body["attempt_ids"] = [attempt]
    wait = body.get("wait_seconds")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and wait > 0.2:
        # A rewards call may wait up to 120 s for a pending attempt: keep the fuzzing bounded.
        body["wait_seconds"] = 0.2
    if "class_id" in body and _maybe(data, CLASS, "real class in body"):
        body["class_id"] = CLASS
    if isinstance(body.get("artefact_b64"), str) and _maybe(data, True, "valid base64"):
        body["artefact_b64"] = "ZnV6eg=="
    if "resource" in body and _maybe(data, True, "a cell of the matrix"):
        acting = role or Role.EVALUATED_POLICY
        granted = [(r, a) for r in Resource for a in Action
                   if a in live.runtime.matrix.cell(acting, r).allow]
        every = [(r, a) for r in Resource for a in Action]
        pool = granted if granted and _maybe(data, True, "a granted cell") else every
        res, act = data.draw(st.sampled_from(pool), label="cell")
        body["resource"], body["action"] = res.value, act.value
        body["payload"] = _payload(data, acting, res, act, body.get("payload"), live, attempt)


# -- sending -----------------------------------------------------------------------------------

def _build(case: Any, base_url: str) -> httpx.Request:
    """The httpx request of a generated case (generated bytes exactly as schemathesis made
    them); a case that cannot be put on the wire at all is rejected (a client-side limit)."""
    kwargs = case.as_transport_kwargs(base_url=base_url)
    headers = {str(k): str(v) for k, v in (kwargs.get("headers") or {}).items()}
    try:
        content: bytes | None = None
        if "json" in kwargs:
            content = json.dumps(kwargs["json"]).encode("utf-8")
        elif isinstance(kwargs.get("data"), bytes | str):
            raw = kwargs["data"]
            content = raw.encode("utf-8") if isinstance(raw, str) else raw
        return httpx.Request(kwargs["method"], kwargs["url"], params=kwargs.get("params"),
                             headers=headers, content=content)
    except (UnicodeEncodeError, ValueError, TypeError):
        reject()


def _principal(caller: str, data: st.DataObject) -> tuple[str, Role] | None:
    if caller != "trusted":
        return None
    principal_id, role = data.draw(st.sampled_from(DEFAULT_TRUSTED), label="principal")
    return principal_id, role


def _sign_payload(case: Any, who: tuple[str, Role], live: Service, data: st.DataObject
                  ) -> None:
    """Now and then give a generated append's payload a valid payload signature, so that the
    random payload reaches the port's handler instead of stopping at the signature check."""
    body = case.body
    if not (isinstance(body, dict) and isinstance(body.get("payload"), dict)
            and body.get("action") == Action.APPEND.value
            and body.get("resource") in {r.value for r in Resource}
            and _maybe(data, True, "signed payload")):
        return
    principal_id, role = who
    with contextlib.suppress(EvaluatorError):  # a payload the signer refuses stays unsigned
        body["payload"] = sign_request(live.keys[principal_id], Principal(principal_id, role),
                                       body["resource"], Action.APPEND, body["payload"])


def _credential(request: httpx.Request, caller: str, who: tuple[str, Role] | None,
                live: Service) -> None:
    """Replace the generated credentials by valid ones for ``caller``."""
    if caller == "policy":
        request.headers["Authorization"] = f"Bearer {live.tokens['policy-1']}"
        return
    if who is None:
        return
    principal_id, _ = who
    raw_path, _, query = request.url.raw_path.partition(b"?")
    # The server checks the signature over the raw path and query exactly as sent.
    path = raw_path.decode("ascii")
    for header in ("x-triz-principal", "x-triz-timestamp", "x-triz-nonce", "x-triz-signature"):
        if header in request.headers:
            del request.headers[header]
    request.headers.update(signed_headers(live.keys[principal_id], principal_id,
                                          request.method, path, query.decode("ascii"),
                                          request.content))


def _check(response: httpx.Response, case: Any) -> dict[str, Any]:
    where = f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
    assert response.status_code < 500, where
    assert response.headers.get("content-type", "").startswith("application/json"), where
    doc = response.json()
    assert isinstance(doc, dict), where
    if response.status_code >= 400:
        assert set(doc) <= {"error", "violation"}, where
        assert isinstance(doc.get("error"), str), where
        assert doc["error"].strip(), where
    else:
        assert response.status_code in (200, 201), where
    return doc


# -- the tests ---------------------------------------------------------------------------------

def test_the_schema_lists_every_operation(api: Any) -> None:
    found = {(op.method.upper(), op.path) for op in
             (result.ok() for result in api.get_all_operations())}
    assert found == OPERATIONS


def _fuzz(operation: Any, mode: GenerationMode, caller: str, live: Service, attempt: str,
          http: httpx.Client, seen: list[int]) -> None:
    """Drive one operation with ``EXAMPLES`` generated requests as ``caller``."""

    @SETTINGS
    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    def run(case: Any, data: st.DataObject) -> None:
        who = _principal(caller, data)
        role = who[1] if who else (Role.EVALUATED_POLICY if caller == "policy" else None)
        _steer(case, data, attempt, role, live)
        if who is not None:
            _sign_payload(case, who, live, data)
        request = _build(case, live.base_url)
        _credential(request, caller, who, live)
        response = http.send(request)
        _check(response, case)
        seen.append(response.status_code)

    run()


def test_the_schema_documents_the_error_body_it_sends(api: Any) -> None:
    wrong = []
    for method, path in sorted(OPERATIONS):
        responses = api.raw_schema["paths"][path][method.lower()]["responses"]
        for status, response in responses.items():
            if status.startswith("4"):
                ref = response["content"]["application/json"]["schema"].get("$ref", "")
                if not ref.endswith("/ErrorBody"):
                    wrong.append(f"{method} {path} {status}: {ref}")
    assert not wrong, wrong


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                         ids=lambda m: m.value)
@pytest.mark.parametrize("caller", ["anonymous", "policy", "trusted"])
def test_fuzz_every_operation(api: Any, live: Service, attempt: str, caller: str,
                              mode: GenerationMode, server_errors: _Errors) -> None:
    statuses: dict[str, list[int]] = {}
    with httpx.Client(timeout=30, trust_env=False) as http:
        for result in api.get_all_operations():
            operation = result.ok()
            name = f"{operation.method.upper()} {operation.path}"
            try:
                _fuzz(operation, mode, caller, live, attempt, http,
                      statuses.setdefault(name, []))
            except Unsatisfiable:
                # An operation whose every input is an unconstrained string (a path segment,
                # an optional header) has no negative case: anything is valid to the schema.
                if mode is not GenerationMode.NEGATIVE or operation.body:
                    raise
                del statuses[name]
    _no_server_errors(server_errors)
    assert all(statuses.values()), statuses  # every operation fuzzed was exercised
    assert {n for n in statuses if n.startswith("POST")} == {
        f"{m} {p}" for m, p in OPERATIONS if m == "POST"}  # bodies are fuzzed in both modes
    if caller == "anonymous":
        for name, codes in statuses.items():
            if name != "GET /v1/health":
                assert not {200, 201} & set(codes), (name, sorted(set(codes)))
    if caller == "trusted" and mode is GenerationMode.POSITIVE:
        # the signatures work: most trusted requests got past authentication
        codes = statuses["POST /v1/trusted/requests"] + statuses[
            "GET /v1/trusted/attempts/{attempt_id}"]
        assert sum(c != 401 for c in codes) > len(codes) // 2, sorted(codes)
    if caller == "policy" and mode is GenerationMode.POSITIVE:
        assert 201 in statuses["POST /v1/policy/attempts"], statuses
        assert 200 in statuses["GET /v1/policy/tasks/{class_id}"], statuses


# -- hand-picked malformed requests (what a schema-driven generator does not produce) -----------

def _send_raw(live: Service, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """One HTTP/1.1 exchange on a fresh socket, bytes exactly as given (a client library would
    refuse or repair most of these)."""
    host, port = live.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(head + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        header, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in header.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
    return int(header.split(b" ", 2)[1]), rest


MALFORMED: list[tuple[str, str, str, bytes, dict[str, str]]] = [
    # (name, method, path, body, extra headers); "TOKEN" is replaced by policy-1's token
    ("invalid json", "POST", "/v1/policy/attempts", b"{", {}),
    ("not utf-8", "POST", "/v1/policy/attempts", b"\xff\xfe\x00", {}),
    ("json array", "POST", "/v1/policy/requests", b"[]", {}),
    ("text/plain", "POST", "/v1/policy/attempts", b"hello", {"Content-Type": "text/plain"}),
    ("no body", "POST", "/v1/policy/requests", b"", {}),
    ("integer of 5,000 digits", "POST", "/v1/policy/requests",
     b'{"resource":"attempts","action":"read","payload":{"attempt_id":' + b"9" * 5000 + b"}}",
     {}),
    ("nesting 10,000 deep", "POST", "/v1/policy/requests",
     b'{"resource":"attempts","action":"read","payload":' + b"[" * 10_000 + b"]" * 10_000
     + b"}", {}),
    ("NaN in the payload", "POST", "/v1/policy/requests",
     b'{"resource":"task_spec_public","action":"read","payload":{"class_id":NaN}}', {}),
    ("unknown field", "POST", "/v1/policy/attempts",
     b'{"class_id":"document_step_faithfulness","artefact_b64":"","verifier":"me"}', {}),
    ("artefact not base64", "POST", "/v1/policy/attempts",
     b'{"class_id":"document_step_faithfulness","artefact_b64":"***"}', {}),
    ("lone surrogate in a claim (typed endpoint)", "POST", "/v1/policy/attempts",
     b'{"class_id":"document_step_faithfulness","artefact_b64":"","claims":["\\ud800"]}', {}),
    ("lone surrogate in a target", "POST", "/v1/policy/requests",
     b'{"resource":"ledger","action":"read","payload":{"attempt_id":"\\udfff"}}', {}),
    ("unknown route", "GET", "/v1/nowhere", b"", {}),
    ("wrong method", "DELETE", "/v1/policy/attempts", b"", {}),
    ("bearer with latin-1", "GET", "/v1/policy/tasks/document_step_faithfulness", b"",
     {"Authorization": "Bearer \u00e9\u00e9"}),
    ("two bearer tokens", "GET", "/v1/policy/tasks/document_step_faithfulness", b"",
     {"Authorization": "Bearer TOKEN TOKEN"}),
    ("percent-encoded NUL in the path", "GET", "/v1/policy/attempts/%00", b"", {}),
    ("invalid utf-8 in the path", "GET", "/v1/policy/tasks/%ff%fe", b"", {}),
    ("trusted: no signature headers", "POST", "/v1/trusted/requests",
     b'{"resource":"ledger","action":"read","payload":{}}', {"Authorization": ""}),
    ("trusted: a timestamp of 400 digits", "GET", "/v1/trusted/attempts/x", b"",
     {"X-Triz-Principal": "owner-1", "X-Triz-Timestamp": "9" * 400,
      "X-Triz-Nonce": "a" * 32, "X-Triz-Signature": "AAAA"}),
    ("trusted: a superscript digit as timestamp", "GET", "/v1/trusted/attempts/x", b"",
     {"X-Triz-Principal": "owner-1", "X-Triz-Timestamp": "\u00b2",
      "X-Triz-Nonce": "c" * 32, "X-Triz-Signature": "AAAA"}),
    ("trusted: a signature that is not base64", "GET", "/v1/trusted/attempts/x", b"",
     {"X-Triz-Principal": "owner-1", "X-Triz-Timestamp": "NOW",
      "X-Triz-Nonce": "b" * 32, "X-Triz-Signature": "%%%"}),
]


@pytest.mark.parametrize(("name", "method", "path", "body", "extra"), MALFORMED,
                         ids=[m[0] for m in MALFORMED])
def test_malformed_request_is_a_clear_4xx(live: Service, server_errors: _Errors, name: str,
                                          method: str, path: str, body: bytes,
                                          extra: dict[str, str]) -> None:
    headers = {"Authorization": "Bearer TOKEN", "Content-Type": "application/json", **extra}
    headers.setdefault("Content-Length", str(len(body)))
    lines = [f"{method} {path} HTTP/1.1", f"Host: {live.base_url.removeprefix('http://')}",
             "Connection: close"]
    for key, template in headers.items():
        value = template.replace("TOKEN", live.tokens["policy-1"])
        lines.append(f"{key}: {value.replace('NOW', str(int(time.time())))}")
    head = "\r\n".join(lines).encode("latin-1") + b"\r\n"
    status, answer = _send_raw(live, head, body)
    assert 400 <= status < 500, (name, status, answer[:300])
    doc = json.loads(answer)
    assert isinstance(doc, dict), (name, answer[:300])
    assert isinstance(doc.get("error"), str), (name, answer[:300])
    _no_server_errors(server_errors)


def test_a_lone_surrogate_in_a_claim_through_the_generic_door_is_a_4xx(
        live: Service, server_errors: _Errors) -> None:
    body = (b'{"resource":"submissions","action":"append","payload":{"class_id":'
            b'"document_step_faithfulness","artefact_b64":"","claims":["\\ud800"]}}')
    head = (f"POST /v1/policy/requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Authorization: Bearer {live.tokens['policy-1']}\r\n").encode()
    before = _count(live, "attempt.initiated")
    status, answer = _send_raw(live, head, body)
    server_errors.records.clear()
    assert 400 <= status < 500, (status, answer[:300])
    assert json.loads(answer).get("error")
    assert _count(live, "attempt.initiated") == before  # refused before anything is recorded


def _count(live: Service, kind: str) -> int:
    return sum(e["kind"] == kind for e in live.events())


def test_the_body_limit_is_a_413(live: Service) -> None:
    limit = live.runtime.config.max_body_bytes
    head = (f"POST /v1/policy/attempts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {limit + 1}\r\n"
            f"Authorization: Bearer {live.tokens['policy-1']}\r\n").encode()
    status, answer = _send_raw(live, head)  # the body is never sent: refused on the header
    assert status == 413
    assert "error" in json.loads(answer)


def test_the_ledger_verifies_after_the_fuzzing(live: Service) -> None:
    runtime = live.runtime
    runtime.call_sync(lambda: runtime.store.append([], force_checkpoint=True))
    log_key = load_vkey(live.folder / "keys" / LOG_VKEY_FILE)
    report = runtime.call_sync(lambda: check_ledger(runtime.store, log_key=log_key))
    assert report.ok, report.to_dict()
    kinds = {e["kind"] for e in live.events()}
    assert {"attempt.initiated", "access.violation"} <= kinds
