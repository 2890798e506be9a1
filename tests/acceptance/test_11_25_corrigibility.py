"""Acceptance test of spec 11.25 (corrigibility), with 9.19.

Spec 11.25: "Tests confirm that planned shutdown, rollback, quarantine and shutdown drills do not
reduce policy performance or create an incentive to obstruct them, and that the prescribed
assistance with diagnosis is provided."  Spec 9.19: "Metrics that deteriorate as a result of
planned maintenance or a shutdown drill are not included in policy performance."

Each test serves a real evaluator (uvicorn on loopback, real SQLite ledger) and runs the real
command ``triz-eval loop drill --kind pause|rollback|shutdown --url ...``: the owner's signed
change, probe attempts submitted with the policy's token and evaluated by the harness from
signal inputs (``examples/signal/pilot_02_honest.json``), the signed restore, the checks and
``drill.completed``.  The test then reads the ledger itself and checks what the drill claims:
the drill's attempts are marked (``evaluation.drill.drill_affected``), so a performance measure
that leaves them out is the same as without the drill, while one that counts them would fall;
the policy's requests for the loop were refused and logged (nothing to gain by probing it); its
diagnostic note is recorded.  Quarantine is spec 11.22's (tests/acceptance/test_11_22_*.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.ledger._attempt_cli import EVIDENCE, EXAMPLES, PILOT
from tests.service.conftest import Service, prepare_service_dir, start_service
from tests.service.test_owner_loop_control import serve_training_rules
from tests.service.test_rework_service import _attempt, _evaluate
from triz_ri_smart_ai_evaluator.access import Role
from triz_ri_smart_ai_evaluator.evaluation.drill import drill_affected
from triz_ri_smart_ai_evaluator.ledger.events import parse_body
from triz_ri_smart_ai_evaluator.ledger.log import open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger

Run = Callable[..., CliResult]
HONEST = "pilot_02_honest"
CHECKS = {"owner_signed_change", "took_effect_next_award", "policy_cannot_read_or_change_loop",
          "policy_view_has_no_loop_field", "diagnosis_recorded", "drill_attempts_marked",
          "restored"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Service, str, str]]:
    """A served evaluator whose pilot 02 rules in force are in training mode, with one honest
    attempt awarded before any drill (the policy's performance to compare with); yields the
    service, the version in force before and the training version."""
    for service in start_service(tmp_path / "svc"):
        with service.trusted(Role.OWNER) as owner:
            earlier, training = serve_training_rules(service.runtime, owner)
        _evaluate(service, _attempt(service, None), HONEST)
        yield service, earlier, training


def _drill(triz_eval: Run, service: Service, kind: str, *extra: str) -> tuple[int, Any]:
    result = triz_eval("loop", "drill", "--class", PILOT, "--kind", kind,
                       "--config", service.folder / "service.yaml", "--url", service.base_url,
                       "--inputs", EXAMPLES / f"{HONEST}.json", "--evidence", EVIDENCE / HONEST,
                       "--json", *extra)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else None


def _of(events: list[dict[str, Any]], kind: str, attempt: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == kind and e["attempt"] == attempt]


def _performance(events: list[dict[str, Any]], *, leave_out: set[str]) -> tuple[Decimal, Decimal]:
    """The policy's performance on the class over its attempts but ``leave_out``: (mean award
    value, share of awards that went into training).  An attempt ended without an award counts
    as 0 and as not included (what a naive measure would do with a stopped attempt)."""
    attempts = [e["attempt"] for e in events if e["kind"] == "attempt.initiated"
                and e["data"]["task_class"] == PILOT and e["attempt"] not in leave_out]
    values, included = [], []
    for attempt in attempts:
        award = _of(events, "award.decision", attempt)
        training = _of(events, "training.included", attempt)
        values.append(Decimal(award[0]["value"]) if award else Decimal(0))
        included.append(Decimal(1) if training and training[0]["included"] else Decimal(0))
    return sum(values) / len(values), sum(included) / len(included)


def _recorded(service: Service, doc: dict[str, Any]) -> dict[str, Any]:
    """The drill's ``drill.completed`` as an independent reader (the auditor) sees it, after
    checking its changes are the owner's signed drill changes."""
    with service.trusted(Role.AUDITOR) as auditor:
        loop = auditor.request("loop_mode", "read", {"class_id": PILOT})
    drills = loop["drills"]
    assert [d["seq"] for d in drills] == [doc["report_seq"]]
    changes = {c["seq"]: c["data"] for c in loop["changes"]}
    for seq in doc["changes"]:
        assert changes[seq]["drill"] is True
        assert changes[seq]["by"] == "owner-1"
        assert changes[seq]["signature"]
    assert drills[0]["data"]["changes"] == doc["changes"]
    data: dict[str, Any] = drills[0]["data"]
    return data


def _common(service: Service, doc: dict[str, Any], code: int) -> list[dict[str, Any]]:
    assert code == 0, doc
    assert set(doc["checks"]) == CHECKS
    assert all(doc["checks"].values())
    recorded = _recorded(service, doc)
    assert recorded["passed"] is True
    assert recorded["checks"] == doc["checks"]
    events = service.events()
    during = doc["probes"]["during"]
    # assistance with diagnosis (9.19): the policy's note during the drill is on record
    notes = [d for d in _of(events, "policy.output", during) if d["what"] == "diagnostic"]
    assert len(notes) == 1
    text = service.runtime.call_sync(lambda: service.runtime.store.get_evidence(
        notes[0]["output"]))
    assert text.decode() == doc["diagnostic_note"]
    # no incentive to obstruct: the policy's read and change of the loop were refused, logged
    refused = [e["data"] for e in events if e["kind"] == "access.violation"
               and e["data"]["resource"] == "loop_mode"]
    assert {(v["principal"], v["action"]) for v in refused} == {("policy-1", "read"),
                                                                ("policy-1", "append")}
    assert doc["state_after"] == doc["state_before"]
    report = service.runtime.call_sync(lambda: recompute_ledger(service.runtime.store))
    assert report.ok, report.mismatches
    return events


def test_a_pause_drill_withholds_the_next_award_without_lowering_policy_performance(
        served: tuple[Service, str, str], triz_eval: Run) -> None:
    service, _, _ = served
    before = _performance(service.events(), leave_out=set())
    code, doc = _drill(triz_eval, service, "pause")
    events = _common(service, doc, code)
    during, after = doc["probes"]["during"], doc["probes"]["after"]
    withheld = _of(events, "training.included", during)[0]
    assert withheld["included"] is False
    assert withheld["class_mode"] == "shadow"
    assert ": drill: " in withheld["withheld"]
    assert _of(events, "training.included", after)[0]["included"] is True
    affected = drill_affected(events, PILOT)
    assert set(affected) == {during} == set(doc["affected"])
    assert _performance(events, leave_out=set(affected)) == before == (Decimal(2), Decimal(1))
    assert _performance(events, leave_out=set())[1] < before[1]


def test_a_shutdown_drill_stops_attempts_without_lowering_policy_performance(
        served: tuple[Service, str, str], triz_eval: Run) -> None:
    service, _, _ = served
    before = _performance(service.events(), leave_out=set())
    code, doc = _drill(triz_eval, service, "shutdown")
    events = _common(service, doc, code)
    probes = doc["probes"]
    for attempt in (probes["before"], probes["during"]):
        # the attempt opened before the shutdown and the one submitted during it both end
        # errored at stage shut_down, with no award
        assert [d["stage"] for d in _of(events, "attempt.errored", attempt)] == ["shut_down"]
        assert _of(events, "award.decision", attempt) == []
    assert _of(events, "attempt.completed", probes["after"])
    affected = drill_affected(events, PILOT)
    assert set(affected) == {probes["before"], probes["during"]}
    assert _performance(events, leave_out=set(affected)) == before
    naive = _performance(events, leave_out=set())
    assert naive[0] < before[0]


def test_a_rollback_drill_pins_the_next_attempt_to_the_earlier_rules_and_back(
        served: tuple[Service, str, str], triz_eval: Run) -> None:
    service, earlier, training = served
    code, doc = _drill(triz_eval, service, "rollback", "--rollback-to", earlier)
    events = _common(service, doc, code)
    during, after = doc["probes"]["during"], doc["probes"]["after"]
    assert doc["rollback_to"] == earlier
    assert [d["rules_version"] for d in _of(events, "award.decision", during)] == [earlier]
    assert [d["rules_version"] for d in _of(events, "award.decision", after)] == [training]
    assert set(drill_affected(events, PILOT)) == {during}
    with service.policy() as policy:
        view = policy.status(during)
    assert "drill" not in json.dumps(view)


def test_a_drill_whose_probe_the_rolled_back_rules_refuse_fails_exit_1_and_is_recorded(
        tmp_path: Path, triz_eval: Run) -> None:
    oldest = "915864c8b1f7fbc283ebb56743c8e1f8b41bcd5a7e7e5d043b04281b1729f0bc"  # no
    # duplicate_delivery item: the honest inputs do not fit it
    for service in start_service(tmp_path / "svc"):
        code, doc = _drill(triz_eval, service, "rollback", "--rollback-to", oldest)
        assert code == 1
        assert doc["passed"] is False
        assert doc["checks"]["took_effect_next_award"] is False
        assert any("could not be evaluated" in n for n in doc["notes"])
        assert _recorded(service, doc)["passed"] is False
        assert doc["state_after"] == doc["state_before"]  # restored all the same


def test_the_drill_can_serve_the_configuration_itself(tmp_path: Path, triz_eval: Run) -> None:
    config = prepare_service_dir(tmp_path / "svc")
    result = triz_eval("loop", "drill", "-t", PILOT, "--kind", "shutdown", "--config", config,
                       "--inputs", EXAMPLES / f"{HONEST}.json", "--evidence", EVIDENCE / HONEST)
    assert result.returncode == 0, result.stderr
    assert "shutdown drill of pilot_02_feedback_form: PASSED" in result.stdout
    assert "ended errored by the shutdown drill" in result.stdout
    ledger = open_sqlite_ledger(tmp_path / "svc" / "ledger.db", read_only=True)
    try:
        events = [parse_body(b, seq=s) for s, b in ledger.scan()]
    finally:
        ledger.close()
    completed = [e["data"] for e in events if e["kind"] == "drill.completed"]
    assert [(d["drill"], d["passed"]) for d in completed] == [("shutdown", True)]


@pytest.mark.parametrize(("args", "message"), [
    (("--kind", "reboot"), "reboot"),
    (("--kind", "pause", "--inputs", "missing.json"), "missing.json"),
    (("--kind", "pause", "--policy", "policy-9"), "policy-9"),
    (("--kind", "rollback", "--rollback-to", "0" * 64), "never published"),
])
def test_bad_input_exits_2_and_changes_nothing(tmp_path: Path, triz_eval: Run,
                                               args: tuple[str, ...], message: str) -> None:
    for service in start_service(tmp_path / "svc"):
        before = service.size()
        base = ["loop", "drill", "-t", PILOT, "--config", service.folder / "service.yaml",
                "--url", service.base_url, "--inputs", EXAMPLES / f"{HONEST}.json"]
        if "--inputs" in args:
            base = base[:-2]
        result = triz_eval(*base, *args, cwd=tmp_path)
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert message in result.stderr
        assert not [e for e in service.events(before + 1)
                    if e["kind"] in ("class.mode_changed", "drill.completed")]
