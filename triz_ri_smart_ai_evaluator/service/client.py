"""Python clients of the evaluator service: one per port.

``PolicyClient`` is what an agent or rollout worker uses: read a task's public part, submit an
artefact with claims and diagnostics, read its own attempts' status.  ``TrustedClient`` is what
a verifier, harness, confirmation source, auditor or owner uses: it signs every request with its
Ed25519 key (``auth.signed_headers``) and every append's payload (``access.sign_request``).

Errors come back as :class:`ServiceError` with the HTTP status and the service's one-line
message; a refusal by the access matrix is status 403.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import httpx

from ..access.enforce import Principal
from ..access.matrix import Action, Resource, Role
from ..access.trusted import sign_request
from ..errors import ExternalError
from ..provenance.confirmation import ComponentKey
from .auth import signed_headers


class ServiceError(ExternalError):
    """The service answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def _answer(response: httpx.Response) -> dict[str, Any]:
    try:
        doc = response.json()
    except ValueError:
        doc = {"error": response.text[:200]}
    if response.status_code >= 400:
        message = doc.get("error") if isinstance(doc, dict) else None
        raise ServiceError(response.status_code, str(message or response.reason_phrase))
    if not isinstance(doc, dict):
        raise ServiceError(response.status_code, "the answer is not a JSON object")
    return doc


class _Client:
    def __init__(self, base_url: str, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout,
                                  transport=transport, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class PolicyClient(_Client):
    """The evaluated policy's side.  ``token`` is its bearer token."""

    def __init__(self, base_url: str, token: str, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._headers = {"Authorization": f"Bearer {token}"}

    def public_task(self, class_id: str) -> dict[str, Any]:
        return _answer(self._http.get(f"/v1/policy/tasks/{class_id}", headers=self._headers))

    def submit(self, class_id: str, artefact: bytes, *, claims: Sequence[str] = (),
               diagnostics: Sequence[str] = (), instance: str | None = None) -> str:
        """Hand in an artefact; return the attempt id.  ``instance`` names the task instance
        the attempt reworks (spec 3.5): an instance is credited once across its attempts."""
        body: dict[str, Any] = {"class_id": class_id,
                                "artefact_b64": base64.b64encode(artefact).decode(),
                                "claims": list(claims), "diagnostics": list(diagnostics)}
        if instance is not None:
            body["instance"] = instance
        return str(_answer(self._http.post("/v1/policy/attempts", json=body,
                                           headers=self._headers))["attempt_id"])

    def status(self, attempt_id: str) -> dict[str, Any]:
        return _answer(self._http.get(f"/v1/policy/attempts/{attempt_id}",
                                      headers=self._headers))

    def request(self, resource: str, action: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        body = {"resource": resource, "action": action, "payload": dict(payload)}
        return _answer(self._http.post("/v1/policy/requests", json=body,
                                       headers=self._headers))


class TrustedClient(_Client):
    """A trusted component's side: ``principal_id`` with ``role``, signing with ``key``."""

    def __init__(self, base_url: str, principal_id: str, role: Role | str, key: ComponentKey,
                 **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self.principal = Principal(principal_id, Role(role))
        self._key = key

    def _send(self, method: str, path: str, body: bytes = b"", *,
              timeout: float | None = None, query: str = "") -> dict[str, Any]:
        headers = signed_headers(self._key, self.principal.id, method, path, query, body)
        if body:
            headers["Content-Type"] = "application/json"
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        url = f"{path}?{query}" if query else path
        return _answer(self._http.request(method, url, content=body, headers=headers,
                                          **extra))

    def request(self, resource: Resource | str, action: Action | str,
                payload: Mapping[str, Any], *, request_id: str | None = None) -> dict[str, Any]:
        """One (resource, action); an append's payload is signed with the component's key.
        An append with ``request_id`` is done once: sending it again (a retry after a lost
        answer) returns the first answer and appends nothing (issue 11)."""
        res, act = Resource(resource), Action(action)
        body = dict(payload)
        if request_id is not None:
            body["request_id"] = request_id
        if act is Action.APPEND:
            body = sign_request(self._key, self.principal, res, act, body)
        data = json.dumps({"resource": res.value, "action": act.value, "payload": body},
                          ensure_ascii=False).encode("utf-8")
        return self._send("POST", "/v1/trusted/requests", data)

    def attempt(self, attempt_id: str) -> dict[str, Any]:
        """The transparent breakdown of an attempt (spec 3.2)."""
        return self._send("GET", f"/v1/trusted/attempts/{attempt_id}")

    def rewards(self, attempt_ids: Sequence[str], *, idempotency_key: str,
                wait_seconds: float = 0.0, purpose: str = "training") -> list[dict[str, Any]]:
        """One reward result per attempt (issue 16, docs/rewards.md): ``reward`` is None with
        a ``reason`` when the ledger holds no number a trainer may use."""
        data = json.dumps({"idempotency_key": idempotency_key,
                           "attempt_ids": list(attempt_ids),
                           "wait_seconds": wait_seconds, "purpose": purpose}).encode("utf-8")
        # the call may wait up to wait_seconds on the server: the client waits longer
        answer = self._send("POST", "/v1/rewards:batch", data, timeout=wait_seconds + 30.0)
        results: list[dict[str, Any]] = answer["results"]
        return results

    def reward(self, attempt_id: str, *, purpose: str = "training") -> dict[str, Any]:
        """One attempt's reward result now."""
        return self._send("GET", f"/v1/rewards/{attempt_id}", query=f"purpose={purpose}")
