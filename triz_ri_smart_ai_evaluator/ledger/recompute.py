"""Independent recomputation of every indicator and award in a ledger (spec 10.2, 11.13).

A second implementation, on purpose: it reads the rules from the ledger's own ``rules.published``
events (canonical JSON, as plain dicts) and the original measurements from ``measurement.raw``,
and evaluates the formulas of spec 7.2-7.4 with its own code.  It imports nothing from the
calculator that wrote the awards, so a defect in one is caught by the other.  The arithmetic
contract is shared and documented: decimal, 34 significant digits, round half even.

No I/O apart from reading the store it is handed.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal, DivisionByZero, InvalidOperation, Overflow
from fractions import Fraction
from typing import Any

from ..canonical import canonical_json
from ..errors import IntegrityError
from .payloads import payload_from
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
        if item["effect"] in failed:
            # issue 10: a critical or gate item counts only when explicitly passed.
            if st["state"] != "passed":
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
            p = min(p, _num(b["cap"]["maximum"]) if b.get("cap") else _1)
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
    limit = _num(comb["overall_cap"]["maximum"]) if comb.get("overall_cap") else _1
    overall = min(overall, limit)
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


def _scored(
    rules: dict[str, Any],
    perf: dict[str, Decimal],
    below: list[str],
    quality: list[Decimal],
    costs: dict[str, Any],
    rewarded: list[str],
    reasons: list[str],
) -> tuple[str, Decimal, Decimal, Decimal | None, dict[str, str | None], str | None]:
    """K, then the model's formula, once every gate has passed: (outcome, S, K, Perf_overall,
    blocks, cost)."""
    formula = rules["formula"]
    k = _CTX.divide(sum(quality, _0), Decimal(len(quality))) if quality else _1
    if formula["model"] == "gate" and k < _num(formula["quality_minimum"]):
        reasons.append(f"K {_fmt(k)} below the mandatory level")
        negative = _num(formula["negative_value"]) if formula["negative_value"] is not None else _0
        return "quality_violation", negative, k, None, {}, None
    cost = costs.get(formula["cost"]["id"]) if formula["cost"] else None
    reasons += [f"below minimum performance: {i}" for i in below]
    value, overall, blocks, any_result = _variable(rules, perf, below, k)
    if not any_result:
        outcome = "not_obtained"
    elif all(perf[i] >= _1 for i in rewarded):
        outcome = "obtained"
    else:
        outcome = "partial"
    return outcome, value, k, overall, blocks, cost


def _neutral(
    rules: dict[str, Any],
    obstacles: list[dict[str, Any]],
    unmeasured: list[str],
    check_state: dict[str, str],
    omitted: list[str],
) -> tuple[Decimal | None, list[str]] | None:
    """Spec 6.5 as the calculator applies it (ADR 4): None when no accepted obstacle meets an
    unmeasured rewarded indicator; (None, reasons) when some unmeasured one is not named;
    (neutral value, reasons) when every one is."""
    if not obstacles or not unmeasured:
        return None
    covered = {i for o in obstacles for i in o["indicators"]}
    missing = [i for i in unmeasured if i not in covered]
    if missing:
        return None, [f"obstacle does not name {', '.join(missing)}; not neutralised"]
    reasons = [
        "uncontrollable obstacle recorded by a trusted source kept "
        f"{', '.join(unmeasured)} from being measured"
    ]
    admissible = not omitted and all(
        check_state[c["id"]] == "passed" for c in rules["checklist"] if c["effect"] == "critical"
    )
    if not admissible:
        reasons.append(
            "neutral signal withheld: a critical item or mandatory self-check is not verified"
        )
        return _0, reasons
    return (_num(rules["formula"]["base_unit"]) if rules["formula"]["neutral"] == "base"
            else _0), reasons


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
    unmeasured = [i for i in status if i in rewarded and status[i] != "verified"]
    neutral = _neutral(rules, obstacles, unmeasured, check_state, omitted)
    if failed["critical"]:
        # spec 5.5 before 6.5: an obstacle never neutralises a verified critical violation.
        reasons += [f"critical violation: {i}" for i in failed["critical"]]
        outcome, value, critical = "quality_violation", negative, True
    elif neutral is not None and neutral[0] is not None:
        reasons += neutral[1]
        outcome, value = "objectively_impossible", neutral[0]
    elif unverified:
        reasons += neutral[1] if neutral is not None else []
        reasons += unverified
        outcome, value = ("claimed_not_verified" if claims else "not_verified"), _0
    elif omitted:
        reasons += [f"mandatory self-check omitted: {i}" for i in omitted]
        outcome, value = "quality_violation", _0
    elif failed["gate"]:
        reasons += [f"gate failed: {i}" for i in failed["gate"]]
        outcome, value = "not_obtained", _0
    else:
        outcome, value, k, overall, blocks, cost = _scored(
            rules, perf, below, quality, costs, rewarded, reasons
        )
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


# -- evidence resolution, independently (issue 10; spec 8.8, 9.3) ------------------------------
_CITING = ("indicator", "checklist", "self_check", "obstacle")
_NOT_EVIDENCE = ("artefact", "candidate", "signed_request")


def _citations(raw: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(what, id, source, digest) of every digest the raw inputs cite, in the writer's order:
    indicators, checklist, self-checks by id, then obstacles by position."""
    out: list[tuple[str, str, str, str]] = []
    for what in _CITING[:3]:
        for r in sorted((r for r in raw if r["what"] == what), key=lambda r: str(r["id"])):
            out += [(what, r["id"], r["source"], d) for d in r.get("evidence", [])]
    obstacles = [r for r in raw if r["what"] == "obstacle"]
    for n, r in enumerate(obstacles):
        out += [("obstacle", str(n), r["recorded_by"], d) for d in r.get("evidence", [])]
    return out


def _resolve(
    store: LedgerStore, stored: list[tuple[dict[str, Any], str]], raw: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[str], set[str]]:
    """(``evidence.resolved`` payload, award reasons, unresolved digests): a cited digest counts
    when an ``evidence.stored`` event of the attempt before its award names it, is not the
    policy's output or a request record, and the blob is intact in the store."""
    by: dict[str, str] = {}
    policy: set[str] = set()
    for data, actor in stored:
        digest = data.get("digest")
        if not isinstance(digest, str):
            continue
        if data.get("what") in _NOT_EVIDENCE or data.get("origin") == "evaluated_model_output":
            policy.add(digest)
        elif digest not in by:
            by[digest] = data["by"] if isinstance(data.get("by"), str) else actor
    resolved: dict[str, str] = {}
    unresolved: list[dict[str, Any]] = []
    for what, ident, source, digest in _citations(raw):
        if digest in by:
            try:
                store.get_evidence(digest)
                problem = None
            except IntegrityError as e:
                problem = f"not in the ledger's evidence store ({e.message})"
        elif digest in policy:
            problem = "only the policy's own output or a request record names it (spec 8.8)"
        else:
            problem = "not stored for this attempt (no evidence.stored event names it)"
        if problem is None:
            resolved[digest] = by[digest]
        else:
            unresolved.append({"what": what, "id": ident, "source": source, "digest": digest,
                               "reason": problem})
    record = {"resolved": [{"digest": d, "stored_by": s} for d, s in sorted(resolved.items())],
              "unresolved": unresolved}
    reasons = [f"evidence {u['digest']} of {u['what']} {u['id']} ({u['source']}) does not "
               f"resolve: {u['reason']}" for u in unresolved]
    return record, reasons, {u["digest"] for u in unresolved}


def _without(raw: list[dict[str, Any]], digests: set[str]) -> list[dict[str, Any]]:
    return [{**r, "evidence": [d for d in r["evidence"] if d not in digests]}
            if r["what"] in _CITING else r for r in raw]


# -- every violation (spec 10.1) and the rework credit (spec 3.5, 8.6) ------------------------
def _violations(
    rules: dict[str, Any], checks: dict[str, str], raw: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    quality: list[Decimal] = []
    items = {r["id"]: r for r in raw if r["what"] == "checklist"}
    for item in rules["checklist"]:
        state = checks[item["id"]]
        if state == "unverified":
            continue
        if item["effect"] == "critical" and state != "passed":
            found.append({"kind": "critical_violation", "id": item["id"]})
        elif item["effect"] == "gate" and state != "passed":
            found.append({"kind": "gate_failed", "id": item["id"]})
        elif item["effect"] == "quality":
            quality.append(_1 if state == "passed" else
                           _0 if state == "failed" else _num(items[item["id"]]["degree"]))
    found += [{"kind": "self_check_omitted", "id": c["id"]} for c in rules["self_checks"]
              if checks[c["id"]] != "performed"]
    formula = rules["formula"]
    if formula["model"] == "gate":
        k = _CTX.divide(sum(quality, _0), Decimal(len(quality))) if quality else _1
        if k < _num(formula["quality_minimum"]):
            found.append({"kind": "quality_below_minimum", "id": "K", "k": _fmt(k),
                          "minimum": _fmt(_num(formula["quality_minimum"]))})
    return sorted(found, key=lambda v: (v["kind"], v["id"]))


_NOT_CONSUMING = ("objectively_impossible", "not_verified")


def _rework(
    rules: dict[str, Any], attempt: str, instance: str, award: dict[str, Any],
    history: list[tuple[str, str, Decimal, Decimal]],
) -> dict[str, Any]:
    """What the attempt adds to its instance: the first measured attempt decides it, attempts
    not consuming it do not; the instance's credits add up to that value."""
    own = _num(award["value"])
    line = [*((a, o, v) for a, o, v, _ in history), (attempt, award["outcome"], own)]
    decided = next((v for _, o, v in line if o not in _NOT_CONSUMING), line[-1][2])
    credited = _CTX.subtract(decided, sum((c for *_, c in history), _0))
    return {
        "instance": instance,
        "own": _fmt(own),
        "credited": _fmt(credited),
        "consumed_by": next((a for a, o, _ in line if o not in _NOT_CONSUMING), None),
        "rule": rules["formula"].get("rework", "first_attempt_counts"),
    }


@dataclass(frozen=True, slots=True)
class _LoopView:
    """What an award saw of its class's loop: the last mode change (time, data), the times of
    the class's earlier inclusions, and the award's own time."""

    change: tuple[str, dict[str, Any]] | None
    included: list[str]
    at: str


@dataclass(slots=True)
class _Ledger:
    """What recompute reads from the log, per attempt, in one pass."""

    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    initiated: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (seq, data) of each ``measurement.raw``, read through its model when the attempt is
    #: recomputed (an attempt without an award is never read).
    raw: dict[str, list[tuple[int, Any]]] = field(default_factory=lambda: defaultdict(list))
    stored: dict[str, list[tuple[dict[str, Any], str]]] = field(
        default_factory=lambda: defaultdict(list))
    written: dict[str, dict[str, Any]] = field(default_factory=lambda: defaultdict(dict))
    awarded: list[str] = field(default_factory=list)  # in ledger order
    #: Attempts quarantined before their award (pilot 12): never included in training.
    quarantined: set[str] = field(default_factory=set)
    #: The last ``class.mode_changed`` of each class, and when each class's attempts went into
    #: training, as read so far; each award's view of them (issue 15).
    modes: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    included_at: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    loop_at: dict[str, _LoopView] = field(default_factory=dict)
    #: Per attempt, the seqs of ``quarantine.changed`` (quarantined) after its award, and every
    #: ``training.included`` after its first: each must be a recall notice (spec 9.11; issue 15).
    quarantined_after: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    notices: dict[str, list[tuple[int, dict[str, Any]]]] = field(
        default_factory=lambda: defaultdict(list))

    def read(self, ev: dict[str, Any]) -> None:
        kind, data, attempt = ev["kind"], ev["data"], ev["attempt"]
        if kind == "rules.published":
            text = str(data["canonical_rules"])
            # issue 10: rules whose bytes no longer hash to their version are not used; the
            # attempts pinned to them are reported as not reproducible.
            if hashlib.sha256(text.encode("utf-8")).hexdigest() == data["rules_version"]:
                self.rules[data["rules_version"]] = json.loads(text)
        elif kind == "attempt.initiated":
            self.initiated[attempt] = data
        elif kind == "measurement.raw":
            self.raw[attempt].append((ev["seq"], data))
        elif kind == "quarantine.changed" and data.get("status") == "quarantined":
            if "award.decision" not in self.written[attempt]:
                self.quarantined.add(attempt)
            else:  # a later quarantine never changes the award-time decision, only recalls it
                self.quarantined_after[attempt].append(int(ev["seq"]))
        elif kind == "training.included" and kind in self.written[attempt]:
            self.notices[attempt].append((int(ev["seq"]), data))
        elif kind == "evidence.stored" and "award.decision" not in self.written[attempt]:
            self.stored[attempt].append((data, ev["actor"]))  # only what the award could see
        elif kind == "class.mode_changed":
            self.modes[str(data["task_class"])] = (str(ev["at"]), data)
        elif kind in ("evidence.resolved", "indicators.computed", "award.decision",
                      "training.included"):
            if kind == "training.included" and kind not in self.written[attempt]:
                cls = str(self.initiated.get(attempt, {}).get("task_class"))
                self.loop_at[attempt] = _LoopView(self.modes.get(cls),
                                                  list(self.included_at[cls]), str(ev["at"]))
                if data.get("included") is True:
                    self.included_at[cls].append(str(ev["at"]))
            self.written[attempt].setdefault(kind, data)
            if kind == "award.decision":
                self.awarded.append(attempt)


def _loop_decision(training: dict[str, Any], task_class: str, view: _LoopView | None
                   ) -> dict[str, Any]:
    """The loop's part of the training decision (spec 4.7, 9.8, 9.11, 9.19), from the class's
    last mode change and its earlier inclusions as the award saw them."""
    training = {**training, "task_class": task_class}
    if not training["included"] or view is None or view.change is None:
        return training
    since, change = view.change
    mode, why = str(change["mode"]), f"{change['cause']}: {change['reason']}"
    withheld = None
    if mode in ("shut_down", "suspended", "shadow"):
        withheld = f"class {mode} since {since}: {why}"
    elif mode == "limited" and change.get("max_included") is not None:
        cap, per = int(change["max_included"]), int(change["per_seconds"])
        start = (datetime.fromisoformat(view.at) - timedelta(seconds=per)).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")
        if sum(1 for t in view.included if t >= start) >= cap:
            withheld = f"pressure limit: {cap} attempts per {per} s reached"
    if withheld is None:
        return training
    return {**training, "included": False, "class_mode": mode, "withheld": withheld}


def _recall_problems(training: dict[str, Any], notices: list[tuple[int, dict[str, Any]]],
                     quarantined_after: list[int]) -> list[str]:
    """What is wrong with the ``training.included`` events after an attempt's first (spec
    9.11 step 2): the only later one allowed is one recall notice, of an attempt that went into
    training, after a quarantine of it, saying exactly that it is no longer included."""
    problems = []
    for n, (seq, data) in enumerate(notices):
        expected = {"included": False, "mode": training["mode"],
                    "verified": training["verified"], "quarantined": True,
                    "task_class": training["task_class"], "recall": data.get("recall")}
        if not isinstance(data.get("recall"), str) or not data["recall"]:
            problems.append(f"training.included at seq {seq} is a second decision, not a recall")
        elif n > 0:
            problems.append(f"training.included at seq {seq} recalls the attempt again")
        elif training["included"] is not True:
            problems.append(f"training.included at seq {seq} recalls an attempt that never went "
                            "into training")
        elif not any(q < seq for q in quarantined_after):
            problems.append(f"training.included at seq {seq} recalls an attempt that was not "
                            "quarantined before")
        elif canonical_json(data) != canonical_json(expected):
            problems.append(f"training.included at seq {seq} differs from the recall notice "
                            "recompute expects")
    return problems


def recompute_ledger(store: LedgerStore) -> RecomputeReport:
    """Replay every attempt with an award, in ledger order, and compare byte for byte with what
    was written: the evidence resolution, indicators, award (with every violation and the
    rework credit of its instance) and the training decision made at the award.  A later
    quarantine never changes that decision; a later ``training.included`` must be the one
    recall notice of the exploit procedure (see :func:`_recall_problems`).  Raises
    IntegrityError naming the event when a raw measurement of such an attempt does not fit its
    model."""
    report = RecomputeReport()
    log = _Ledger()
    for ev in _events(store):
        log.read(ev)
    history: dict[str, list[tuple[str, str, Decimal, Decimal]]] = defaultdict(list)
    for attempt in log.awarded:
        report.attempts += 1
        init = log.initiated.get(attempt)
        if init is None or init["rules_version"] not in log.rules:
            report.mismatches.append(
                f"attempt {attempt}: its rules (matching their hash) or initiation are not in "
                "the ledger"
            )
            continue
        rules = log.rules[init["rules_version"]]
        # The one reader of measurement.raw (ledger.payloads): the shape is checked there; the
        # arithmetic below stays this module's own, on the plain records.
        raw = [payload_from("measurement.raw", data, seq=seq).to_data()
               for seq, data in log.raw[attempt]]
        resolution, unresolved_reasons, unresolved = _resolve(store, log.stored[attempt], raw)
        resolved_raw = _without(raw, unresolved)
        ind, award = recompute_attempt(rules, init, resolved_raw)
        award["reasons"] = [*award["reasons"], *unresolved_reasons]
        award["violations"] = _violations(rules, ind["checks"], resolved_raw)
        instance = str(init.get("instance") or attempt)
        award["rework"] = _rework(rules, attempt, instance, award, history[instance])
        history[instance].append((attempt, award["outcome"], _num(award["value"]),
                                  _num(award["rework"]["credited"])))
        training: dict[str, Any] = {
            "included": award["training_use"] and attempt not in log.quarantined,
            "mode": award["mode"], "verified": award["verified"]}
        if attempt in log.quarantined:
            training["quarantined"] = True
        training = _loop_decision(training, str(init["task_class"]), log.loop_at.get(attempt))
        problems = _recall_problems(training, log.notices.get(attempt, []),
                                    log.quarantined_after.get(attempt, []))
        if problems:
            report.mismatches += [f"attempt {attempt}: {p}" for p in problems]
            continue
        stored = log.written[attempt]
        bad = [
            kind
            for kind, mine in (("evidence.resolved", resolution), ("indicators.computed", ind),
                               ("award.decision", award), ("training.included", training))
            if canonical_json(stored.get(kind)) != canonical_json(mine)
        ]
        if bad:
            report.mismatches.append(f"attempt {attempt}: {', '.join(bad)} differ on recompute")
        else:
            report.matched += 1
    return report
