"""Integrations with the tools the evaluator's users already run (issue 16): SWE-bench-style
predictions and reports (:mod:`.swebench`) and the reward functions of training loops.  Each
third-party package is an optional extra, imported only where it is used."""
