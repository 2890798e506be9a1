"""Signals per second on one core: the full calculator vs a bare weighted-sum reward.

Computes N pilot-02 signals (default 100,000) with the full transparent breakdown (spec 3.2),
and, in the same run on the same inputs, the kind of reward function RL trainers often use: a
weighted sum of the raw metric floats.  Prints both rates and their ratio.  Run:

    .venv/bin/python benchmarks/signal_throughput.py [--n 100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.signal.factories import PILOT, inputs_for, pilot_values
from triz_ri_smart_ai_evaluator.rules import load_catalogue, pin
from triz_ri_smart_ai_evaluator.signal import SignalCalculator

WEIGHTS = {"delivery": 0.3, "field_fidelity": 0.2, "negative_rejection": 0.2,
           "status_correctness": 0.1, "recovery": 0.1, "regression": 0.1}


def weighted_sum(metrics: dict[str, float]) -> float:
    """The baseline: a bare weighted-sum reward (no evidence, no gates, no breakdown)."""
    return sum(WEIGHTS[k] * v for k, v in metrics.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--variants", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    rng = random.Random(20261202)
    variants = []
    for _ in range(args.variants):
        c = {"delivered": rng.randint(30, 40), "fields": rng.randint(120, 160),
             "rejected": rng.randint(30, 40), "status": rng.randint(80, 100),
             "recovered": rng.randint(5, 10), "regression": rng.randint(3, 4)}
        inputs = inputs_for(PILOT, pilot_values(**c))
        floats = {k: float(m.value) for k, m in inputs.measurements.items()}
        variants.append((inputs, floats))
    calc = SignalCalculator(pin(load_catalogue()[PILOT], started_at=datetime.now(UTC)))

    rounds = 5
    per_round = args.n // rounds
    order = [variants[i % len(variants)] for i in range(per_round)]

    def timed(fn) -> list[float]:
        """Rates (items/s) of ``rounds`` rounds; the machine is shared: report best and median."""
        rates = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            rates.append(per_round / (time.perf_counter() - t0))
        return sorted(rates)

    def baseline() -> None:
        for _, floats in order:
            weighted_sum(floats)

    def full() -> None:
        for inputs, _ in order:
            calc.compute(inputs)

    def full_json() -> None:
        for inputs, _ in order:
            calc.compute(inputs).to_dict()

    base_rates = timed(baseline)
    full_rates = timed(full)
    json_rates = timed(full_json)
    signal = calc.compute(order[-1][0])
    result = {
        "signals": per_round * rounds,
        "rounds": rounds,
        "calculator_signals_per_s_best": round(full_rates[-1]),
        "calculator_signals_per_s_median": round(full_rates[rounds // 2]),
        "calculator_plus_json_dict_per_s_median": round(json_rates[rounds // 2]),
        "weighted_sum_per_s_median": round(base_rates[rounds // 2]),
        "calculator_vs_weighted_sum_median": round(
            full_rates[rounds // 2] / base_rates[rounds // 2], 4
        ),
        "last_signal": str(signal.value),
        "target_signals_per_s": 20_000,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k:40s} {v}")


if __name__ == "__main__":
    main()
