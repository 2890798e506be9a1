"""The training-signal calculator: a pure function of pinned rules and verified inputs.

No I/O, no clock, no randomness, no attempt id (DESIGN: the same rule for the same work, spec 3.4).
All arithmetic is Decimal in the project's one context, so the same inputs give the same bits on
every machine (spec 10.2).  The order of the decision follows the specification:

1. a verified critical violation gives the predefined negative value or 0 (5.5, 7.2), whatever
   else was recorded: no obstacle, over-performance or claim offsets it;
2. an uncontrollable obstacle recorded by a trusted source with evidence neutralises the
   indicators it names (6.5, 11.11): when every rewarded indicator left unmeasured is named by
   one, the outcome is objectively impossible and S is the neutral signal, or 0 while a critical
   item or a self-check is itself unverified (fail closed);
3. anything unverified gives no positive signal and says so, never a silent zero (6.7, 6.8);
4. an omitted mandatory self-check makes the solution inadmissible (6.9, 9.18, 11.19);
5. a failed gate gives 0 (5.4); K below the mandatory level gives 0 or the negative value (7.2);
6. only then performance, thresholds (4.5), caps (4.6) and the model's formula (7.2-7.4); each
   block's and the overall performance are limited to 1 unless the class declares a cap, so no
   input pays more than the class's honest maximum (issue 10).

Inputs outside the rules are refused with InputError, never clamped: a value outside its
indicator's domain, a degree on a critical or gate item (pass/fail only), a negative cost, an id
the class does not declare.
7. costs are shown only for an admissible solution (3.7).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from ..errors import InputError
from ..rules._values import DECIMAL_CONTEXT as CTX
from ..rules._values import ONE, ZERO, format_exact
from ..rules.checklist import Effect
from ..rules.formula import Model, Neutral
from ..rules.indicators import BenchmarkVersion, Direction, Indicator
from ..rules.versions import PinnedRules
from .inputs import AttemptInputs, ItemState, Measurement, Obstacle, SelfCheckState
from .result import BlockLine, CheckLine, IndicatorLine, Outcome, Signal, Status

_VERIFIED = Status.VERIFIED
_new_tuple = tuple.__new__
_INCREASE = Direction.INCREASE
_DECREASE = Direction.DECREASE
_MISSING = Status.MISSING
_WRONG_SOURCE = Status.WRONG_SOURCE
_NO_EVIDENCE = Status.NO_EVIDENCE


def performance(indicator: Indicator, benchmark: BenchmarkVersion, value: Decimal) -> Decimal:
    """Perf of one verified value against its benchmark under the indicator's predefined rule.

    increase: F / E (spec 1.6); decrease: E / F, or the declared value at F = 0; interval: 1 inside
    the band, falling linearly to 0 over the declared tolerance outside it.
    """
    direction = indicator.direction
    if direction is _INCREASE:
        assert benchmark.value is not None
        return CTX.divide(value, benchmark.value)
    if direction is _DECREASE:
        assert benchmark.value is not None
        assert indicator.decrease_rule is not None
        if value <= ZERO:
            return indicator.decrease_rule.perf_at_zero
        return CTX.divide(benchmark.value, value)
    assert benchmark.low is not None
    assert benchmark.high is not None
    assert indicator.interval_rule is not None
    if value < benchmark.low:
        below = CTX.subtract(benchmark.low, value)
        miss = CTX.divide(below, indicator.interval_rule.tolerance_below)
    elif value > benchmark.high:
        above = CTX.subtract(value, benchmark.high)
        miss = CTX.divide(above, indicator.interval_rule.tolerance_above)
    else:
        return ONE
    return max(ZERO, CTX.subtract(ONE, miss))


def _product(values: list[Decimal]) -> Decimal:
    result = ONE
    for v in values:
        result = CTX.multiply(result, v)
    return result


def _benchmark_text(bm: BenchmarkVersion) -> str:
    if bm.value is not None:
        return format_exact(bm.value)
    assert bm.low is not None
    assert bm.high is not None
    return f"[{format_exact(bm.low)}, {format_exact(bm.high)}]"


def _classify(
    checks: tuple[CheckLine, ...],
) -> tuple[list[str], list[str], list[str], list[str], list[Decimal]]:
    """One pass over the checks: failed critical items, unverified items, omitted self-checks,
    failed gates and the scores of quality items."""
    failed_critical: list[str] = []
    unverified: list[str] = []
    omitted: list[str] = []
    failed_gates: list[str] = []
    quality: list[Decimal] = []
    for c in checks:
        kind = c.kind
        if kind == "self_check":
            if c.state != "performed":
                omitted.append(c.id)
        elif c.status is not _VERIFIED:
            unverified.append(f"check {c.id}: {c.status.value}")
        elif kind == "critical":
            # issue 10: "not failed" is never "passed"; only an explicit pass counts.
            if c.state != "passed":
                failed_critical.append(c.id)
        elif kind == "gate":
            if c.state != "passed":
                failed_gates.append(c.id)
        elif c.score is not None:
            quality.append(c.score)
    return failed_critical, unverified, omitted, failed_gates, quality


def describe_formula(pinned: PinnedRules) -> str:
    """The formula of a pinned task class in words and symbols (spec 3.2)."""
    tc = pinned.task_class
    names = {i.id: i.name for i in tc.indicators}
    product = " × ".join(names[i] for i in tc.combination.multiplied)
    negative = tc.formula.negative_value
    on_critical = "0" if negative is None else format_exact(negative)
    gates = f"S = {on_critical} on a critical violation; S = 0 when a gate fails"
    if tc.formula.model is Model.GATE:
        return f"{gates}; else S = B + B × ({product})"
    if tc.formula.model is Model.SEPARATE_BLOCKS:
        return f"{gates}; else S = B × K + B × ({product})"
    parts = " + ".join(
        f"S_{b.id}({' × '.join(names[i] for i in b.indicators)} ≥ {format_exact(b.threshold)})"
        for b in tc.combination.blocks
    )
    return f"{gates}; else S = {parts}, each block B × Perf or 0 below its threshold"


class SignalCalculator:
    """Computes signals under one pinned rules version.  Reuse it for many attempts."""

    def __init__(self, pinned: PinnedRules) -> None:
        tc = pinned.task_class
        self.pinned = pinned
        self._tc = tc
        self._formula = tc.formula
        self._base = tc.formula.base_unit
        self._formula_text = describe_formula(pinned)
        self._functions = tuple(f.id for f in tc.functions)
        self._sources = {s.id for s in tc.sources}
        roles: dict[str, str] = dict.fromkeys(tc.combination.multiplied, "multiplied")
        for block in tc.combination.blocks:
            roles.update(dict.fromkeys(block.indicators, f"block:{block.id}"))
        roles.update(dict.fromkeys(tc.combination.reported_only, "reported_only"))
        self._roles = roles
        self._rewarded = frozenset(tc.rewarded_indicators())
        self._minimum = {t.indicator: t.minimum for t in tc.combination.thresholds}
        self._cap = {c.indicator: c.maximum for c in tc.combination.caps}
        self._overall_limit = tc.combination.overall_limit()
        self._block_limits = tuple(tc.combination.block_limit(b) for b in tc.combination.blocks)
        # Per indicator: (lowest, highest or None, whole numbers only, description).
        self._domains = {
            ind.id: (
                ind.domain.lowest,
                ind.domain.highest,
                ind.domain.integral,
                ind.domain.describe(),
            )
            for ind in tc.indicators
        }
        self._pass_fail_items = frozenset(
            i.id for i in tc.checklist if i.effect is not Effect.QUALITY
        )
        # Per indicator: what the hot loop needs, with the constant head of its IndicatorLine.
        self._indicators = tuple(
            (
                ind.id,
                ind,
                pinned.benchmarks[ind.id],
                (
                    ind.id,
                    ind.name,
                    ind.unit,
                    ind.direction.value,
                    roles[ind.id],
                    _benchmark_text(pinned.benchmarks[ind.id]),
                    pinned.benchmarks[ind.id].version,
                    ind.source,
                ),
                pinned.benchmarks[ind.id].value if ind.direction is _INCREASE else None,
                self._cap.get(ind.id),
                self._minimum.get(ind.id),
            )
            for ind in tc.indicators
        )
        # Per-item facts precomputed once: the hot path reads plain strings, not enum properties.
        self._items = tuple((i.id, i.effect.value, i.data_source) for i in tc.checklist)
        self._item_ids = frozenset(i.id for i in tc.checklist)
        self._self_checks = tuple((c.id, c.data_source) for c in tc.self_checks)
        self._self_check_ids = frozenset(c.id for c in tc.self_checks)
        self._indicator_ids = frozenset(i.id for i in tc.indicators)
        self._delayed = tc.confirmation.kind == "delayed"
        self._escrow_share = tc.confirmation.escrow_share or ZERO
        negative = tc.formula.negative_value
        self._negative = negative if negative is not None else ZERO
        self._cost_id = tc.formula.cost.id if tc.formula.cost is not None else None
        self._line_cache: dict[tuple[object, ...], CheckLine] = {}
        # The first seven fields of every Signal of this calculator, in Signal's field order.
        self._header = (
            tc.id,
            pinned.version,
            self._functions,
            tc.formula.model.value,
            tc.formula.mode.value,
            self._formula_text,
            self._base,
        )

    # -- input checks -----------------------------------------------------------------
    def _check_ids(self, inputs: AttemptInputs) -> None:
        for name, given, known in (
            ("measurement", inputs.measurements, self._indicator_ids),
            ("checklist item", inputs.checklist, self._item_ids),
            ("self-check", inputs.self_checks, self._self_check_ids),
        ):
            if given.keys() <= known:
                continue
            unknown = sorted(given.keys() - known)
            if unknown:
                # spec 11.12: a value for something the class does not declare cannot count.
                raise InputError(
                    f"{self._tc.id}: {name} {unknown[0]!r} is not declared by the task class"
                )
        extra_costs = sorted(k for k in inputs.costs if k != self._cost_id)
        if extra_costs:
            raise InputError(f"{self._tc.id}: cost {extra_costs[0]!r} is not the class's cost C")
        for cost_id, cost in inputs.costs.items():
            if cost < ZERO:
                raise InputError(f"costs.{cost_id}: {cost} is negative; a cost is >= 0 (spec 3.7)")
        for n, obstacle in enumerate(inputs.obstacles):
            for ind_id in obstacle.indicators:
                if ind_id not in self._indicator_ids:
                    raise InputError(
                        f"obstacles.{n}.indicators: {ind_id!r} is not an indicator of "
                        f"{self._tc.id}"
                    )
        for item_id, state in inputs.checklist.items():
            if state.state == "degree" and item_id in self._pass_fail_items:
                # issue 10, spec 5.4, 5.5: a critical requirement or a gate is met or not; a
                # degree (0 included) would let "not failed" pass for "passed".
                raise InputError(
                    f"checklist.{item_id}.state: 'degree' is not allowed; a critical or gate "
                    "item is 'passed' or 'failed' (spec 5.4, 5.5)"
                )
        domains = self._domains
        for ind_id, m in inputs.measurements.items():
            lowest, highest, integral, text = domains[ind_id]
            value = m.value
            if (
                value < lowest
                or (highest is not None and value > highest)
                or (integral and value != value.to_integral_value())
            ):
                # issue 10: refused, never clamped; a clamp would hide the input's error.
                raise InputError(
                    f"measurements.{ind_id}.value: {value} is outside the domain of "
                    f"{ind_id!r}, {text}"
                )

    @staticmethod
    def _status(record: Measurement | ItemState | SelfCheckState | None, source: str) -> Status:
        if record is None:
            return _MISSING
        if record.source != source:
            return _WRONG_SOURCE
        if not record.evidence:
            return _NO_EVIDENCE
        return _VERIFIED

    # -- the computation --------------------------------------------------------------
    def compute(self, inputs: AttemptInputs) -> Signal:
        """The signal of one attempt.  Raises InputError for ids the class does not declare."""
        self._check_ids(inputs)
        reasons: list[str] = []
        lines, perf = self._indicator_lines(inputs)
        checks = self._check_lines(inputs)
        obstacles = self._accepted_obstacles(inputs)
        claims = tuple(inputs.claims)

        def finish(
            outcome: Outcome,
            value: Decimal,
            *,
            critical: bool = False,
            k: Decimal | None = None,
            overall: Decimal | None = None,
            blocks: tuple[BlockLine, ...] = (),
            cost: Decimal | None = None,
        ) -> Signal:
            held = ZERO
            if self._delayed and value > ZERO:
                held = CTX.multiply(value, self._escrow_share)
            # Positional construction, header fields precomputed once per calculator.
            return Signal(
                *self._header, lines, checks, blocks, k, overall, outcome, tuple(reasons),
                critical, claims, obstacles, self._cost_id, cost, value, self._delayed, held,
                CTX.subtract(value, held),
            )

        failed_critical, unverified_checks, omitted, failed_gates, quality = _classify(checks)
        if failed_critical:
            # spec 5.5 before 6.5: a verified critical violation is never neutralised.
            reasons.extend(f"critical violation: {i}" for i in failed_critical)
            return finish(Outcome.QUALITY_VIOLATION, self._negative, critical=True)

        if obstacles:
            neutral = self._neutralised(inputs, lines, checks, reasons)
            if neutral is not None:
                return finish(Outcome.OBJECTIVELY_IMPOSSIBLE, neutral)

        unverified = [
            f"indicator {line.id}: {line.status.value}"
            for line in lines
            if line.status is not _VERIFIED and line.id in self._rewarded
        ]
        unverified += unverified_checks
        if unverified:
            # spec 6.8, 8.8, 11.10: without evidence a claim stays a claim; fail closed.
            reasons.extend(unverified)
            outcome = Outcome.CLAIMED_NOT_VERIFIED if claims else Outcome.NOT_VERIFIED
            return finish(outcome, ZERO)

        if omitted:
            # spec 6.9, 9.18, 11.19: not admissible, whatever it saved; costs are not compared.
            reasons.extend(f"mandatory self-check omitted: {i}" for i in omitted)
            return finish(Outcome.QUALITY_VIOLATION, ZERO)

        if failed_gates:
            reasons.extend(f"gate failed: {i}" for i in failed_gates)
            return finish(Outcome.NOT_OBTAINED, ZERO)

        k = CTX.divide(sum(quality, ZERO), Decimal(len(quality))) if quality else ONE
        if self._formula.model is Model.GATE and k < self._formula.quality_minimum:
            reasons.append(f"K {format_exact(k)} below the mandatory level")
            return finish(Outcome.QUALITY_VIOLATION, self._negative, k=k)

        cost = inputs.costs.get(self._cost_id) if self._cost_id is not None else None
        below = [line.id for line in lines if line.below_minimum]
        reasons.extend(f"below minimum performance: {i}" for i in below)
        if self._formula.model is Model.NON_COMPENSATORY_SUM:
            blocks = self._blocks(perf, below)
            value = sum((b.value for b in blocks), ZERO)
            reached = [b for b in blocks if b.value > ZERO]
            outcome = self._outcome(perf, any_result=bool(reached))
            return finish(outcome, value, k=k, blocks=blocks, cost=cost)

        factors = [perf[i] for i in self._tc.combination.multiplied]
        overall = ZERO if any(i in below for i in self._tc.combination.multiplied) else (
            _product(factors)
        )
        # spec 4.6, 5.3: over-performance is limited; the honest maximum holds.  The breakdown
        # shows the limited Perf_overall beside each indicator's own Perf.
        overall = min(overall, self._overall_limit)
        variable = CTX.multiply(self._base, overall)
        if self._formula.model is Model.GATE:
            value = CTX.add(self._base, variable)
        else:
            value = CTX.add(CTX.multiply(self._base, k), variable)
        outcome = self._outcome(perf, any_result=overall > ZERO)
        return finish(outcome, value, k=k, overall=overall, cost=cost)

    def _outcome(self, perf: Mapping[str, Decimal], *, any_result: bool) -> Outcome:
        if not any_result:
            return Outcome.NOT_OBTAINED
        if all(perf[i] >= ONE for i in self._rewarded):
            return Outcome.OBTAINED
        return Outcome.PARTIAL

    def _blocks(self, perf: Mapping[str, Decimal], below: list[str]) -> tuple[BlockLine, ...]:
        out = []
        for block, limit in zip(self._tc.combination.blocks, self._block_limits, strict=True):
            # spec 5.4, 4.6: a block is limited to its cap (1 unless declared), so one block
            # far above its benchmark cannot outweigh a failed block.
            p = min(_product([perf[i] for i in block.indicators]), limit)
            reached = p >= block.threshold and not any(i in below for i in block.indicators)
            value = CTX.multiply(self._base, p) if reached else ZERO
            out.append(BlockLine(block.id, p, block.threshold, value))
        return tuple(out)

    def _indicator_lines(
        self, inputs: AttemptInputs
    ) -> tuple[tuple[IndicatorLine, ...], dict[str, Decimal]]:
        lines = []
        perf: dict[str, Decimal] = {}
        measurements = inputs.measurements
        make = _new_tuple
        for ind_id, ind, bm, rest, ratio_of, cap, minimum in self._indicators:
            m = measurements.get(ind_id)
            status = self._status(m, ind.source)
            if status is not _VERIFIED or m is None:
                evidence = m.evidence if m is not None else ()
                lines.append(make(IndicatorLine, (*rest, status, None, evidence, None, cap,
                                                  minimum, False)))
                continue
            value = m.value
            # The common case, increase (Perf = F / E), without a call; others via performance().
            p = CTX.divide(value, ratio_of) if ratio_of is not None else performance(ind, bm, value)
            if cap is not None and p > cap:
                p = cap
            below = minimum is not None and p < minimum
            perf[ind_id] = p
            lines.append(make(IndicatorLine, (*rest, status, value, m.evidence, p, cap, minimum,
                                              below)))
        return tuple(lines), perf

    def _check_lines(self, inputs: AttemptInputs) -> tuple[CheckLine, ...]:
        # Check lines take few distinct values, so they are memoised per calculator (they are
        # immutable); this keeps the full breakdown cheap enough for a training loop.
        cache = self._line_cache
        if len(cache) > 4096:
            cache.clear()
        out = []
        given = inputs.checklist
        for item_id, kind, data_source in self._items:
            state = given.get(item_id)
            # Inlined _status(): this loop runs for every item of every attempt.
            if state is None:
                status = _MISSING
            elif state.source != data_source:
                status = _WRONG_SOURCE
            elif not state.evidence:
                status = _NO_EVIDENCE
            else:
                status = _VERIFIED
            key: tuple[object, ...] = (item_id, status, state.state, state.degree) if (
                status is _VERIFIED and state is not None
            ) else (item_id, status)
            line = cache.get(key)
            if line is None:
                if status is _VERIFIED and state is not None:
                    line = CheckLine(item_id, kind, status, state.state, state.score)
                else:
                    line = CheckLine(item_id, kind, status, "unverified", None)
                cache[key] = line
            out.append(line)
        performed = inputs.self_checks
        for check_id, data_source in self._self_checks:
            sc = performed.get(check_id)
            if sc is None:
                status = _MISSING
            elif sc.source != data_source:
                status = _WRONG_SOURCE
            elif not sc.evidence:
                status = _NO_EVIDENCE
            else:
                status = _VERIFIED
            done = status is _VERIFIED and sc is not None and sc.performed
            check_key = (check_id, status, done)
            line = cache.get(check_key)
            if line is None:
                label = "performed" if done else "omitted"
                line = CheckLine(check_id, "self_check", status, label, None)
                cache[check_key] = line
            out.append(line)
        return tuple(out)

    def _neutralised(
        self,
        inputs: AttemptInputs,
        lines: tuple[IndicatorLine, ...],
        checks: tuple[CheckLine, ...],
        reasons: list[str],
    ) -> Decimal | None:
        """The neutral signal when accepted obstacles name every rewarded indicator left
        unmeasured (spec 6.5, 11.11); None when the obstacles neutralise nothing."""
        unmeasured = [
            line.id for line in lines if line.status is not _VERIFIED and line.id in self._rewarded
        ]
        if not unmeasured:
            return None  # everything was measured: the measured result stands
        covered = self._covered(inputs)
        uncovered = [i for i in unmeasured if i not in covered]
        if uncovered:
            reasons.append(f"obstacle does not name {', '.join(uncovered)}; not neutralised")
            return None
        # spec 6.5, 11.11: what the obstacle kept from being measured is not poor work.
        reasons.append(
            "uncontrollable obstacle recorded by a trusted source kept "
            f"{', '.join(unmeasured)} from being measured"
        )
        if not self._admissible(checks):
            reasons.append(
                "neutral signal withheld: a critical item or mandatory self-check is not verified"
            )
            return ZERO
        return self._base if self._formula.neutral is Neutral.BASE else ZERO

    def _is_accepted(self, obstacle: Obstacle) -> bool:
        # spec 6.5: only an obstacle recorded by a trusted source of this class, with evidence,
        # and with the prescribed standard of action followed, is accepted.
        return (
            obstacle.recorded_by in self._sources
            and bool(obstacle.evidence)
            and obstacle.standard_followed
        )

    def _accepted_obstacles(self, inputs: AttemptInputs) -> tuple[str, ...]:
        return tuple(
            f"{o.kind.value} (recorded by {o.recorded_by}; affects {', '.join(o.indicators)})"
            for o in inputs.obstacles
            if self._is_accepted(o)
        )

    def _covered(self, inputs: AttemptInputs) -> frozenset[str]:
        """The indicators named by accepted obstacles."""
        return frozenset(
            i for o in inputs.obstacles if self._is_accepted(o) for i in o.indicators
        )

    @staticmethod
    def _admissible(checks: tuple[CheckLine, ...]) -> bool:
        """Every critical item verified passed and every self-check verified performed: only
        then is the neutral signal for admissible compliance paid (spec 3.8, 6.5)."""
        for c in checks:
            if c.kind == "critical" and (c.status is not _VERIFIED or c.state != "passed"):
                return False
            if c.kind == "self_check" and c.state != "performed":
                return False
        return True


def compute_signal(pinned: PinnedRules, inputs: AttemptInputs) -> Signal:
    """Compute one signal.  For many attempts under the same rules, reuse a SignalCalculator."""
    return SignalCalculator(pinned).compute(inputs)


# Effects are compared by value in CheckLine.kind; keep the two vocabularies in step.
assert {e.value for e in Effect} == {"critical", "gate", "quality"}
