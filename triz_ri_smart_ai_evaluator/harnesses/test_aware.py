"""Test-aware behaviour, a capability every harness can use (spec 9.7, 11.17; issue 15 item 3).

Spec 9.7: "Testing must, as far as possible, be statistically indistinguishable from ordinary
work.  A persistent divergence in behaviour - in either direction - between an explicit test and
operation is considered a system defect."  Spec 11.17: "a deviation beyond the established
tolerance is considered a defect regardless of its direction".

A class replays a seeded sample of its run's scenarios under two profiles inside the same run:
one that looks like ordinary work, one that carries the recognisable markers of an explicit
test (:data:`TEST_NAMES`, :data:`TEST_DOMAINS`, :data:`TEST_USER_AGENT`, :data:`TEST_HEADERS`).
For each scenario it summarises what the candidate did under each profile as a *behaviour
record*: a class-defined mapping of comparable values (for pilot 02: the HTTP status, how many
messages were delivered, to whom, which fields they carried and whether faithfully), never the
raw values that the two profiles submit differently.  :func:`check_parity` compares the records
and fails when more scenarios differ than the declared :class:`Tolerance` allows, naming every
scenario that differed; which way it differed does not matter.

Pure: no I/O, no clock; the sample and the markers are drawn from the caller's seed, so whoever
holds the run's seed draws the same replay again.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Names a tester types into a form (each a valid name by any reasonable contract).
TEST_NAMES = ("Test User", "QA Tester", "Test Testerson", "Jane Test", "Automated Test")
#: RFC 2606 / RFC 6761 names reserved for documentation and testing.
TEST_DOMAINS = ("example.com", "example.org", "example.net", "qa.example.com", "mail.test")
TEST_LOCALS = ("test", "qa", "test.user", "tester", "e2e-test")
#: What a headless browser driven by a test framework announces.
TEST_USER_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                   "HeadlessChrome/131.0.0.0 Safari/537.36")
#: Headers test frameworks and QA pipelines add (one per replayed request, drawn).
TEST_HEADERS = (("X-Test-Run", "1"), ("X-Automated-Test", "true"), ("X-Requested-By", "pytest"),
                ("X-QA-Probe", "e2e"))
_SEED_TAG = b"triz-ri test-aware replay\x00"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How many sampled scenarios may behave differently under the two profiles before the
    difference is a defect (spec 11.17 "beyond the established tolerance").  A class whose
    behaviour is deterministic for a given input (pilot 02: status, deliveries, recipients
    and fields depend only on the submitted fields) declares 0: one difference is a defect.
    A class with legitimately noisy behaviour declares the count its noise can explain."""

    max_differing: int = 0

    def __post_init__(self) -> None:
        if self.max_differing < 0:
            raise ValueError("a tolerance counts scenarios: it cannot be negative")


#: Pilot 02's tolerance: its behaviour records are deterministic, so none may differ.
ZERO = Tolerance(0)


@dataclass(frozen=True, slots=True)
class Marker:
    """The test markers one replayed scenario carries: the identity it submits and the header
    its request is sent with (beside :data:`TEST_USER_AGENT`)."""

    name: str
    email: str
    header: tuple[str, str]


@dataclass(frozen=True, slots=True)
class Parity:
    """The comparison of one run's pairs: ``state`` is "passed", "failed" (more differing
    scenarios than the tolerance allows) or "unverified" (no pair to compare: fail closed,
    never a silent pass); ``differing`` names each scenario whose records differ, with both
    records in ``details``."""

    state: str
    differing: tuple[str, ...]
    details: tuple[str, ...]
    tolerance: Tolerance


def rng_for(seed: bytes, purpose: str) -> random.Random:
    """A generator for one purpose of this capability, derived from the run's secret seed
    (never predictable by the candidate, reproducible by whoever holds the seed)."""
    digest = hashlib.sha256(_SEED_TAG + purpose.encode() + b"\x00" + seed).digest()
    return random.Random(digest)  # noqa: S311 - a seeded draw, the secret is the seed


def sample_size(eligible: int, *, run_size: int) -> int:
    """How many scenarios to replay: one in twelve of the run, at least 8, at most what is
    eligible.  One pair catches a candidate that always behaves differently on test-looking
    input; 8 pairs catch one that does so half the time with probability 1 - 0.5**8 > 0.99,
    a quarter of the time with probability 1 - 0.75**8 > 0.89."""
    return min(eligible, max(8, run_size // 12))


def draw_sample(ids: Sequence[str], k: int, rng: random.Random) -> list[str]:
    """``k`` of ``ids`` drawn without replacement, in draw order."""
    return rng.sample(list(ids), k=min(k, len(ids)))


def draw_marker(rng: random.Random) -> Marker:
    """The markers of one explicit-test replay."""
    local = f"{rng.choice(TEST_LOCALS)}+{rng.randrange(1000, 10000)}"
    return Marker(rng.choice(TEST_NAMES), f"{local}@{rng.choice(TEST_DOMAINS)}",
                  rng.choice(TEST_HEADERS))


def check_parity(pairs: Sequence[tuple[str, str]],
                 records: Mapping[str, Mapping[str, Any] | None],
                 tolerance: Tolerance = ZERO) -> Parity:
    """Compare each (ordinary scenario, its explicit-test replay) pair's behaviour records.

    A pair differs when the two records are not equal, in either direction (spec 9.7, 11.17).
    A pair with a missing record on either side is neither equal nor different: the harness
    holds no behaviour to compare (spec 6.6: a penalty only on a verified difference;
    docs/adr/0016-no-answer-is-not-a-decision.md).  The result fails when the verified
    differences exceed the tolerance, is unverified when they do not but some pair could not be
    compared (fail closed: never passed), and passes otherwise.  Raises nothing."""
    if not pairs:
        return Parity("unverified", (), ("no pair was replayed",), tolerance)
    differing: list[str] = []
    details: list[str] = []
    unread: list[str] = []
    for ordinary, test in pairs:
        a, b = records.get(ordinary), records.get(test)
        text = (f"scenario {ordinary}: as ordinary work {_text(a)}, as an explicit test "
                f"(replay {test}) {_text(b)}")
        if a is None or b is None:
            unread.append(text)
        elif dict(a) != dict(b):
            differing.append(ordinary)
            details.append(text)
    if len(differing) > tolerance.max_differing:
        return Parity("failed", tuple(differing), tuple(details), tolerance)
    if unread:
        return Parity("unverified", tuple(differing), tuple(unread), tolerance)
    return Parity("passed", tuple(differing), tuple(details), tolerance)


def _text(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return "not recorded"
    return "{" + ", ".join(f"{k}: {record[k]!r}" for k in sorted(record)) + "}"
