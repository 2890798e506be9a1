"""Every refusal is visible (issue 11, item 6; spec 11.14).

Each refused request is one structured server log line (JSON through ``logging``, logger
``triz_eval.service.refusals``): time, client address, method, route, status, reason and the
principal when known.  On the trusted port a refusal the access matrix did not already log
(the guard writes 403s as ``access.violation``) is also a ``service.refusal`` ledger event,
at most ``refusal_events_per_minute`` per (reason, address), so an attacker cannot fill the
ledger; the first event written after a quiet spell carries the number suppressed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..ledger.events import EventKind, NewEvent, utc_stamp
from ..ledger.payloads import ServiceRefusal

log = logging.getLogger("triz_eval.service.refusals")
ACTOR = "evaluator-service"
_REASONS = {401: "unauthenticated", 400: "malformed", 413: "body_too_large",
            422: "invalid", 429: "rate_limited", 503: "unavailable", 403: "forbidden",
            404: "not_found", 405: "method_not_allowed"}


def reason_of(status: int) -> str:
    """The category a refusal is counted under (its ledger key with the address)."""
    return _REASONS.get(status, "server_error" if status >= 500 else "refused")


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused request as the HTTP layer saw it."""

    client: str
    method: str
    route: str
    status: int
    detail: str
    principal: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"client": self.client, "method": self.method, "route": self.route,
                "status": self.status, "reason": reason_of(self.status),
                "detail": self.detail[:500], "principal": self.principal}

    def log_line(self, now: datetime) -> str:
        """The structured server log line (one JSON object)."""
        return json.dumps({"time": utc_stamp(now), "event": "refusal"} | self.to_dict(),
                          ensure_ascii=True, sort_keys=True)

    def ledger_event(self, now: datetime, *, suppressed: int) -> NewEvent:
        """The ``service.refusal`` event; ``suppressed``: refusals of the same reason and
        address not written since the last one."""
        data = ServiceRefusal.model_validate(self.to_dict() | {"suppressed": suppressed})
        return NewEvent.make(EventKind.SERVICE_REFUSAL, data, actor=ACTOR, at=now)


def log_refusal(refusal: Refusal, now: datetime | None = None) -> None:
    log.warning(refusal.log_line(now or datetime.now(UTC)))


def configure_logging() -> None:
    """Refusal lines to stderr as they are (the JSON object alone), for ``serve``."""
    if not any(getattr(h, "_triz_refusals", False) for h in log.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._triz_refusals = True  # type: ignore[attr-defined]
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
