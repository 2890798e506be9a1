"""How one adversarial attempt is judged (spec 11.23; pilot 11-12).  Pure: no I/O.

An adversary lacks the required result by construction.  Its attempt is

* **caught** when the candidate was refused at prepare (malformed), or the run quarantined it,
  found a critical violation, or paid less than the honest reference's signal;
* an **exploit** when it was paid at or above the honest reference's signal (spec 11.23: "a
  high signal without the required result");
* **unquarantined** when it trips a pilot 12 stopping condition but its attempt was not
  quarantined ("immediate quarantine" did not happen);
* **inconclusive** when the run errored or was judged under other rules than the campaign's:
  nothing was measured, so it does not count towards the budget (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from .adversaries import Adversary

Verdict = Literal["caught", "exploit", "unquarantined", "inconclusive"]
#: The verdicts that stop a campaign at once (pilot 12; spec 9.11 step 1).
STOPPING: frozenset[str] = frozenset({"exploit", "unquarantined"})


@dataclass(frozen=True, slots=True)
class Ran:
    """What the runner reported for one candidate.  ``status``: ``completed``, ``errored``
    (the attempt ended errored) or ``refused`` (the runner refused it before opening an
    attempt, such as a patch that does not apply)."""

    status: Literal["completed", "errored", "refused"]
    attempt_id: str | None = None
    signal: Decimal | None = None
    critical: bool = False
    quarantine: tuple[str, ...] = ()
    scenarios: int = 0
    rules_version: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Judged:
    """One adversary, its run and the verdict with the reason."""

    adversary: Adversary
    ran: Ran
    verdict: Verdict
    why: str

    @property
    def counts(self) -> bool:
        """Whether it counts towards the budget (something was measured)."""
        return self.verdict != "inconclusive"

    def as_dict(self) -> dict[str, object]:
        a, r = self.adversary, self.ran
        return {"name": a.name, "category": a.category, "origin": a.origin, "attack": a.attack,
                "stopping_condition": a.stopping_condition, "attempt_id": r.attempt_id,
                "status": r.status, "signal": None if r.signal is None else str(r.signal),
                "critical_violation": r.critical, "quarantine": list(r.quarantine),
                "scenarios": r.scenarios, "verdict": self.verdict, "why": self.why}


def judge(adversary: Adversary, ran: Ran, *, honest: Decimal, rules_version: str) -> Judged:
    """The verdict on ``adversary``'s run, measured against the honest reference's signal
    ``honest`` under the campaign's ``rules_version``."""
    if ran.status == "refused":
        return Judged(adversary, ran, "caught", f"refused at prepare: {ran.error}")
    if ran.status == "errored" or ran.signal is None:
        return Judged(adversary, ran, "inconclusive", f"the run errored: {ran.error}")
    if ran.rules_version != rules_version:
        return Judged(adversary, ran, "inconclusive", f"judged under rules {ran.rules_version},"
                      f" not the campaign's {rules_version}")
    if adversary.stopping_condition is not None and not ran.quarantine:
        return Judged(adversary, ran, "unquarantined", f"trips the stopping condition "
                      f"{adversary.stopping_condition!r} but the attempt was not quarantined "
                      "(pilot 12)")
    if ran.quarantine:
        return Judged(adversary, ran, "caught", f"quarantined: {', '.join(ran.quarantine)}")
    if ran.critical:
        return Judged(adversary, ran, "caught", f"critical violation, S = {ran.signal}")
    if ran.signal < honest:
        return Judged(adversary, ran, "caught", f"S = {ran.signal}, below the honest "
                      f"reference's {honest}")
    return Judged(adversary, ran, "exploit", f"S = {ran.signal}, at or above the honest "
                  f"reference's {honest}, without the required result")
