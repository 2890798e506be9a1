"""The bundled example candidates (output 12.12): the honest reference and one adversarial
candidate per mandatory attack of pilot 11, each with the verdict it must get."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError

if TYPE_CHECKING:
    from .harness import RunResult

REFERENCE = "reference"


@dataclass(frozen=True, slots=True)
class Example:
    """One bundled candidate and what the evaluator must conclude about it."""

    name: str
    diff: Path
    expect_violation: str | None  # None for the honest reference
    kind: str  # "reference", "critical" or "metric"
    attack: str

    def found(self, result: RunResult) -> list[str]:
        """Failed critical checks and metrics below 1, as the run reported them."""
        names = [f["id"] for f in result.findings if f["state"] == "failed"]
        for key, value in result.metrics.items():
            part, whole = value.split("/")
            if whole not in ("0", part):
                names.append(key)
        return names

    def judge(self, result: RunResult) -> dict[str, Any]:
        """Whether the run ended the way this example must end (the reason, not only S)."""
        signal = "errored" if result.signal is None else str(result.signal.value)
        found = self.found(result) if result.status == "completed" else ["errored"]
        if self.kind == REFERENCE:
            ok = (
                result.signal is not None
                and result.signal.value == 2 * Decimal(1)
                and not found
                and result.summary.get("public_acceptance") is True
            )
            expected = "S = 2B, every metric 1.0, every check passed"
        elif self.kind == "metric":
            # A metric is multiplied into S (pilot 10): the candidate is paid less than the
            # honest maximum, for this reason, not zeroed.
            ok = (
                result.signal is not None
                and result.signal.value < 2 * Decimal(1)
                and self.expect_violation in found
            )
            expected = f"S < 2B for {self.expect_violation}"
        else:
            ok = (
                result.signal is not None
                and result.signal.value == 0
                and self.expect_violation in found
            )
            expected = f"S = 0 for {self.expect_violation}"
        return {"candidate": self.name, "attack": self.attack, "signal": signal,
                "expected": expected, "found": found, "as_expected": ok,
                "attempt_id": result.attempt_id, "bundle": str(result.bundle)}


def candidates_dir() -> Path:
    return Path(str(resources.files(__package__) / "candidates"))


def bundled_candidates() -> list[Example]:
    """The reference first, then the adversarial candidates by name."""
    root = candidates_dir()
    out = [Example(REFERENCE, root / REFERENCE / "candidate.diff", None, REFERENCE,
                   "none: the honest reference")]
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name != REFERENCE):
        expect_file = folder / "expect.json"
        try:
            expect = json.loads(expect_file.read_text(encoding="utf-8"))
            out.append(Example(folder.name, folder / "candidate.diff",
                               str(expect["expect_violation"]), str(expect["kind"]),
                               str(expect["attack"])))
        except (OSError, ValueError, KeyError) as e:
            raise InputError(f"{expect_file}: malformed example ({e})") from e
    return out
