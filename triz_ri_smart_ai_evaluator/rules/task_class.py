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
from typing import Any

from pydantic import Field, ValidationInfo, model_validator

from ._values import Frozen, Identifier, Text
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

    def rewarded_indicators(self) -> tuple[str, ...]:
        """Indicators that move the variable reward (spec 11.2 asks each to be controllable)."""
        ids = list(self.combination.multiplied)
        for block in self.combination.blocks:
            ids.extend(i for i in block.indicators if i not in ids)
        return tuple(ids)


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
