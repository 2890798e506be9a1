"""Independent recomputation of every indicator and award in a ledger (spec 10.2, 11.13).

A second implementation, on purpose: it reads the rules from the ledger's own ``rules.published``
events (canonical JSON, as plain dicts) and the original measurements from ``measurement.raw``,
and evaluates the formulas of spec 7.2-7.4 with its own code.  It imports nothing from the
calculator that wrote the awards, so a defect in one is caught by the other.  The arithmetic
contract is shared and documented: decimal, 34 significant digits, round half even.

No I/O apart from reading the store it is handed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Context, Decimal, DivisionByZero, InvalidOperation, Overflow
from fractions import Fraction
from typing import Any

from ..canonical import canonical_json
from .store import LedgerStore

_CTX = Context(
    prec=34, rounding=ROUND_HALF_EVEN, traps=[InvalidOperation, DivisionByZero, Overflow]
)
_0, _1 = Decimal(0), Decimal(1)


def _num(text: Any) -> Decimal:
    s = str(text)
    if "/" in s:
        f = Fraction(s)
        return _CTX.divide(Decimal(f.numerator), Decimal(f.denominator))
    return Decimal(s)


def _fmt(d: Decimal | None) -> str | None:
    if d is None:
        return None
    return "0" if d == 0 else format(d.normalize(_CTX), "f")


@dataclass(slots=True)
class RecomputeReport:
    attempts: int = 0
    matched: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "attempts": self.attempts,
            "matched": self.matched,
            "mismatches": self.mismatches,
        }


def _status(record: dict[str, Any] | None, source: str) -> str:
    if record is None:
        return "missing"
    if record.get("source") != source:
        return "wrong_source"
    if not record.get("evidence"):
        return "no_evidence"
    return "verified"


def _perf(ind: dict[str, Any], bm: dict[str, Any], value: Decimal) -> Decimal:
    if ind["direction"] == "increase":
        return _CTX.divide(value, _num(bm["value"]))
    if ind["direction"] == "decrease":
        if value <= 0:
            return _num(ind["decrease_rule"]["perf_at_zero"])
        return _CTX.divide(_num(bm["value"]), value)
    low, high, rule = _num(bm["low"]), _num(bm["high"]), ind["interval_rule"]
    if low <= value <= high:
        return _1
    gap = _CTX.subtract(low, value) if value < low else _CTX.subtract(value, high)
    tol = _num(rule["tolerance_below"] if value < low else rule["tolerance_above"])
    return max(_0, _CTX.subtract(_1, _CTX.divide(gap, tol)))


def _performance(
    rules: dict[str, Any], initiated: dict[str, Any], meas: dict[str, dict[str, Any]]
) -> tuple[dict[str, Decimal], dict[str, str], list[str]]:
    """Status and capped performance of every indicator, and those below their minimum."""
    comb = rules["combination"]
    mins = {t["indicator"]: _num(t["minimum"]) for t in comb["thresholds"]}
    caps = {c["indicator"]: _num(c["maximum"]) for c in comb["caps"]}
    perf: dict[str, Decimal] = {}
    status: dict[str, str] = {}
    below: list[str] = []
    for ind in rules["indicators"]:
        m = meas.get(ind["id"])
        status[ind["id"]] = _status(m, ind["source"])
        if status[ind["id"]] == "verified":
            assert m is not None
            bm = initiated["benchmarks"][ind["id"]]
            p = _perf(ind, bm, _num(m["value"]))
            if ind["id"] in caps and p > caps[ind["id"]]:
                p = caps[ind["id"]]
            if ind["id"] in mins and p < mins[ind["id"]]:
                below.append(ind["id"])
            perf[ind["id"]] = p
    return perf, status, below


def _checks(
    rules: dict[str, Any], items: dict[str, dict[str, Any]], selfc: dict[str, dict[str, Any]]
) -> tuple[dict[str, str], list[str], dict[str, list[str]], list[Decimal], list[str]]:
    """States of checklist items and self-checks, sorted by their effect."""
    check_state: dict[str, str] = {}
    bad_checks: list[str] = []
    failed: dict[str, list[str]] = {"critical": [], "gate": []}
    quality: list[Decimal] = []
    for item in rules["checklist"]:
        st = items.get(item["id"])
        s = _status(st, item["data_source"])
        if s != "verified":
            check_state[item["id"]] = "unverified"
            bad_checks.append(f"check {item['id']}: {s}")
            continue
        assert st is not None
        check_state[item["id"]] = st["state"]
        score = (
            _1
            if st["state"] == "passed"
            else (_0 if st["state"] == "failed" else _num(st["degree"]))
        )
        if item["effect"] in failed and st["state"] == "failed":
            failed[item["effect"]].append(item["id"])
        elif item["effect"] == "quality":
            quality.append(score)
    omitted = []
    for check in rules["self_checks"]:
        sc = selfc.get(check["id"])
        ok = _status(sc, check["data_source"]) == "verified" and sc is not None and sc["performed"]
        check_state[check["id"]] = "performed" if ok else "omitted"
        if not ok:
            omitted.append(check["id"])

    return check_state, bad_checks, failed, quality, omitted


def _variable(
    rules: dict[str, Any], perf: dict[str, Decimal], below: list[str], k: Decimal
) -> tuple[Decimal, Decimal | None, dict[str, str | None], bool]:
    """The formula of spec 7.2-7.4 once every gate has passed: (S, Perf_overall, blocks, any)."""
    comb, formula = rules["combination"], rules["formula"]
    B = _num(formula["base_unit"])
    blocks: dict[str, str | None] = {}
    if formula["model"] == "non_compensatory_sum":
        total, any_result = _0, False
        for b in comb["blocks"]:
            p = _1
            for i in b["indicators"]:
                p = _CTX.multiply(p, perf[i])
            low = any(i in below for i in b["indicators"])
            v = _CTX.multiply(B, p) if p >= _num(b["threshold"]) and not low else _0
            blocks[b["id"]] = _fmt(v)
            total += v
            any_result = any_result or v > 0
        return total, None, blocks, any_result
    overall = _1
    for i in comb["multiplied"]:
        overall = _CTX.multiply(overall, perf[i])
    if any(i in below for i in comb["multiplied"]):
        overall = _0
    base = B if formula["model"] == "gate" else _CTX.multiply(B, k)
    return _CTX.add(base, _CTX.multiply(B, overall)), overall, blocks, overall > 0


def _accepted_obstacles(rules: dict[str, Any], raw: list[dict[str, Any]]) -> list[Any]:
    """Obstacles recorded by a declared source, with evidence, the standard followed (6.5)."""
    sources = {s["id"] for s in rules["sources"]}
    return [
        o
        for o in raw
        if o["what"] == "obstacle"
        and o["recorded_by"] in sources
        and o["evidence"]
        and o["standard_followed"]
    ]


def _payloads(
    rules: dict[str, Any],
    initiated: dict[str, Any],
    *,
    perf: dict[str, Decimal],
    status: dict[str, str],
    below: list[str],
    checks: dict[str, str],
    k: Decimal | None,
    overall: Decimal | None,
    blocks: dict[str, str | None],
    cost: str | None,
    outcome: str,
    reasons: list[str],
    critical: bool,
    value: Decimal,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``indicators.computed`` and ``award.decision`` payloads, as the writer stores them."""
    formula = rules["formula"]
    check_state = checks
    delayed = rules["confirmation"]["kind"] == "delayed"
    held = (
        _CTX.multiply(value, _num(rules["confirmation"]["escrow_share"]))
        if (delayed and value > 0)
        else _0
    )
    verified = outcome not in ("not_verified", "claimed_not_verified")
    indicators = {
        "performance": {i["id"]: _fmt(perf.get(i["id"])) for i in rules["indicators"]},
        "status": status,
        "below_minimum": sorted(below),
        "checks": check_state,
        "quality_k": _fmt(k),
        "perf_overall": _fmt(overall),
        "blocks": blocks,
        "cost": None if cost is None else _fmt(_num(cost)),
    }
    award = {
        "rules_version": initiated["rules_version"],
        "outcome": outcome,
        "reasons": reasons,
        "critical_violation": critical,
        "verified": verified,
        "mode": formula["mode"],
        "training_use": formula["mode"] != "shadow" and verified,
        "value": _fmt(value),
        "preliminary": _fmt(value) if delayed else None,
        "held": _fmt(held),
        "payable_now": _fmt(_CTX.subtract(value, held)),
        "final": None if delayed else _fmt(value),
    }
    return indicators, award


def recompute_attempt(
    rules: dict[str, Any], initiated: dict[str, Any], raw: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(indicators payload, award payload) for one attempt, from rules and raw events."""
    meas = {r["id"]: r for r in raw if r["what"] == "indicator"}
    items = {r["id"]: r for r in raw if r["what"] == "checklist"}
    selfc = {r["id"]: r for r in raw if r["what"] == "self_check"}
    costs = {r["id"]: r["value"] for r in raw if r["what"] == "cost"}
    claims = [r["text"] for r in raw if r["what"] == "claim"]
    obstacles = _accepted_obstacles(rules, raw)
    comb, formula = rules["combination"], rules["formula"]
    B = _num(formula["base_unit"])
    negative = _num(formula["negative_value"]) if formula["negative_value"] is not None else _0
    rewarded = list(comb["multiplied"]) + [i for b in comb["blocks"] for i in b["indicators"]]
    perf, status, below = _performance(rules, initiated, meas)
    check_state, bad_checks, failed, quality, omitted = _checks(rules, items, selfc)
    reasons: list[str] = []
    k: Decimal | None = None
    overall: Decimal | None = None
    blocks: dict[str, str | None] = {}
    cost: str | None = None
    critical = False
    unverified = [
        f"indicator {i}: {status[i]}" for i in status if i in rewarded and status[i] != "verified"
    ] + bad_checks
    if obstacles:
        reasons.append("uncontrollable obstacle recorded by a trusted source")
        outcome, value = "objectively_impossible", (B if formula["neutral"] == "base" else _0)
    elif failed["critical"]:
        reasons += [f"critical violation: {i}" for i in failed["critical"]]
        outcome, value, critical = "quality_violation", negative, True
    elif unverified:
        reasons += unverified
        outcome, value = ("claimed_not_verified" if claims else "not_verified"), _0
    elif omitted:
        reasons += [f"mandatory self-check omitted: {i}" for i in omitted]
        outcome, value = "quality_violation", _0
    elif failed["gate"]:
        reasons += [f"gate failed: {i}" for i in failed["gate"]]
        outcome, value = "not_obtained", _0
    else:
        k = _CTX.divide(sum(quality, _0), Decimal(len(quality))) if quality else _1
        if formula["model"] == "gate" and k < _num(formula["quality_minimum"]):
            reasons.append(f"K {_fmt(k)} below the mandatory level")
            outcome, value = "quality_violation", negative
        else:
            cost = costs.get(formula["cost"]["id"]) if formula["cost"] else None
            reasons += [f"below minimum performance: {i}" for i in below]
            value, overall, blocks, any_result = _variable(rules, perf, below, k)
            if not any_result:
                outcome = "not_obtained"
            elif all(perf[i] >= _1 for i in rewarded):
                outcome = "obtained"
            else:
                outcome = "partial"
    return _payloads(
        rules,
        initiated,
        perf=perf,
        status=status,
        below=below,
        checks=check_state,
        k=k,
        overall=overall,
        blocks=blocks,
        cost=cost,
        outcome=outcome,
        reasons=reasons,
        critical=critical,
        value=value,
    )


def _events(store: LedgerStore) -> Iterator[dict[str, Any]]:
    for _, body in store.scan():
        yield json.loads(body)


def recompute_ledger(store: LedgerStore) -> RecomputeReport:
    """Replay every attempt with an award and compare, byte for byte, with what was written."""
    report = RecomputeReport()
    rules: dict[str, dict[str, Any]] = {}
    initiated: dict[str, dict[str, Any]] = {}
    raw: dict[str, list[dict[str, Any]]] = defaultdict(list)
    written: dict[str, dict[str, Any]] = defaultdict(dict)
    for ev in _events(store):
        kind, data, attempt = ev["kind"], ev["data"], ev["attempt"]
        if kind == "rules.published":
            rules[data["rules_version"]] = json.loads(data["canonical_rules"])
        elif kind == "attempt.initiated":
            initiated[attempt] = data
        elif kind == "measurement.raw":
            raw[attempt].append(data)
        elif kind in ("indicators.computed", "award.decision"):
            written[attempt][kind] = data
    for attempt, stored in written.items():
        report.attempts += 1
        init = initiated.get(attempt)
        if init is None or init["rules_version"] not in rules:
            report.mismatches.append(f"attempt {attempt}: rules or initiation not in the ledger")
            continue
        ind, award = recompute_attempt(rules[init["rules_version"]], init, raw[attempt])
        bad = [
            kind
            for kind, mine in (("indicators.computed", ind), ("award.decision", award))
            if canonical_json(stored.get(kind)) != canonical_json(mine)
        ]
        if bad:
            report.mismatches.append(f"attempt {attempt}: {', '.join(bad)} differ on recompute")
        else:
            report.matched += 1
    return report
