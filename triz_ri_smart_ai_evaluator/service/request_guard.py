"""The HTTP edge of the service's limits (issue 11, items 1 and 6; docs/service.md, "Limits").

:class:`RequestGuard` is the outermost ASGI middleware: before any authentication work it
answers 429 when the client address or the credential has no budget left, and it counts body
bytes as they stream (``Content-Length`` or chunked alike) against the route's limit,
answering 413 and closing the connection as soon as the count passes it.  After the response
it debits the budgets and makes each refusal visible (``refusals``).

:func:`head_timeout_protocol` is uvicorn's h11 protocol with a request-head timeout (uvicorn
has none): a connection whose head is not complete in time is closed (slowloris).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import h11
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import EvaluatorError
from .limits import BodyLimits, Buckets, Rate, RefusalSampler, body_limit, retry_after
from .refusals import Refusal, log, log_refusal, reason_of

if TYPE_CHECKING:
    from .config import RateConfig
    from .runtime import Runtime

#: Where a handler leaves the id of the principal it authenticated (scope key).
AUTHENTICATED = "triz.authenticated"
_DETAIL_BYTES = 2048


class BodyTooLarge(StarletteHTTPException):
    """The streamed body passed the route's limit (413); the connection is closed after."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes",
                         headers={"Connection": "close"})


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse({"error": f"request body over {limit} bytes"}, status_code=413,
                        headers={"Connection": "close"})


def _rate(config: RateConfig) -> Rate:
    return Rate(config.per_second, config.burst)


class RequestGuard:
    """Budgets and body limits in front of every route (see the module docstring)."""

    def __init__(self, app: ASGIApp, runtime: Runtime, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.runtime = runtime
        config = runtime.config
        limits = config.limits
        self.bodies = BodyLimits(submission=config.max_body_bytes,
                                 trusted_request=config.max_body_bytes,
                                 policy_request=limits.policy_request_body_bytes,
                                 other=limits.other_body_bytes)
        self.credential_requests = Buckets(_rate(limits.credential_requests), clock=clock)
        self.credential_refusals = Buckets(_rate(limits.credential_refusals), clock=clock)
        self.address_requests = Buckets(_rate(limits.address_requests), clock=clock)
        self.address_refusals = Buckets(_rate(limits.address_refusals), clock=clock)
        self.sampler = RefusalSampler(limits.refusal_events_per_minute, clock=clock)
        self._tokens = {c.token_sha256: c.id for c in config.policy_clients}
        self._trusted = {t.id for t in config.trusted}

    def _credential(self, headers: list[tuple[bytes, bytes]]) -> tuple[str | None, bool,
                                                                        bytes | None]:
        """(credential id, whether the id is already proven, declared Content-Length)."""
        credential, proven, length = None, False, None
        for name, value in headers:
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer" and token:
                    # a dictionary lookup of a digest: nothing about the token leaks by time
                    found = self._tokens.get(hashlib.sha256(token.strip()).hexdigest())
                    if found is not None:
                        credential, proven = found, True
            elif name == b"x-triz-principal" and credential is None:
                claimed = value.decode("latin-1")
                if claimed in self._trusted:
                    credential = claimed
            elif name == b"content-length":
                length = value
        return credential, proven, length

    def _wait(self, address: str, credential: str | None) -> float:
        waits = [self.address_requests.wait(address), self.address_refusals.wait(address)]
        if credential is not None:
            waits += [self.credential_requests.wait(credential),
                      self.credential_refusals.wait(credential)]
        return max(waits)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        client = scope.get("client")
        address = str(client[0]) if client else "unknown"
        credential, proven, declared = self._credential(scope.get("headers", []))
        limit = body_limit(self.bodies, method, path)
        seen: dict[str, Any] = {"status": None, "body": b""}

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
            elif (message["type"] == "http.response.body" and seen["status"] >= 400
                  and len(seen["body"]) < _DETAIL_BYTES):
                seen["body"] += message.get("body", b"")
            await send(message)

        wait = self._wait(address, credential)
        self.address_requests.take(address)
        if wait > 0:
            await JSONResponse({"error": "rate limit: too many requests or refusals"},
                               status_code=429,
                               headers={"Retry-After": retry_after(wait)})(
                scope, receive, watched)
        elif declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _too_large(limit)(scope, receive, watched)
        else:
            received = 0

            async def counted() -> Message:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > limit:
                        raise BodyTooLarge(limit)
                return message

            marker: dict[str, str] = {}
            try:
                await self.app({**scope, AUTHENTICATED: marker}, counted, watched)
            except BodyTooLarge:  # raised where no handler renders it
                if seen["status"] is not None:
                    raise
                await _too_large(limit)(scope, receive, watched)
            if not proven and "id" in marker:
                credential, proven = marker["id"], True
        await self._settle(scope, address, credential if proven else None, seen)

    async def _settle(self, scope: Scope, address: str, principal: str | None,
                      seen: dict[str, Any]) -> None:
        status = seen["status"]
        if status is None or status == 429:
            refused = status == 429
        else:
            refused = status >= 400
            if principal is not None:
                self.credential_requests.take(principal)
                if refused:
                    self.credential_refusals.take(principal)
            if refused:
                self.address_refusals.take(address)
        if not refused:
            return
        detail = ""
        with contextlib.suppress(ValueError, UnicodeDecodeError, AttributeError):
            detail = str(json.loads(seen["body"]).get("error", ""))
        refusal = Refusal(address, scope["method"], scope["path"], status, detail, principal)
        now = datetime.now(UTC)
        log_refusal(refusal, now)
        # spec 11.14: the trusted port's refusals reach the ledger; a 403 is already there
        # (access.violation, written by the guard)
        if not scope["path"].startswith("/v1/trusted/") or status == 403:
            return
        suppressed = self.sampler.admit(reason_of(status), address)
        if suppressed is None:
            return
        event = refusal.ledger_event(now, suppressed=suppressed)
        store = self.runtime.store
        try:
            await self.runtime.call(lambda: store.append([event]))
        except EvaluatorError as e:  # a full disk must not turn a refusal into a crash
            log.error("cannot log a refusal in the ledger: %s", e.diagnostics())


def head_timeout_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request head is not complete
    within ``seconds`` of the connection or of the previous response (slowloris)."""

    class HeadTimeoutH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(seconds, self._head_expired)

        def _head_expired(self) -> None:
            self._head_timer = None
            if self.transport.is_closing():
                return
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and self.conn.their_state is h11.IDLE:
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

    return HeadTimeoutH11Protocol
