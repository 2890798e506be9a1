"""The task class: everything spec 11.1 requires, checked for completeness and coherence.

No I/O.  Field-level rules live on the parts (indicators, checklist, formula); this module adds
the rules that need the whole class: every reference resolves, every indicator has a benchmark
and a place in the combination, the model's parts are present.  Each problem carries the path of
the field it concerns, so a loader can point at the file and line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import Field, ValidationInfo, model_validator

from ._values import DECIMAL_CONTEXT as CTX
from ._values import ONE, ZERO, Frozen, Identifier, Text, UtcInstant
from .checklist import ChecklistItem, Effect, SelfCheck
from .formula import Combination, Confirmation, Formula, Model
from .indicators import Benchmark, Direction, Indicator, TrustedSource

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken rule in a declaration: where (field path) and what."""

    path: Path
    message: str


class Function(Frozen):
    """An AI function (spec 1.1, 2.1) and the result it exists for (1.2, 2.3)."""

    id: Identifier
    description: Text
    result: Text


class Evidence(Frozen):
    """A kind of result evidence (spec 1.14): without it a claim of completion is not enough."""

    id: Identifier
    description: Text
    produced_by: Identifier


class Threat(Frozen):
    """A threat-model entry (spec 2.10): the distortion, where it enters, and the protection."""

    distortion: Text
    entry_point: Text
    protection: Text


class TaskClass(Frozen):
    """A task class with its rules (outputs 12.1-12.4; acceptance 11.1, 11.2)."""

    id: Identifier
    title: Text
    effective_from: UtcInstant = Field(
        description="when this version's formula, thresholds, caps and escrow take effect; "
        "an attempt is judged by the version in force when it started (spec 10.5)"
    )
    functions: tuple[Function, ...] = Field(min_length=1)
    result: Text
    sources: tuple[TrustedSource, ...] = Field(min_length=1)
    indicators: tuple[Indicator, ...] = Field(min_length=1)
    benchmarks: tuple[Benchmark, ...] = Field(min_length=1)
    evidence: tuple[Evidence, ...] = Field(min_length=1)
    checklist: tuple[ChecklistItem, ...] = Field(min_length=1)
    self_checks: tuple[SelfCheck, ...] = Field(min_length=1)
    combination: Combination
    formula: Formula
    confirmation: Confirmation
    threat_model: tuple[Threat, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _coherent(self, info: ValidationInfo) -> TaskClass:
        problems = list(find_problems(self))
        if problems:
            # A loader passes a list in the context to receive every problem with its path;
            # direct construction still refuses the object, naming the first problem.
            sink = info.context.get("problems") if isinstance(info.context, dict) else None
            if isinstance(sink, list):
                sink.extend(problems)
            first = problems[0]
            raise ValueError(f"{_dotted(first.path)}: {first.message}")
        return self

    # -- lookups used by the calculator -------------------------------------------------
    def indicator(self, indicator_id: str) -> Indicator:
        for ind in self.indicators:
            if ind.id == indicator_id:
                return ind
        raise KeyError(indicator_id)

    def benchmark(self, indicator_id: str) -> Benchmark:
        for bm in self.benchmarks:
            if bm.indicator == indicator_id:
                return bm
        raise KeyError(indicator_id)

    def max_performance(self, indicator_id: str) -> Decimal | None:
        """The largest Perf an indicator can reach under its domain, benchmarks and cap, or None
        when it is unbounded (issue 10, spec 4.6)."""
        ind = self.indicator(indicator_id)
        caps = [c.maximum for c in self.combination.caps if c.indicator == indicator_id]
        cap = caps[0] if caps else None
        reach = _uncapped_max_performance(ind, self.benchmark(indicator_id))
        if reach is None:
            return cap
        return reach if cap is None else min(reach, cap)

    def honest_maximum(self) -> Decimal:
        """The largest signal any attempt can earn under this class: the ceiling the property
        tests hold every input to (issue 10).  K is at most 1 and every Perf_overall or block
        performance is limited by its cap (1 unless the class declares one, spec 4.6)."""
        base = self.formula.base_unit
        comb = self.combination
        if self.formula.model is Model.NON_COMPENSATORY_SUM:
            return sum((CTX.multiply(base, comb.block_limit(b)) for b in comb.blocks), ZERO)
        # model 1: B + B x Perf; model 2: B x K + B x Perf with K <= 1.
        return CTX.add(base, CTX.multiply(base, comb.overall_limit()))

    def rewarded_indicators(self) -> tuple[str, ...]:
        """Indicators that move the variable reward (spec 11.2 asks each to be controllable)."""
        ids = list(self.combination.multiplied)
        for block in self.combination.blocks:
            ids.extend(i for i in block.indicators if i not in ids)
        return tuple(ids)


def _uncapped_max_performance(ind: Indicator, bm: Benchmark) -> Decimal | None:
    if ind.direction is Direction.INTERVAL:
        return ONE
    domain = ind.domain
    if ind.direction is Direction.INCREASE:
        highest = domain.highest
        smallest = min(v.value for v in bm.versions if v.value is not None)
        return None if highest is None else CTX.divide(highest, smallest)
    # decrease: Perf = E / F for F > 0, the declared value at F = 0 (spec 1.6).
    assert ind.decrease_rule is not None
    largest = max(v.value for v in bm.versions if v.value is not None)
    at_zero = ind.decrease_rule.perf_at_zero
    lowest_positive = domain.lowest if domain.lowest > ZERO else (ONE if domain.integral else None)
    if lowest_positive is None:
        return None
    return max(at_zero, CTX.divide(largest, lowest_positive))


def _dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(root)"


def _duplicates(name: str, ids: Iterable[str]) -> Iterator[Problem]:
    for value, count in Counter(ids).items():
        if count > 1:
            yield Problem((name,), f"id {value!r} is declared {count} times")


def find_problems(tc: TaskClass) -> Iterator[Problem]:
    """Yield every cross-reference and completeness problem of a task class (spec 11.1)."""
    source_ids = {s.id for s in tc.sources}
    indicator_ids = [i.id for i in tc.indicators]
    known = set(indicator_ids)
    for name, ids in (
        ("sources", [s.id for s in tc.sources]),
        ("indicators", indicator_ids),
        ("checklist", [c.id for c in tc.checklist]),
        ("self_checks", [c.id for c in tc.self_checks]),
        ("evidence", [e.id for e in tc.evidence]),
        ("functions", [f.id for f in tc.functions]),
        ("benchmarks", [b.indicator for b in tc.benchmarks]),
    ):
        yield from _duplicates(name, ids)

    def source_ref(path: Path, ref: str) -> Iterator[Problem]:
        if ref not in source_ids:
            yield Problem(path, f"unknown source {ref!r}; declared: {sorted(source_ids)}")

    for n, ind in enumerate(tc.indicators):
        yield from source_ref(("indicators", n, "source"), ind.source)
    for n, ev in enumerate(tc.evidence):
        yield from source_ref(("evidence", n, "produced_by"), ev.produced_by)
    for n, item in enumerate(tc.checklist):
        yield from source_ref(("checklist", n, "data_source"), item.data_source)
    for n, check in enumerate(tc.self_checks):
        yield from source_ref(("self_checks", n, "data_source"), check.data_source)
    if tc.formula.cost is not None:
        yield from source_ref(("formula", "cost", "source"), tc.formula.cost.source)
    if tc.confirmation.control_source is not None:
        yield from source_ref(("confirmation", "control_source"), tc.confirmation.control_source)

    yield from _benchmark_problems(tc, known)
    yield from _combination_problems(tc, known)
    yield from _domain_problems(tc, known)
    for n, late in enumerate(tc.confirmation.late_indicators):
        if late not in known:
            yield Problem(("confirmation", "late_indicators", n), f"unknown indicator {late!r}")


def _benchmark_problems(tc: TaskClass, known: set[str]) -> Iterator[Problem]:
    benchmarked = {b.indicator for b in tc.benchmarks}
    for n, ind in enumerate(tc.indicators):
        if ind.id not in benchmarked:
            # spec 1.4, 2.6: the benchmark is established in advance, for every indicator.
            yield Problem(("indicators", n, "id"), f"indicator {ind.id!r} has no benchmark")
    for n, bm in enumerate(tc.benchmarks):
        if bm.indicator not in known:
            yield Problem(("benchmarks", n, "indicator"), f"unknown indicator {bm.indicator!r}")
            continue
        band = tc.indicator(bm.indicator).direction is Direction.INTERVAL
        for m, version in enumerate(bm.versions):
            if band != (version.value is None):
                want = "low and high" if band else "value"
                yield Problem(
                    ("benchmarks", n, "versions", m),
                    f"indicator {bm.indicator!r} is {tc.indicator(bm.indicator).direction}: "
                    f"its benchmark needs {want}",
                )


def _domain_problems(tc: TaskClass, known: set[str]) -> Iterator[Problem]:
    benchmarked = {b.indicator for b in tc.benchmarks}
    rewarded = set(tc.rewarded_indicators())
    for n, ind in enumerate(tc.indicators):
        if ind.id not in benchmarked:
            continue  # reported by _benchmark_problems
        for m, version in enumerate(tc.benchmark(ind.id).versions):
            for value in (version.value, version.low, version.high):
                if value is not None and not ind.domain.contains(value):
                    yield Problem(
                        ("benchmarks", [b.indicator for b in tc.benchmarks].index(ind.id),
                         "versions", m),
                        f"benchmark {value} of {ind.id!r} is outside its domain "
                        f"{ind.domain.describe()}",
                    )
        if ind.id in rewarded and tc.max_performance(ind.id) is None:
            # issue 10, spec 4.6, 5.3: an unbounded Perf in a product or block could hide a
            # failure elsewhere; it needs a cap with its justification.
            yield Problem(
                ("indicators", n, "domain"),
                f"spec 4.6: the performance of {ind.id!r} is unbounded under its domain "
                f"{ind.domain.describe()}; declare a cap with its justification",
            )


def _combination_problems(tc: TaskClass, known: set[str]) -> Iterator[Problem]:
    comb = tc.combination
    placed: Counter[str] = Counter()
    for n, ind_id in enumerate(comb.multiplied):
        placed[ind_id] += 1
        if ind_id not in known:
            yield Problem(("combination", "multiplied", n), f"unknown indicator {ind_id!r}")
    for n, block in enumerate(comb.blocks):
        for m, ind_id in enumerate(block.indicators):
            placed[ind_id] += 1
            if ind_id not in known:
                yield Problem(
                    ("combination", "blocks", n, "indicators", m), f"unknown indicator {ind_id!r}"
                )
    for n, ind_id in enumerate(comb.reported_only):
        placed[ind_id] += 1
        if ind_id not in known:
            yield Problem(("combination", "reported_only", n), f"unknown indicator {ind_id!r}")
    for n, ind in enumerate(tc.indicators):
        if placed[ind.id] == 0:
            yield Problem(
                ("indicators", n, "id"),
                f"spec 2.9: indicator {ind.id!r} is neither multiplied, in a block, nor "
                "reported_only",
            )
        elif placed[ind.id] > 1:
            yield Problem(
                ("indicators", n, "id"),
                f"spec 2.9: indicator {ind.id!r} is placed {placed[ind.id]} times in the "
                "combination",
            )
    limits: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("thresholds", tuple(t.indicator for t in comb.thresholds)),
        ("caps", tuple(c.indicator for c in comb.caps)),
    )
    for group, targets in limits:
        seen: set[str] = set()
        for n, target in enumerate(targets):
            if target not in known:
                yield Problem(
                    ("combination", group, n, "indicator"), f"unknown indicator {target!r}"
                )
            if target in seen:
                yield Problem(
                    ("combination", group, n, "indicator"), f"indicator {target!r} has two {group}"
                )
            seen.add(target)

    model = tc.formula.model
    if model is Model.NON_COMPENSATORY_SUM:
        if not comb.blocks or comb.multiplied:
            yield Problem(
                ("combination",),
                "spec 7.4: model non_compensatory_sum uses blocks and no multiplied list",
            )
    elif not comb.multiplied or comb.blocks:
        yield Problem(
            ("combination",),
            f"spec 7.2-7.3: model {model.value} multiplies indicators and has no blocks",
        )
    if model is Model.SEPARATE_BLOCKS and not any(c.effect is Effect.QUALITY for c in tc.checklist):
        yield Problem(
            ("checklist",), "spec 7.3: model separate_blocks needs quality items to measure K"
        )


def loads_context() -> dict[str, Any]:
    """A fresh validation context that collects every problem (see ``TaskClass._coherent``)."""
    return {"problems": []}
