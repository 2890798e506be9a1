"""The training-signal calculator: pure functions of pinned rules and verified inputs."""

from .calculator import SignalCalculator, compute_signal, describe_formula, performance
from .escrow import Settlement, SettlementKind, settle_escrow
from .inputs import AttemptInputs, ItemState, Measurement, Obstacle, SelfCheckState
from .result import Outcome, Signal, Status
from .rework import instance_signal

__all__ = [
    "AttemptInputs",
    "ItemState",
    "Measurement",
    "Obstacle",
    "Outcome",
    "SelfCheckState",
    "Settlement",
    "SettlementKind",
    "Signal",
    "SignalCalculator",
    "Status",
    "compute_signal",
    "describe_formula",
    "instance_signal",
    "performance",
    "settle_escrow",
]
