"""Issue 10: the signal fails closed for every hostile input, over random attempt inputs.

Each regression test is named after the hole the audit found; each property runs >= 500 random
attempts per bundled class.  Expected ceilings are recomputed here from the class's declared
numbers (B, caps), never taken from the calculator.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.signal import AttemptInputs, Outcome, Signal

from .factories import (
    DEFECT,
    DOCS,
    PILOT,
    calculator,
    evidence,
    inputs_for,
    pilot_values,
    task_class,
)

CLASSES = (PILOT, DEFECT, DOCS)
MANY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ceiling(tc: TaskClass) -> Decimal:
    """The honest maximum from the declared numbers: model 1 and 2 pay at most B + B (K <= 1,
    Perf_overall limited to 1 when no overall cap is declared); model 3 pays B per block."""
    base = tc.formula.base_unit
    if tc.formula.model.value == "non_compensatory_sum":
        return base * len(tc.combination.blocks)
    return base + base


def negative(tc: TaskClass) -> Decimal:
    return tc.formula.negative_value if tc.formula.negative_value is not None else Decimal(0)


# -- random attempt inputs ---------------------------------------------------------------------


def _fraction_in(low: int, high: int) -> st.SearchStrategy[str]:
    return st.tuples(st.integers(low, high), st.integers(1, 64)).map(lambda t: f"{t[0]}/{t[1]}")


def _value(tc: TaskClass, indicator_id: str) -> st.SearchStrategy[str]:
    kind = tc.indicator(indicator_id).domain.kind.value
    inside = (
        _fraction_in(0, 64).filter(lambda f: int(f.split("/")[0]) <= int(f.split("/")[1]))
        if kind == "proportion"
        else st.integers(0, 10_000).map(str)
    )
    outside = st.sampled_from(["-1", "-1/2", "2", "100", "64/1", "-0.5"]) if kind == "proportion" \
        else st.sampled_from(["-1", "-0.001", "-250"])
    return st.one_of(inside, inside, inside, outside)


def _source(declared: str, tc: TaskClass) -> st.SearchStrategy[str]:
    others = [s.id for s in tc.sources if s.id != declared] + ["policy"]
    return st.one_of(st.just(declared), st.just(declared), st.sampled_from(others))


def _evidence() -> st.SearchStrategy[list[str]]:
    return st.one_of(st.just([]), st.text("abcdef", min_size=1, max_size=5).map(evidence))


@st.composite
def attempt(draw: st.DrawFn, class_id: str) -> dict[str, Any]:
    """A random attempt document for ``class_id``: values in and out of their domains, wrong
    sources, missing evidence, degrees everywhere, obstacles from trusted and untrusted sources,
    claims."""
    tc = task_class(class_id)
    measurements = {}
    for ind in tc.indicators:
        if draw(st.integers(0, 5)) == 0:
            continue  # missing
        measurements[ind.id] = {
            "value": draw(_value(tc, ind.id)),
            "source": draw(_source(ind.source, tc)),
            "evidence": draw(_evidence()),
        }
    checklist = {}
    for item in tc.checklist:
        if draw(st.integers(0, 7)) == 0:
            continue
        state = draw(st.sampled_from(["passed", "passed", "passed", "failed", "degree"]))
        entry: dict[str, Any] = {
            "state": state,
            "source": draw(_source(item.data_source, tc)),
            "evidence": draw(_evidence()),
        }
        if state == "degree":
            entry["degree"] = draw(_fraction_in(0, 8).filter(
                lambda f: int(f.split("/")[0]) <= int(f.split("/")[1])))
        checklist[item.id] = entry
    self_checks = {
        c.id: {
            "performed": draw(st.booleans()) or draw(st.booleans()),
            "source": draw(_source(c.data_source, tc)),
            "evidence": draw(_evidence()),
        }
        for c in tc.self_checks
        if draw(st.integers(0, 7)) != 0
    }
    ids = [i.id for i in tc.indicators]
    obstacles = [
        {
            "kind": draw(st.sampled_from(["external_tool_failure", "source_unavailable",
                                          "input_data_missing", "contradictory_task"])),
            "indicators": draw(st.lists(st.sampled_from(ids), min_size=1, unique=True)),
            "recorded_by": draw(st.sampled_from([s.id for s in tc.sources] + ["policy"])),
            "description": "recorded obstacle",
            "standard_followed": draw(st.booleans()),
            "evidence": draw(_evidence()),
        }
        for _ in range(draw(st.integers(0, 2)))
    ]
    return {
        "measurements": measurements,
        "checklist": checklist,
        "self_checks": self_checks,
        "obstacles": obstacles,
        "claims": draw(st.lists(st.sampled_from(["done", "verified", "fixed"]), max_size=2)),
    }


def compute(class_id: str, doc: dict[str, Any]) -> Signal | None:
    """The signal, or None when the calculator refuses the input (InputError)."""
    try:
        return calculator(class_id).compute(AttemptInputs.model_validate(doc))
    except InputError:
        return None


def _verified_critical_failure(tc: TaskClass, doc: dict[str, Any]) -> bool:
    for item in tc.checklist:
        state = doc["checklist"].get(item.id)
        if (
            item.effect.value == "critical"
            and state is not None
            and state["source"] == item.data_source
            and state["evidence"]
            and state["state"] == "failed"
        ):
            return True
    return False


# -- properties ---------------------------------------------------------------------------------


@pytest.mark.parametrize("class_id", CLASSES)
@MANY
@given(data=st.data())
def test_no_input_pays_more_than_the_honest_maximum(class_id: str, data: st.DataObject) -> None:
    """issue 10, spec 4.6, 5.3: whatever the input, S <= the class's honest maximum."""
    tc = task_class(class_id)
    assert tc.honest_maximum() == ceiling(tc)
    signal = compute(class_id, data.draw(attempt(class_id)))
    if signal is not None:
        assert signal.value <= ceiling(tc)
        assert signal.value >= negative(tc)


@pytest.mark.parametrize("class_id", CLASSES)
@MANY
@given(data=st.data())
def test_a_verified_critical_violation_always_gives_the_negative_value(
    class_id: str, data: st.DataObject
) -> None:
    """issue 10, spec 5.5 before 6.5: no obstacle, claim or over-performance offsets it."""
    tc = task_class(class_id)
    doc = data.draw(attempt(class_id))
    signal = compute(class_id, doc)
    if signal is not None and _verified_critical_failure(tc, doc):
        assert signal.value == negative(tc)
        assert signal.critical_violation
        assert signal.outcome is Outcome.QUALITY_VIOLATION


@pytest.mark.parametrize("class_id", CLASSES)
@MANY
@given(data=st.data())
def test_obstacles_never_pay_more_than_the_neutral_signal(
    class_id: str, data: st.DataObject
) -> None:
    """issue 10, spec 6.5: with obstacles S is at most what it is without them or the neutral
    signal; an obstacle that is not accepted (untrusted source, no evidence, standard not
    followed) changes nothing."""
    tc = task_class(class_id)
    doc = data.draw(attempt(class_id))
    with_obstacles = compute(class_id, doc)
    without = compute(class_id, {**doc, "obstacles": []})
    if with_obstacles is None or without is None:
        return
    neutral = tc.formula.base_unit if tc.formula.neutral.value == "base" else Decimal(0)
    assert with_obstacles.value <= max(without.value, neutral)
    sources = {s.id for s in tc.sources}
    accepted = [
        o for o in doc["obstacles"]
        if o["recorded_by"] in sources and o["evidence"] and o["standard_followed"]
    ]
    if not accepted:
        assert with_obstacles.value == without.value
        assert with_obstacles.outcome == without.outcome


@pytest.mark.parametrize("class_id", CLASSES)
@MANY
@given(data=st.data())
def test_degrees_and_out_of_domain_values_are_refused_never_paid(
    class_id: str, data: st.DataObject
) -> None:
    """issue 10: a degree on a critical or gate item, and a value outside its indicator's
    domain, are refused (InputError, exit 2 on the CLI) instead of counting."""
    tc = task_class(class_id)
    doc = data.draw(attempt(class_id))
    pass_fail = {i.id for i in tc.checklist if i.effect.value != "quality"}
    degree_on_pass_fail = any(
        s["state"] == "degree" for k, s in doc["checklist"].items() if k in pass_fail
    )
    out_of_domain = any(
        not tc.indicator(k).domain.contains(Decimal(m["value"].split("/")[0])
                                            / Decimal(m["value"].split("/")[1])
                                            if "/" in m["value"] else Decimal(m["value"]))
        for k, m in doc["measurements"].items()
    )
    if degree_on_pass_fail or out_of_domain:
        with pytest.raises(InputError):
            calculator(class_id).compute(AttemptInputs.model_validate(doc))
    else:
        assert compute(class_id, doc) is not None


# -- regressions named after the audit's findings ----------------------------------------------


@pytest.mark.parametrize("degree", ["0", "1/2", "1"])
@pytest.mark.parametrize("item", ["secrets_not_disclosed", "end_to_end_delivery"])
def test_degree_zero_on_a_critical_or_gate_item_no_longer_counts_as_passed(
    item: str, degree: str
) -> None:
    """issue 10 class 1: `state: degree, degree: 0` on a critical item passed as "not failed"."""
    with pytest.raises(InputError, match=rf"checklist\.{item}\.state"):
        calculator(PILOT).compute(inputs_for(PILOT, pilot_values(), degrees={item: degree}))


def test_obstacle_does_not_override_a_disclosed_secret_in_pilot_02() -> None:
    """issue 10 class 2: an accepted obstacle turned a disclosed secret into S = +1."""
    obstacle = {"kind": "external_tool_failure", "recorded_by": "harness",
                "indicators": ["delivery"], "standard_followed": True,
                "description": "SMTP host down", "evidence": evidence("o")}
    signal = calculator(PILOT).compute(inputs_for(
        PILOT, {}, failed=("secrets_not_disclosed",), obstacles=(obstacle,)))
    assert signal.value == 0
    assert signal.critical_violation


def test_obstacle_does_not_turn_the_defect_fix_negative_value_positive() -> None:
    """issue 10 class 2: the predefined -1 became +1 under an obstacle."""
    obstacle = {"kind": "source_unavailable", "recorded_by": "ci_runner",
                "indicators": ["reproduction_fixed"], "standard_followed": True,
                "description": "CI runner lost", "evidence": evidence("o")}
    signal = calculator(DEFECT).compute(inputs_for(
        DEFECT, {}, failed=("tests_unmodified",), obstacles=(obstacle,)))
    assert signal.value == Decimal(-1)


def test_obstacle_neutralises_only_the_indicators_it_names() -> None:
    """issue 10 class 2: an obstacle naming delivery does not excuse a missing regression."""
    obstacle = {"kind": "external_tool_failure", "recorded_by": "harness",
                "indicators": ["delivery"], "standard_followed": True,
                "description": "SMTP host down", "evidence": evidence("o")}
    values = {k: v for k, v in pilot_values().items() if k not in ("delivery", "regression")}
    signal = calculator(PILOT).compute(inputs_for(PILOT, values, obstacles=(obstacle,)))
    assert signal.outcome is Outcome.NOT_VERIFIED
    assert signal.value == 0
    assert any("regression" in r for r in signal.reasons)


def test_neutral_signal_is_withheld_while_a_critical_item_is_unverified() -> None:
    """Fail closed (spec 3.8, 6.5): the neutral B is for admissible compliance; with a critical
    check unverified the obstacle still gives objectively_impossible, but S = 0."""
    obstacle = {"kind": "external_tool_failure", "recorded_by": "harness",
                "indicators": ["delivery", "field_fidelity", "negative_rejection"],
                "standard_followed": True, "description": "SMTP host down",
                "evidence": evidence("o")}
    doc = inputs_for(PILOT, {"regression": "1", "status_correctness": "1", "recovery": "1"},
                     obstacles=(obstacle,)).model_dump(mode="json")
    del doc["checklist"]["no_false_success"]
    signal = calculator(PILOT).compute(AttemptInputs.model_validate(doc))
    assert signal.outcome is Outcome.OBJECTIVELY_IMPOSSIBLE
    assert signal.value == 0


def test_an_obstacle_naming_an_undeclared_indicator_is_refused() -> None:
    obstacle = {"kind": "external_tool_failure", "recorded_by": "harness",
                "indicators": ["politeness"], "standard_followed": True,
                "description": "x", "evidence": evidence("o")}
    with pytest.raises(InputError, match="politeness"):
        calculator(PILOT).compute(inputs_for(PILOT, {}, obstacles=(obstacle,)))


@pytest.mark.parametrize(
    ("indicator", "value"),
    [
        ("delivery", "100"),  # a proportion of 100 hid 98 % field loss
        ("field_fidelity", "-1/2"),  # two negative proportions multiplied into a bonus
        ("negative_rejection", "-1"),
        ("regression", "41/40"),
    ],
)
def test_values_outside_their_domain_are_refused_not_clamped(indicator: str, value: str) -> None:
    """issue 10 class 3: refused with the field named, never clamped silently."""
    values = pilot_values()
    values[indicator] = value
    with pytest.raises(InputError, match=rf"measurements\.{indicator}\.value: .*proportion"):
        calculator(PILOT).compute(inputs_for(PILOT, values))


def test_one_block_far_above_its_benchmark_cannot_outweigh_a_failed_block() -> None:
    """issue 10 class 3, spec 7.4: model 3 limits each block to B (its cap, 1 by default)."""
    values = {"citation_fidelity": "1", "evidence_integrity": "1", "contradiction_free": "0",
              "caveat_rate": "0"}
    signal = calculator(DOCS).compute(inputs_for(DOCS, values))
    assert signal.value == 2  # two blocks at B, the failed one at 0
    assert all(b.value <= 1 for b in signal.blocks)


def test_a_negative_cost_is_refused() -> None:
    with pytest.raises(InputError, match="cost"):
        calculator(PILOT).compute(inputs_for(PILOT, pilot_values(), cost="-5"))


def test_honest_maximum_of_every_bundled_class() -> None:
    """Honest maxima (docs/catalogue.md): pilot 02 2B, defect fix 2B, document step 3B (B = 1)."""
    assert task_class(PILOT).honest_maximum() == 2
    assert task_class(DEFECT).honest_maximum() == 2
    assert task_class(DOCS).honest_maximum() == 3
