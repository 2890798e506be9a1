"""A toy task class that lives outside the evaluator's package and registers itself through
entry points only (issue 14 item 1): the proof that adding a class touches no evaluator code."""

from pathlib import Path

#: The class's rules, found through the "triz_ri_smart_ai_evaluator.catalogues" entry point.
CATALOGUE = Path(__file__).resolve().parent / "toy_sum.yaml"
