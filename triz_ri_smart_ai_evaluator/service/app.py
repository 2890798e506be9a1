"""The evaluator service over HTTP: the policy port and the trusted port (issue 6).

Two doors with separate credentials (see ``auth``): ``/v1/policy/...`` for the evaluated
policy (bearer token) and ``/v1/trusted/...`` for trusted components (Ed25519-signed
requests).  Every endpoint is one call of a port; the access matrix decides in one place
(``access.enforce``), and a refusal is HTTP 403 with the ledger position of the logged
violation.  Errors are JSON ``{"error": "..."}`` with a 4xx status for anything the caller
sent; a server error is never the answer to a malformed request.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._safe_read import parse_json
from ..access.enforce import AccessDenied, Principal
from ..access.rewards import MAX_BATCH, WAITING
from ..canonical import canonical_json, sha256_hex
from ..errors import EvaluatorError, ExternalError, InputError, IntegrityError
from .auth import Unauthenticated
from .request_guard import AUTHENTICATED, RequestGuard
from .runtime import Runtime

API_VERSION = "1"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Submission(_Body):
    """An artefact handed in for a task class, with the policy's claims and diagnostic notes
    (recorded as what they are; never evidence, spec 8.8)."""

    class_id: str = Field(min_length=1, max_length=200)
    artefact_b64: str = Field(max_length=24 << 20)
    claims: list[Annotated[str, Field(max_length=20_000)]] = Field(default=[], max_length=200)
    diagnostics: list[Annotated[str, Field(max_length=20_000)]] = Field(default=[],
                                                                        max_length=200)
    #: spec 3.5, 8.6: the task instance this attempt works on (a rework names the instance of
    #: the first attempt); an instance is credited once across its attempts.
    instance: str | None = Field(default=None, min_length=1, max_length=200,
                                 pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$")


class PortRequest(_Body):
    """Any (resource, action) of the access matrix with its JSON payload."""

    resource: str = Field(min_length=1, max_length=64)
    action: str = Field(min_length=1, max_length=16)
    payload: dict[str, Any] = Field(default_factory=dict)


class RewardsBatch(_Body):
    """Rewards for many attempts in one call (issue 16): each attempt gets one result."""

    #: the same key and request again gets the first answer (a retried call after a lost
    #: response); a key reused for another request is refused
    idempotency_key: str = Field(min_length=1, max_length=128,
                                 pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$")
    attempt_ids: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=MAX_BATCH)
    #: how long to wait for attempts still pending (0: answer at once); at most the
    #: service's ``limits.rewards_max_wait_seconds``
    wait_seconds: float = Field(default=0.0, ge=0, le=3600)
    #: ``training`` withholds what training may not use (shadow mode, the pressure limit);
    #: ``evaluation`` (an eval that does not train) gets the measured number there
    purpose: Literal["training", "evaluation"] = "training"


class RewardsAnswer(BaseModel):
    results: list[dict[str, Any]]
    #: true when the answer is the one first given to this idempotency key
    replayed: bool


class Submitted(BaseModel):
    attempt_id: str
    status: str
    harness_queued: bool


class ErrorBody(BaseModel):
    error: str
    violation: int | None = None


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "malformed request"},
    401: {"model": ErrorBody, "description": "no valid credential"},
    403: {"model": ErrorBody, "description": "refused by the access matrix (logged)"},
    413: {"model": ErrorBody, "description": "request body too large"},
    429: {"model": ErrorBody, "description": "rate limited (Retry-After)"},
    422: {"model": ErrorBody, "description": "request does not match the schema"},
    503: {"model": ErrorBody, "description": "storage unavailable"},
}
PolicyAuth = Annotated[str | None, Header(alias="Authorization",
                                          description="Bearer <policy token>")]


def _status_of(error: EvaluatorError) -> int:
    if isinstance(error, Unauthenticated):
        return 401
    if isinstance(error, AccessDenied):
        return 403
    if isinstance(error, InputError):
        return 400
    if isinstance(error, ExternalError):
        return 503
    if isinstance(error, IntegrityError):
        return 500
    return 500


class _StrictJsonRequest(Request):
    """A request whose JSON body is read by the evaluator's untrusted-input reader, not by a
    plain json.loads (last-wins on a duplicate key, recursion on deep nesting, NaN)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body(), where="request body")
        return self._json


def _is_json(content_type: str | None) -> bool:
    # the bodies FastAPI reads as JSON: no content type, application/json, application/*+json
    if content_type is None:
        return True
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


class StrictJsonRoute(APIRoute):
    """A route that reads its JSON body strictly before FastAPI does (issue 10, defect classes
    4 and 5): a duplicate key, nesting past the limit, an over-long number, NaN or bytes that
    are not UTF-8 are an InputError (400 in the API's error shape) before authentication, the
    handler or any ledger write.  FastAPI then takes the parsed body from the request's cache.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def strict(request: Request) -> Response:
            request = _StrictJsonRequest(request.scope, request.receive)
            # Raised here, outside FastAPI's body parsing, the InputError reaches the
            # evaluator_error handler with its own message instead of a generic 400.
            if _is_json(request.headers.get("content-type")) and await request.body():
                await request.json()
            return await handler(request)

        return strict


def create_app(runtime: Runtime) -> FastAPI:
    """The FastAPI application over ``runtime`` (which the caller starts and closes)."""
    app = FastAPI(
        title="TRIZ-RI Smart AI Evaluator",
        version=API_VERSION,
        description="The policy port and the trusted port of the evaluator (spec 9.2, 9.3).",
    )
    # issue 11: budgets and streamed body limits per route, before any authentication work
    app.add_middleware(RequestGuard, runtime=runtime)
    app.router.route_class = StrictJsonRoute  # before any route is added

    @app.exception_handler(EvaluatorError)
    async def evaluator_error(_: Request, exc: EvaluatorError) -> JSONResponse:
        body: dict[str, Any] = {"error": exc.diagnostics()}
        if isinstance(exc, AccessDenied):
            body["violation"] = exc.violation
        return JSONResponse(body, status_code=_status_of(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own refusals (unknown route 404, 405, a body it cannot parse 400) in the
        # API's error shape instead of Starlette's {"detail": ...}.
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code,
                            headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return JSONResponse({"error": f"{where}: {first.get('msg')}"}, status_code=422)

    async def policy(authorization: str | None) -> Principal:
        return runtime.auth.policy(authorization)

    async def trusted(request: Request) -> Principal:
        body = await request.body()
        headers, method = dict(request.headers), request.method
        # The raw path and query as sent, not their decoded forms: two different raw paths
        # (a%3Fb and a%253Fb) must never sign alike.
        raw_path = request.scope.get("raw_path") or request.url.path.encode("ascii", "replace")
        path = raw_path.decode("latin-1")
        query = request.scope.get("query_string", b"").decode("latin-1")
        # The register's state is read from the ledger: on the ledger's thread.
        principal = await runtime.call(lambda: runtime.auth.trusted(headers, method, path,
                                                                    query, body))
        request.scope.get(AUTHENTICATED, {})["id"] = principal.id  # for the request guard
        return principal

    # -- health ---------------------------------------------------------------------------
    @app.get("/v1/health", tags=["service"])
    async def health() -> dict[str, Any]:
        """Liveness, the access matrix version and the queue of harness runs."""
        return {"ok": True, "matrix_version": runtime.matrix.version,
                "pending_harness_runs": runtime.pending_runs()}

    # -- the policy port --------------------------------------------------------------------
    @app.get("/v1/policy/tasks/{class_id}", tags=["policy"], responses=_ERRORS)
    async def public_task(class_id: str, authorization: PolicyAuth = None) -> dict[str, Any]:
        """The public part of a task class: functions, indicators, public benchmarks,
        checklist requirements, permitted actions (spec 2.13, 4.1)."""
        port = runtime.policy_port(await policy(authorization))
        return await runtime.call(lambda: port.public_task(class_id))

    @app.post("/v1/policy/attempts", tags=["policy"], status_code=201, responses=_ERRORS)
    async def submit(body: Submission, authorization: PolicyAuth = None) -> Submitted:
        """Hand in an artefact.  The attempt is in the ledger before anything runs (10.4); a
        candidate of a class with a registered harness is queued for it."""
        port = runtime.policy_port(await policy(authorization))
        try:
            artefact = base64.b64decode(body.artefact_b64, validate=True)
        except (binascii.Error, ValueError):
            raise InputError("artefact_b64 is not base64") from None
        attempt_id = await runtime.call(
            lambda: port.submit(body.class_id, artefact, body.claims, body.diagnostics,
                                instance=body.instance))
        queued = runtime.dispatch(body.class_id, attempt_id, artefact)
        return Submitted(attempt_id=attempt_id, status="initiated", harness_queued=queued)

    @app.get("/v1/policy/attempts/{attempt_id}", tags=["policy"], responses=_ERRORS)
    async def attempt_status(attempt_id: str,
                             authorization: PolicyAuth = None) -> dict[str, Any]:
        """The status of one of the caller's own attempts, without control data, expected
        answers or the schedule (spec 4.1, 9.2)."""
        port = runtime.policy_port(await policy(authorization))
        return await runtime.call(lambda: port.attempt_status(attempt_id))

    @app.post("/v1/policy/requests", tags=["policy"], responses=_ERRORS)
    async def policy_request(body: PortRequest,
                             authorization: PolicyAuth = None) -> dict[str, Any]:
        """Any (resource, action) through the policy port; what the matrix refuses is 403 and
        logged as an attempted violation (spec 11.14)."""
        port = runtime.policy_port(await policy(authorization))
        return await runtime.call(lambda: port.request(body.resource, body.action,
                                                       body.payload))

    # -- the trusted port -------------------------------------------------------------------
    @app.post("/v1/trusted/requests", tags=["trusted"], responses=_ERRORS)
    async def trusted_request(request: Request, body: PortRequest,
                              x_triz_principal: Annotated[str | None, Header()] = None,
                              x_triz_timestamp: Annotated[str | None, Header()] = None,
                              x_triz_nonce: Annotated[str | None, Header()] = None,
                              x_triz_signature: Annotated[str | None, Header()] = None,
                              ) -> dict[str, Any]:
        """Any (resource, action) through the trusted port: exactly the caller's matrix
        rights; an append must carry the payload ``signature`` (spec 9.3)."""
        port = runtime.trusted_port(await trusted(request))
        return await runtime.call(lambda: port.request(body.resource, body.action,
                                                       body.payload))

    @app.get("/v1/trusted/attempts/{attempt_id}", tags=["trusted"], responses=_ERRORS)
    async def attempt_breakdown(request: Request, attempt_id: str,
                                x_triz_principal: Annotated[str | None, Header()] = None,
                                x_triz_timestamp: Annotated[str | None, Header()] = None,
                                x_triz_nonce: Annotated[str | None, Header()] = None,
                                x_triz_signature: Annotated[str | None, Header()] = None,
                                ) -> dict[str, Any]:
        """The transparent breakdown of one attempt for the owner and the auditor (spec 3.2):
        every field of 10.1, measurements, checks, performance and signal."""
        port = runtime.trusted_port(await trusted(request))
        return await runtime.call(lambda: port.request("attempts", "read",
                                                       {"attempt_id": attempt_id}))

    _rewards_routes(app, runtime, trusted)
    return app


def _rewards_routes(app: FastAPI, runtime: Runtime,
                    trusted: Callable[[Request], Coroutine[Any, Any, Principal]]) -> None:
    """The rewards API (issue 16): a trainer's reward function, on the trusted port's
    signed requests (docs/rewards.md)."""
    waiting = asyncio.Semaphore(runtime.config.limits.rewards_waiting)
    max_wait = runtime.config.limits.rewards_max_wait_seconds

    @app.post("/v1/rewards:batch", tags=["rewards"], responses=_ERRORS)
    async def rewards_batch(request: Request, body: RewardsBatch,
                            x_triz_principal: Annotated[str | None, Header()] = None,
                            x_triz_timestamp: Annotated[str | None, Header()] = None,
                            x_triz_nonce: Annotated[str | None, Header()] = None,
                            x_triz_signature: Annotated[str | None, Header()] = None,
                            ) -> RewardsAnswer:
        """One result per attempt, in the order given: ``{attempt_id, ledger_seq, reward,
        reason, training_use}``.  ``reward`` is null with a reason whenever the ledger holds no
        number a trainer may use (shadow, pending, quarantined, infrastructure failure,
        timeout...), never a made-up 0; a not-verified attempt is a real 0 (docs/rewards.md).
        With ``wait_seconds`` the call waits for pending attempts up to that long, then answers
        the ones still pending as null with reason ``pending``."""
        reader = runtime.rewards(await trusted(request))
        if body.wait_seconds > max_wait:
            raise InputError(f"wait_seconds {body.wait_seconds:g} is over this service's "
                             f"limit of {max_wait:g} s")
        digest = sha256_hex(canonical_json({"attempt_ids": body.attempt_ids,
                                            "wait_seconds": str(body.wait_seconds),
                                            "purpose": body.purpose}))
        key = body.idempotency_key
        first = await runtime.call(lambda: reader.remembered(key, digest))
        if first is not None:
            return RewardsAnswer(results=first, replayed=True)
        ids, purpose = body.attempt_ids, body.purpose
        results = await runtime.call(lambda: reader.read(ids, purpose=purpose))
        if body.wait_seconds > 0 and any(r.reason in WAITING for r in results):
            if waiting.locked():
                raise _busy()
            async with waiting:
                deadline = time.monotonic() + body.wait_seconds
                while (any(r.reason in WAITING for r in results)
                       and (left := deadline - time.monotonic()) > 0):
                    await asyncio.sleep(min(_POLL_SECONDS, left))
                    results = await runtime.call(lambda: reader.read(ids, purpose=purpose))
        data = [r.to_data() for r in results]
        kept = await runtime.call(lambda: reader.remember(key, digest, data))
        return RewardsAnswer(results=kept, replayed=kept is not data)

    @app.get("/v1/rewards/{attempt_id}", tags=["rewards"], responses=_ERRORS)
    async def reward(request: Request, attempt_id: str,
                     purpose: Literal["training", "evaluation"] = "training",
                     x_triz_principal: Annotated[str | None, Header()] = None,
                     x_triz_timestamp: Annotated[str | None, Header()] = None,
                     x_triz_nonce: Annotated[str | None, Header()] = None,
                     x_triz_signature: Annotated[str | None, Header()] = None,
                     ) -> dict[str, Any]:
        """The reward of one attempt now (the batch call's result shape, no waiting)."""
        reader = runtime.rewards(await trusted(request))
        found = await runtime.call(lambda: reader.read([attempt_id], purpose=purpose))
        return found[0].to_data()


#: How often a waiting batch call reads the ledger again.
_POLL_SECONDS = 0.25


def _busy() -> StarletteHTTPException:
    return StarletteHTTPException(429, "too many reward calls are waiting; retry later or "
                                       "call with wait_seconds 0", headers={"Retry-After": "1"})
