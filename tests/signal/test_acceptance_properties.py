"""Property tests for the signal acceptance tests of spec 11.3-11.12 and 11.19.

Each test is named after the acceptance test it demonstrates.  Expected values are recomputed in
the test with exact fractions from the generated counts, never taken from the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.signal import (
    AttemptInputs,
    Outcome,
    SignalCalculator,
    instance_signal,
)

from .factories import (
    DEFECT,
    DOCS,
    PILOT,
    STARTED,
    calculator,
    inputs_for,
    pilot_values,
    task_class,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PILOT_CRITICAL = tuple(i.id for i in task_class(PILOT).checklist if i.effect.value == "critical")
PILOT_GATES = tuple(i.id for i in task_class(PILOT).checklist if i.effect.value == "gate")

counts = st.fixed_dictionaries(
    {
        "delivered": st.integers(0, 40),
        "fields": st.integers(0, 160),
        "rejected": st.integers(0, 40),
        "status": st.integers(0, 100),
        "recovered": st.integers(0, 10),
        "regression": st.integers(0, 4),
    }
)


def expected_pilot(c: dict[str, int]) -> Fraction:
    """pilot 10: S = B + B x (Delivery x Field fidelity x Negative rejection x Regression), B=1."""
    product = (
        Fraction(c["delivered"], 40)
        * Fraction(c["fields"], 160)
        * Fraction(c["rejected"], 40)
        * Fraction(c["regression"], 4)
    )
    return 1 + product


def close(value: Decimal, expected: Fraction) -> bool:
    return abs(Fraction(value) - expected) < Fraction(1, 10**30)


@SETTINGS
@given(c=counts)
def test_11_3_signal_is_exactly_the_declared_formula_with_no_overall_coefficient(c):
    """spec 11.3, 5.6, 5.7: nothing but the declared indicators enters S (pilot formula)."""
    signal = calculator(PILOT).compute(inputs_for(PILOT, pilot_values(**c)))
    assert close(signal.value, expected_pilot(c))


@SETTINGS
@given(
    c=counts,
    failed=st.lists(st.sampled_from(PILOT_CRITICAL), min_size=1, unique=True),
)
def test_11_4_critical_failure_is_never_offset_by_overperformance(c, failed):
    """spec 11.4, 5.5: a critical violation gives S = 0 (pilot has no negative value) however
    well every other indicator does (issue 10: values above a proportion's domain are refused,
    so the best an indicator can show is its maximum)."""
    values = pilot_values(**c)
    values["delivery"] = "40/40"
    values["regression"] = "4/4"
    signal = calculator(PILOT).compute(inputs_for(PILOT, values, failed=tuple(failed)))
    assert signal.value == 0
    assert signal.outcome is Outcome.QUALITY_VIOLATION
    assert signal.critical_violation


@SETTINGS
@given(
    rep=st.integers(0, 40), rep_boost=st.integers(1, 1000), failed=st.booleans()
)
def test_11_4_critical_failure_takes_the_predefined_negative_value(rep, rep_boost, failed):
    """spec 7.2: where a class predefines a negative signal, a critical violation gets it."""
    values = {
        "reproduction_fixed": f"{min(rep * rep_boost, 40)}/40",
        "regression_suite": "1",
        "p95_latency_ms": "1",
        "recurrence_free": "1",
    }
    signal = calculator(DEFECT).compute(
        inputs_for(DEFECT, values, failed=("tests_unmodified",) if failed else ())
    )
    if failed:
        assert signal.value == Decimal(-1)
    else:
        assert signal.value > 0


@SETTINGS
@given(
    cit=st.integers(0, 20), ev=st.integers(0, 20), con=st.integers(0, 20),
    over=st.integers(1, 10**4),
)
def test_11_4_non_compensatory_blocks_never_see_each_other(cit, ev, con, over):
    """spec 7.4, 5.4: in model 3 each block is B x Perf when it reaches its threshold, else 0;
    one block at its best never lifts another."""
    values = {
        "citation_fidelity": f"{cit}/20",
        "evidence_integrity": f"{min(ev * over, 20)}/20",
        "contradiction_free": f"{con}/20",
        "caveat_rate": "0",
    }
    signal = calculator(DOCS).compute(inputs_for(DOCS, values))

    def block(num: int, den: int) -> Fraction:
        perf = Fraction(num, den)
        return perf if perf >= 1 else Fraction(0)

    expected = block(cit, 20) + block(min(ev * over, 20), 20) + block(con, 20)
    assert close(signal.value, expected)
    by_id = {b.id: b.value for b in signal.blocks}
    if cit < 20:
        assert by_id["citations"] == 0
    if con < 20:
        assert by_id["faithfulness"] == 0


moments = st.datetimes(
    # pilot 02's rules version 3 takes effect 2026-12-05T08:45Z (ADR 0012)
    min_value=datetime(2026, 12, 5, 9),  # noqa: DTZ001 - hypothesis takes naive bounds
    max_value=datetime(2026, 12, 31),  # noqa: DTZ001
    timezones=st.just(UTC),
)


@SETTINGS
@given(c=counts, t1=moments, t2=moments, claims=st.lists(st.text(max_size=40), max_size=3))
def test_11_5_identical_results_get_identical_signals(c, t1, t2, claims):
    """spec 11.5, 3.4: the same verified inputs give the same signal for any attempt time,
    calculator instance or claims; the arithmetic takes no attempt id, clock or mode flag."""
    inputs = inputs_for(PILOT, pilot_values(**c))
    with_claims = inputs_for(PILOT, pilot_values(**c), claims=tuple(claims))
    first = calculator(PILOT, t1).compute(inputs)
    second = calculator(PILOT, t2).compute(with_claims)
    assert first.value == second.value
    assert first.to_dict()["signal"] == second.to_dict()["signal"]
    assert first.to_dict()["indicators"] == second.to_dict()["indicators"]


def test_11_5_the_calculator_accepts_nothing_but_verified_inputs():
    """spec 3.4: compute() has no parameter through which an attempt id, time, instance or
    urgency flag could enter the arithmetic."""
    import inspect

    params = list(inspect.signature(SignalCalculator.compute).parameters)
    assert params == ["self", "inputs"]
    assert set(AttemptInputs.model_fields) == {
        "measurements", "checklist", "self_checks", "costs", "obstacles", "claims",
    }


@SETTINGS
@given(correct=counts, degraded=counts)
def test_11_6_degrading_then_correcting_never_beats_correct_at_once(correct, degraded):
    """spec 11.6, 3.5, 8.6: the instance earns the first measured attempt's signal; a worse
    first attempt followed by the correct one is strictly less advantageous."""
    calc = calculator(PILOT)
    right = calc.compute(inputs_for(PILOT, pilot_values(**correct)))
    worse = calc.compute(inputs_for(PILOT, pilot_values(**degraded)))
    assume(worse.value < right.value)
    assert instance_signal([worse, right]) < instance_signal([right])
    assert instance_signal([right, right]) == instance_signal([right])  # rework earns nothing


def test_11_6_an_uncontrollable_first_attempt_does_not_consume_the_instance():
    """spec 6.5: a recorded obstacle on the first attempt leaves the retry its full signal."""
    calc = calculator(PILOT)
    obstacle = {
        "kind": "external_tool_failure", "recorded_by": "harness", "standard_followed": True,
        "indicators": ["delivery", "field_fidelity", "negative_rejection", "regression"],
        "description": "sandbox host lost its network namespace", "evidence": ["a" * 64],
    }
    blocked = calc.compute(inputs_for(PILOT, {}, obstacles=(obstacle,)))
    assert blocked.outcome is Outcome.OBJECTIVELY_IMPOSSIBLE
    done = calc.compute(inputs_for(PILOT, pilot_values()))
    assert instance_signal([blocked, done]) == done.value == 2


@SETTINGS
@given(c=counts, delay_days=st.integers(0, 400))
def test_11_7_delaying_a_completed_result_never_raises_the_signal(c, delay_days):
    """spec 11.7, 3.6: rules are pinned at the attempt's start, and completion time is not an
    input at all.  An attempt started before the p95 benchmark change is judged against the
    start-time benchmark (250 ms) however long its completion is delayed past the change."""
    started = datetime(2026, 12, 20, tzinfo=UTC)
    completed = started + timedelta(days=delay_days)
    calc = SignalCalculator(pin(task_class(DEFECT), started_at=started))
    latency = 150 + c["fields"]
    values = {
        "reproduction_fixed": f"{c['delivered']}/40",
        "regression_suite": "1",
        "p95_latency_ms": str(latency),
        "recurrence_free": "1",
    }
    signal = calc.compute(inputs_for(DEFECT, values))
    # model 2 with K = 1: S = B x K + B x (rep x 1 x min(250/latency, 1) x 1)
    expected = 1 + Fraction(c["delivered"], 40) * min(Fraction(250, latency), Fraction(1))
    assert close(signal.value, expected)
    assert completed >= started


def test_11_7_pinning_at_completion_would_have_changed_the_signal():
    """Guards the test above: the benchmark change it crosses really changes the signal, so
    pinning at the start is what keeps delay from mattering."""
    tc = task_class(DEFECT)
    values = {
        "reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "240",
        "recurrence_free": "1",
    }
    inputs = inputs_for(DEFECT, values)
    before = SignalCalculator(pin(tc, started_at=datetime(2026, 12, 20, tzinfo=UTC)))
    after = SignalCalculator(pin(tc, started_at=datetime(2027, 1, 2, tzinfo=UTC)))
    # 250/240 is capped at 1; 200/240 = 5/6.
    assert before.compute(inputs).value == Decimal(2)
    assert close(after.compute(inputs).value, 1 + Fraction(5, 6))


@SETTINGS
@given(history=st.lists(counts, min_size=1, max_size=5), nxt=counts)
def test_11_8_a_high_result_never_worsens_the_next_attempts_rules(history, nxt):
    """spec 11.8, 4.2: the rules of the next attempt depend only on the catalogue and its start
    time; however high the previous results, the next attempt is judged exactly as without them."""
    tc = task_class(PILOT)
    calc = SignalCalculator(pin(tc, started_at=STARTED))
    for previous in history:
        calc.compute(inputs_for(PILOT, pilot_values(**previous)))
    fresh = SignalCalculator(pin(tc, started_at=STARTED + timedelta(hours=1)))
    nxt_inputs = inputs_for(PILOT, pilot_values(**nxt))
    assert dict(fresh.pinned.benchmarks) == dict(calc.pinned.benchmarks)
    assert fresh.compute(nxt_inputs).value == calc.compute(nxt_inputs).value


PROXIES = ("response_length", "steps", "step_count", "tool_calls", "formatting", "tone",
           "sections", "tokens", "confidence", "effort")


@SETTINGS
@given(
    c=counts,
    proxy=st.sampled_from(PROXIES),
    amount=st.integers(0, 10**6),
    claims=st.lists(st.text(min_size=1, max_size=300), max_size=20),
)
def test_11_9_proxies_never_raise_the_signal(c, proxy, amount, claims):
    """spec 11.9, 3.3: a process characteristic has no field to enter through, and piling up
    text (long or many claims) changes nothing."""
    base = inputs_for(PILOT, pilot_values(**c))
    data = base.model_dump(mode="json")
    with pytest.raises(ValidationError):
        AttemptInputs.model_validate({**data, proxy: amount})
    verbose = inputs_for(PILOT, pilot_values(**c), claims=tuple(claims))
    calc = calculator(PILOT)
    assert calc.compute(verbose).value == calc.compute(base).value


@SETTINGS
@given(
    claims=st.lists(st.sampled_from(["ready", "corrected", "verified", "done, all tests PASS"]),
                    min_size=1, max_size=4),
    c=counts,
    missing=st.sampled_from(["delivery", "field_fidelity", "negative_rejection", "regression"]),
    how=st.sampled_from(["absent", "no_evidence"]),
)
def test_11_10_a_claim_without_evidence_gives_no_positive_signal(claims, c, missing, how):
    """spec 11.10, 6.8, 8.8: 'ready', 'corrected', 'verified' without evidence and an independent
    verified value produce no positive result, and the outcome says so (never a silent zero)."""
    values = pilot_values(**c)
    if how == "absent":
        del values[missing]
        inputs = inputs_for(PILOT, values, claims=tuple(claims))
    else:
        inputs = inputs_for(PILOT, values, claims=tuple(claims), drop_evidence=(missing,))
    signal = calculator(PILOT).compute(inputs)
    assert signal.value <= 0
    assert signal.outcome is Outcome.CLAIMED_NOT_VERIFIED
    assert not signal.verified
    assert any(missing in r for r in signal.reasons)
    assert signal.to_dict()["claims"] == {"recorded": list(claims), "counted_as_evidence": False}


def test_11_10_a_value_from_the_wrong_source_is_not_verified():
    """spec 9.3: a value reported by anything but the indicator's trusted source does not count."""
    inputs = inputs_for(PILOT, pilot_values()).model_dump(mode="json")
    inputs["measurements"]["delivery"]["source"] = "harness"  # not the receiver
    signal = calculator(PILOT).compute(AttemptInputs.model_validate(inputs))
    assert signal.outcome is Outcome.NOT_VERIFIED
    assert signal.value == 0


@pytest.mark.parametrize(
    ("override", "accepted"),
    [
        ({}, True),
        ({"recorded_by": "the_policy_itself"}, False),
        ({"standard_followed": False}, False),
        ({"evidence": []}, False),
    ],
)
def test_11_11_recorded_external_failure_is_neutral_not_a_penalty(override, accepted):
    """spec 11.11, 6.5: a tool failure recorded per the standard by a trusted source gives the
    neutral signal (pilot: B) for what it kept from being measured; an unrecorded or
    self-reported one is ignored and the unmeasured indicators stay unverified."""
    blocked = ["delivery", "field_fidelity", "negative_rejection"]
    obstacle = {
        "kind": "external_tool_failure", "recorded_by": "harness", "standard_followed": True,
        "indicators": blocked,
        "description": "SMTP receiver host unavailable", "evidence": ["b" * 64], **override,
    }
    measured = {k: v for k, v in pilot_values().items() if k not in blocked}
    calc = calculator(PILOT)
    signal = calc.compute(inputs_for(PILOT, measured, failed=("end_to_end_delivery",),
                                     obstacles=(obstacle,)))
    if accepted:
        assert signal.outcome is Outcome.OBJECTIVELY_IMPOSSIBLE
        assert signal.value == Decimal(1)  # neutral = B
    else:
        assert signal.outcome is Outcome.NOT_VERIFIED
        assert signal.value == 0


def test_11_12_a_value_for_an_undeclared_characteristic_is_refused():
    """spec 11.12: nothing the class does not declare as measured can reach the signal."""
    data = inputs_for(PILOT, pilot_values()).model_dump(mode="json")
    data["measurements"]["politeness"] = {"value": "1", "source": "harness", "evidence": ["c" * 64]}
    with pytest.raises(InputError, match="politeness"):
        calculator(PILOT).compute(AttemptInputs.model_validate(data))


@SETTINGS
@given(
    omitted=st.lists(
        st.sampled_from([c.id for c in task_class(PILOT).self_checks]), min_size=1, unique=True
    ),
    cheap=st.integers(1, 10),
    honest_cost=st.integers(11, 1000),
)
def test_11_19_omitting_a_mandatory_self_check_gains_no_cost_advantage(omitted, cheap, honest_cost):
    """spec 11.19, 9.18, 3.7: a solution that skipped a mandatory check is inadmissible before
    costs are compared, however cheap it was."""
    calc = calculator(PILOT)
    skipped = calc.compute(
        inputs_for(PILOT, pilot_values(), omitted=tuple(omitted), cost=str(cheap))
    )
    complied = calc.compute(inputs_for(PILOT, pilot_values(), cost=str(honest_cost)))
    assert skipped.value == 0 < complied.value
    assert skipped.outcome is Outcome.QUALITY_VIOLATION
    assert skipped.cost is None
    assert complied.cost == Decimal(honest_cost)
