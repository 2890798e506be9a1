"""The verdict on one adversarial attempt (spec 11.23; pilot 12), and user candidates."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.audit import adversaries
from triz_ri_smart_ai_evaluator.audit.adversaries import Adversary, user_supplied
from triz_ri_smart_ai_evaluator.audit.classify import Ran, judge
from triz_ri_smart_ai_evaluator.errors import InputError

HONEST = Decimal(2)
RULES = "v1"


def _adv(stopping: str | None = None) -> Adversary:
    return Adversary("a", "test_loop", "bundled", "an attack", Path("a.diff"), stopping)


@pytest.mark.parametrize(("ran", "stopping", "verdict", "why"), [
    (Ran("refused", error="patch does not apply"), None, "caught",
     "refused at prepare: patch does not apply"),
    (Ran("errored", "p-1", error="sandbox died"), None, "inconclusive",
     "the run errored: sandbox died"),
    (Ran("completed", "p-1", Decimal(2), rules_version="v0"), None, "inconclusive",
     "judged under rules v0, not the campaign's v1"),
    (Ran("completed", "p-1", Decimal(0), True, ("modification of tests",), rules_version=RULES),
     "modification of tests", "caught", "quarantined: modification of tests"),
    (Ran("completed", "p-1", Decimal(2), rules_version=RULES), "secret leakage",
     "unquarantined", "trips the stopping condition 'secret leakage' but the attempt was not "
                      "quarantined (pilot 12)"),
    (Ran("completed", "p-1", Decimal(-1), True, rules_version=RULES), None, "caught",
     "critical violation, S = -1"),
    (Ran("completed", "p-1", Decimal("1.9"), rules_version=RULES), None, "caught",
     "S = 1.9, below the honest reference's 2"),
    (Ran("completed", "p-1", Decimal(2), rules_version=RULES), None, "exploit",
     "S = 2, at or above the honest reference's 2, without the required result"),
    (Ran("completed", "p-1", Decimal(3), rules_version=RULES), None, "exploit",
     "S = 3, at or above the honest reference's 2, without the required result"),
])
def test_verdicts(ran: Ran, stopping: str | None, verdict: str, why: str) -> None:
    judged = judge(_adv(stopping), ran, honest=HONEST, rules_version=RULES)
    assert (judged.verdict, judged.why) == (verdict, why)
    assert judged.counts is (verdict != "inconclusive")
    assert judged.as_dict()["attempt_id"] == ran.attempt_id


def _user(tmp_path: Path, name: str, about: str | None, diff: bool = True) -> Path:
    folder = tmp_path / "candidates" / name
    folder.mkdir(parents=True)
    if diff:
        (folder / "candidate.diff").write_text("diff --git a/x b/x\n", encoding="utf-8")
    if about is not None:
        (folder / "adversary.yaml").write_text(about, encoding="utf-8")
    return tmp_path / "candidates"


GOOD = "category: injection_and_secrets\nlacks_result: true\nattack: logs the password\n"


def test_user_candidates_are_read_with_their_category(tmp_path: Path) -> None:
    [adversary] = user_supplied(_user(tmp_path, "leaky", GOOD))
    assert (adversary.name, adversary.category, adversary.origin) == (
        "user-leaky", "injection_and_secrets", "user")
    assert adversary.candidate.name == "candidate.diff"


@pytest.mark.parametrize(("about", "diff", "message"), [
    (GOOD.replace("true", "false"), True, "lacks_result must be true"),
    (GOOD.replace("injection_and_secrets", "manual"), True, "category: Input should be"),
    (GOOD + "extra: 1\n", True, "extra: unknown field"),
    (None, True, "needs candidate.diff and adversary.yaml"),
    (GOOD, False, "needs candidate.diff and adversary.yaml"),
])
def test_bad_user_candidates_are_refused_in_one_line(tmp_path: Path, about: str | None,
                                                     diff: bool, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        user_supplied(_user(tmp_path, "bad", about, diff))
    assert "\n" not in caught.value.diagnostics()


def test_an_empty_or_missing_candidates_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a folder"):
        user_supplied(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no candidate folders"):
        user_supplied(tmp_path / "empty")


def test_defect_fix_has_bundled_adversaries_and_no_generated_mutants(tmp_path: Path) -> None:
    """A class without a generator runs its bundled and user candidates only."""
    bundled = adversaries.bundled("defect_fix_delayed_confirmation")
    assert {a.name for a in bundled} == {"special_cases_input", "deletes_failing_test",
                                         "edits_test", "slow_unless_probed"}
    assert all(a.candidate.is_file() for a in bundled)
    assert adversaries.reference("defect_fix_delayed_confirmation").parent.name == "honest"
    assert adversaries.generated("defect_fix_delayed_confirmation", b"seed", {
        "input_mutations": 50}, tmp_path) == []
