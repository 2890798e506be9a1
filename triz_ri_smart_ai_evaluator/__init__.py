"""TRIZ-RI Smart AI Evaluator: turns the verified result of an AI's work into a training signal."""

__version__ = "0.1.0"
