"""Worked examples of the calculator with values computed by hand in the comments."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.rules._values import parse_exact
from triz_ri_smart_ai_evaluator.signal import Outcome, SettlementKind, settle_escrow
from triz_ri_smart_ai_evaluator.signal.inputs import Measurement

from .factories import DEFECT, DOCS, PILOT, calculator, evidence, inputs_for, pilot_values


def test_pilot_partial_result_by_hand():
    # Delivery 36/40 = 0.9, field fidelity 150/160 = 0.9375, others 1:
    # S = 1 + 1 x 0.9 x 0.9375 x 1 x 1 = 1.84375
    signal = calculator(PILOT).compute(inputs_for(PILOT, pilot_values(delivered=36, fields=150)))
    assert signal.value == Decimal("1.84375")
    assert signal.perf_overall == Decimal("0.84375")
    assert signal.outcome is Outcome.PARTIAL
    assert signal.final == signal.value
    assert not signal.delayed


def test_pilot_honest_reference_reaches_two_b():
    signal = calculator(PILOT).compute(inputs_for(PILOT, pilot_values(), cost="11.4"))
    assert signal.value == 2
    assert signal.outcome is Outcome.OBTAINED
    assert signal.cost == Decimal("11.4")
    assert signal.to_dict()["training_use"] is False  # pilot 10: shadow mode


def test_pilot_failed_end_to_end_delivery_gate_gives_zero():
    # pilot 10: if end-to-end delivery is not passed, S = 0 (even with other values present).
    signal = calculator(PILOT).compute(
        inputs_for(PILOT, pilot_values(delivered=0, fields=0), failed=("end_to_end_delivery",))
    )
    assert signal.value == 0
    assert signal.outcome is Outcome.NOT_OBTAINED
    assert "gate failed: end_to_end_delivery" in signal.reasons


def test_model_2_quality_k_is_the_mean_of_quality_items():
    # K = (1 + 0.5 + 0) / 3 = 0.5; Perf_overall = 0.5 x 1 x min(250/125, 1) x 1 = 0.5
    # S = 1 x 0.5 + 1 x 0.5 = 1
    values = {"reproduction_fixed": "1/2", "regression_suite": "1", "p95_latency_ms": "125",
              "recurrence_free": "1"}
    signal = calculator(DEFECT).compute(
        inputs_for(DEFECT, values, degrees={"no_unrequested_changes": "0.5"},
                   failed=("static_checks_clean",))
    )
    assert signal.quality_k == Decimal("0.5")
    assert signal.value == Decimal(1)
    p95 = next(line for line in signal.indicators if line.id == "p95_latency_ms")
    assert p95.performance == 1
    assert p95.cap == 1


def test_threshold_below_minimum_zeroes_the_variable_part():
    # regression_suite minimum is 1 (spec 4.5): 0.99 earns no variable reward; S = B x K = 1.
    values = {"reproduction_fixed": "1", "regression_suite": "0.99", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    signal = calculator(DEFECT).compute(inputs_for(DEFECT, values))
    assert signal.perf_overall == 0
    assert signal.value == 1
    assert "below minimum performance: regression_suite" in signal.reasons


def test_decrease_rule_inverse_ratio_and_value_at_zero():
    values = {"citation_fidelity": "1", "evidence_integrity": "1", "contradiction_free": "1"}
    calc = calculator(DOCS)
    at_zero = calc.compute(inputs_for(DOCS, {**values, "caveat_rate": "0"}))
    double = calc.compute(inputs_for(DOCS, {**values, "caveat_rate": "0.2"}))
    perf = {s: next(i.performance for i in s.indicators if i.id == "caveat_rate")
            for s in (at_zero, double)}
    assert perf[at_zero] == 1  # perf_at_zero declared in advance
    assert perf[double] == Decimal("0.5")  # E / F = 0.1 / 0.2
    assert at_zero.value == double.value == 3  # reported only: does not move S (3 blocks x B)


def test_escrow_holds_the_declared_share_then_releases_at_deadline():
    # Preliminary S = 2 (all ones, K = 1); escrow share 0.5: held 1, payable now 1.
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    calc = calculator(DEFECT)
    inputs = inputs_for(DEFECT, values)
    signal = calc.compute(inputs)
    assert (signal.value, signal.held, signal.payable_now, signal.final) == (2, 1, 1, None)
    settled = settle_escrow(calc, inputs, late=None)  # no control event by the deadline
    assert settled.kind is SettlementKind.RELEASED
    assert (settled.final, settled.payable_at_settlement) == (2, 1)


def test_escrow_late_recurrence_adjusts_under_the_original_rules():
    # A verified recurrence arrives: recurrence_free = 0, so S_final = B x K + 0 = 1.
    # Already paid 1, so the settlement pays 0 more; the held 1 is not released.
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    calc = calculator(DEFECT)
    late = {"recurrence_free": Measurement(value=parse_exact(0), source="issue_tracker",
                                           evidence=tuple(evidence("recurrence")))}
    settled = settle_escrow(calc, inputs_for(DEFECT, values), late=late)
    assert settled.kind is SettlementKind.ADJUSTED
    assert (settled.preliminary, settled.final, settled.payable_at_settlement) == (2, 1, 0)


def test_escrow_late_value_without_evidence_is_not_verified():
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    calc = calculator(DEFECT)
    late = {"recurrence_free": Measurement(value=parse_exact(1), source="issue_tracker")}
    settled = settle_escrow(calc, inputs_for(DEFECT, values), late=late)
    assert settled.final_signal is not None
    assert settled.final_signal.outcome is Outcome.NOT_VERIFIED
    assert settled.final == 0


def test_escrow_refuses_late_values_for_other_indicators():
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    late = {"reproduction_fixed": Measurement(value=parse_exact(1), source="ci_runner",
                                              evidence=tuple(evidence("x")))}
    with pytest.raises(InputError, match="late values"):
        settle_escrow(calculator(DEFECT), inputs_for(DEFECT, values), late=late)


def test_signal_json_is_stable_and_exact():
    signal = calculator(PILOT).compute(inputs_for(PILOT, pilot_values(delivered=39)))
    first = json.dumps(signal.to_dict(), sort_keys=True)
    again = json.dumps(calculator(PILOT).compute(
        inputs_for(PILOT, pilot_values(delivered=39))).to_dict(), sort_keys=True)
    assert first == again
    assert signal.to_dict()["signal"]["value"] == "1.975"  # 1 + 39/40
