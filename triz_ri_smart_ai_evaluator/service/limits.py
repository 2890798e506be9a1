"""The service's limits as pure decisions (issue 11, items 1 and 6; spec 9.2, 9.3).

No I/O and no clock of its own: every time comes from the injected ``clock``.  The HTTP layer
(``app.RequestGuard``) asks these objects three questions about each request:

* how many body bytes its route may carry (:func:`body_limit`), counted as they stream;
* whether its client address and credential still have budget (:class:`Buckets`): one token
  bucket of requests and one of refusals per key, so that a caller hammering refused requests
  is answered 429 long before it can fill the ledger with logged refusals;
* whether a refusal is written to the ledger or only counted (:class:`RefusalSampler`): at
  most N per minute per (reason, address), the next written one carrying the suppressed count.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

#: Keys kept per table: an attacker inventing addresses or tokens evicts the oldest, never
#: grows the table (an evicted key starts again with a full bucket).
MAX_KEYS = 10_000

SUBMISSION_ROUTE = ("POST", "/v1/policy/attempts")
POLICY_REQUEST_ROUTE = ("POST", "/v1/policy/requests")
TRUSTED_REQUEST_ROUTE = ("POST", "/v1/trusted/requests")


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """Body bytes per route.  The submission carries a base64 artefact; the trusted append
    carries signed payloads (measurements, decisions); a policy request names a resource and a
    small payload; every other route (the GETs) has no business sending a body."""

    submission: int
    trusted_request: int
    policy_request: int
    other: int


def body_limit(limits: BodyLimits, method: str, path: str) -> int:
    """The body limit of one route."""
    route = (method.upper(), path)
    if route == SUBMISSION_ROUTE:
        return limits.submission
    if route == TRUSTED_REQUEST_ROUTE:
        return limits.trusted_request
    if route == POLICY_REQUEST_ROUTE:
        return limits.policy_request
    return limits.other


@dataclass(frozen=True, slots=True)
class Rate:
    """A token bucket's refill rate (per second) and capacity."""

    per_second: float
    burst: float


class Buckets:
    """Token buckets by key, refilled by ``clock`` (seconds, monotonic).

    :meth:`wait` says how long until one token is there (0.0: now) without taking it;
    :meth:`take` debits one token (never below zero).  The HTTP layer checks before a request
    and debits after it, when it knows whether the request was authenticated and refused."""

    def __init__(self, rate: Rate, *, clock: Callable[[], float],
                 max_keys: int = MAX_KEYS) -> None:
        if rate.per_second <= 0 or rate.burst < 1:
            raise ValueError("a bucket needs a positive rate and a burst of at least 1")
        self.rate = rate
        self._clock = clock
        self._max_keys = max_keys
        self._tokens: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, key: str) -> float:
        now = self._clock()
        tokens, then = self._tokens.get(key, (self.rate.burst, now))
        level = min(self.rate.burst, tokens + max(0.0, now - then) * self.rate.per_second)
        self._tokens[key] = (level, now)
        self._tokens.move_to_end(key)
        while len(self._tokens) > self._max_keys:
            self._tokens.popitem(last=False)
        return level

    def wait(self, key: str) -> float:
        """Seconds until ``key`` has one token (0.0 when it has one now)."""
        level = self._level(key)
        return 0.0 if level >= 1.0 else (1.0 - level) / self.rate.per_second

    def take(self, key: str) -> None:
        level = self._level(key)
        self._tokens[key] = (max(0.0, level - 1.0), self._clock())


def retry_after(seconds: float) -> str:
    """The ``Retry-After`` header value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


class RefusalSampler:
    """At most ``per_minute`` ledger events per (reason, address) in any 60-second window
    (fixed windows from the first refusal of the key); the refusals beyond it are counted, and
    the first event written after them says how many were suppressed."""

    WINDOW = 60.0

    def __init__(self, per_minute: int, *, clock: Callable[[], float],
                 max_keys: int = MAX_KEYS) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._max_keys = max_keys
        # key -> (window start, written in the window, suppressed since the last written)
        self._seen: OrderedDict[tuple[str, str], tuple[float, int, int]] = OrderedDict()

    def admit(self, reason: str, address: str) -> int | None:
        """None: do not write this refusal (it is counted); an int: write it, with that many
        suppressed refusals of the same key before it."""
        if self._per_minute <= 0:
            return None
        now, key = self._clock(), (reason, address)
        start, written, suppressed = self._seen.get(key, (now, 0, 0))
        if now - start >= self.WINDOW:
            start, written = now, 0
        if written >= self._per_minute:
            self._seen[key] = (start, written, suppressed + 1)
            admitted = None
        else:
            self._seen[key] = (start, written + 1, 0)
            admitted = suppressed
        self._seen.move_to_end(key)
        while len(self._seen) > self._max_keys:
            self._seen.popitem(last=False)
        return admitted
