"""The service's limits as pure decisions (issue 11): token buckets, the refusal sampler and
the per-route body limits, with an injected clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from triz_ri_smart_ai_evaluator.ledger.events import EventKind
from triz_ri_smart_ai_evaluator.service.config import LimitsConfig
from triz_ri_smart_ai_evaluator.service.limits import (
    BodyLimits,
    Buckets,
    Rate,
    RefusalSampler,
    body_limit,
    retry_after,
)
from triz_ri_smart_ai_evaluator.service.refusals import Refusal, reason_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_then_waits_for_the_refill() -> None:
    clock = Clock()
    buckets = Buckets(Rate(per_second=2, burst=3), clock=clock)
    for _ in range(3):
        assert buckets.wait("a") == 0.0
        buckets.take("a")
    assert buckets.wait("a") == pytest.approx(0.5)
    assert buckets.wait("b") == 0.0  # keys are independent
    clock.now += 0.5
    assert buckets.wait("a") == 0.0
    clock.now += 100
    for _ in range(3):
        buckets.take("a")
    assert buckets.wait("a") > 0  # the refill never exceeds the burst


def test_a_bucket_never_goes_below_empty() -> None:
    clock = Clock()
    buckets = Buckets(Rate(per_second=1, burst=1), clock=clock)
    for _ in range(50):
        buckets.take("a")
    clock.now += 1.0
    assert buckets.wait("a") == 0.0


def test_the_bucket_table_is_bounded_by_evicting_the_oldest() -> None:
    buckets = Buckets(Rate(per_second=1, burst=1), clock=Clock(), max_keys=10)
    for n in range(1000):
        buckets.take(f"k{n}")
    assert len(buckets._tokens) == 10
    assert buckets.wait("k0") == 0.0  # evicted: a full bucket again


@pytest.mark.parametrize(("seconds", "header"), [(0.0, "1"), (0.2, "1"), (1.0, "1"),
                                                 (1.01, "2"), (30, "30")])
def test_retry_after_is_whole_seconds_at_least_one(seconds: float, header: str) -> None:
    assert retry_after(seconds) == header


def test_the_sampler_writes_n_per_minute_then_counts_the_suppressed() -> None:
    clock = Clock()
    sampler = RefusalSampler(3, clock=clock)
    assert [sampler.admit("unauthenticated", "10.0.0.1") for _ in range(3)] == [0, 0, 0]
    assert [sampler.admit("unauthenticated", "10.0.0.1") for _ in range(7)] == [None] * 7
    assert sampler.admit("malformed", "10.0.0.1") == 0  # another reason, its own budget
    assert sampler.admit("unauthenticated", "10.0.0.2") == 0  # another address
    clock.now += 60
    assert sampler.admit("unauthenticated", "10.0.0.1") == 7
    assert sampler.admit("unauthenticated", "10.0.0.1") == 0


def test_a_sampler_of_zero_writes_nothing() -> None:
    sampler = RefusalSampler(0, clock=Clock())
    assert sampler.admit("malformed", "a") is None


def test_each_route_has_its_own_body_limit() -> None:
    limits = BodyLimits(submission=2_000_000, trusted_request=1_000_000,
                        policy_request=100_000, other=1000)
    assert body_limit(limits, "POST", "/v1/policy/attempts") == 2_000_000
    assert body_limit(limits, "post", "/v1/trusted/requests") == 1_000_000
    assert body_limit(limits, "POST", "/v1/policy/requests") == 100_000
    assert body_limit(limits, "GET", "/v1/policy/attempts") == 1000
    assert body_limit(limits, "GET", "/v1/health") == 1000


def test_the_default_limits_leave_the_load_benchmark_unthrottled() -> None:
    # benchmarks/service_load.py: 32 policy clients at ~600 submissions/s in all, the
    # harness ~300 trusted requests/s, ~4,000 health requests/s, all from one address
    limits = LimitsConfig()
    assert limits.credential_requests.per_second >= 300 * 2
    assert limits.address_requests.per_second >= 4000
    assert limits.credential_refusals.per_second < 1000  # the ~1,000/s of issue 11


def test_a_refusal_is_one_json_line_and_a_ledger_event() -> None:
    refusal = Refusal("10.0.0.9", "POST", "/v1/trusted/requests", 401,
                      "the request signature does not verify", None)
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    line = refusal.log_line(now)
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2026-01-02T03:04:05.000000Z", "event": "refusal", "client": "10.0.0.9",
        "method": "POST", "route": "/v1/trusted/requests", "status": 401,
        "reason": "unauthenticated", "detail": "the request signature does not verify",
        "principal": None}
    event = refusal.ledger_event(now, suppressed=4)
    assert event.kind == EventKind.SERVICE_REFUSAL
    assert json.loads(event.data_bytes)["suppressed"] == 4


@pytest.mark.parametrize(("status", "reason"), [(400, "malformed"), (401, "unauthenticated"),
                                                (413, "body_too_large"), (422, "invalid"),
                                                (429, "rate_limited"), (503, "unavailable"),
                                                (500, "server_error")])
def test_reasons(status: int, reason: str) -> None:
    assert reason_of(status) == reason
