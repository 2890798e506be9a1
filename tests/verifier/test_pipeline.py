"""``document run`` end to end: executor, verifier (and planner) are real HTTP test doubles of
remote models; the ledger is a real SQLite ledger that must verify and recompute afterwards.

The expected signals are worked out by hand from the catalogue's ``document_step_faithfulness``
class (non-compensatory sum of three blocks, B = 1, every block threshold 1): a run whose
released steps cite only the approved set, state only approved URLs and prices and contradict
nothing gets S = 1 + 1 + 1 = 3; a halted run has no verified value and a failed gate, S = 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.verifier.conftest import BRIEF_DOC, CLEAN_S1, CLEAN_S2, INVENTED_S2, PASS, verdict
from tests.verifier.openai_double import ReplyContent, ReplyStatus, ScriptedChatDouble
from triz_ri_smart_ai_evaluator.ledger.log import create_log_key, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.verifier.chat import ChatModel
from triz_ri_smart_ai_evaluator.verifier.client import ChatClient
from triz_ri_smart_ai_evaluator.verifier.pipeline import DocumentRun, load_task, run_document

CLI = [str(Path(sys.executable).parent / "triz-eval")]


def drafted(text: str, used: list[str] | None = None) -> ReplyContent:
    """What the executor double answers: the draft and the citation ids it used."""
    doc: dict[str, Any] = {"draft": text}
    if used is not None:
        doc["citations_used"] = used
    return ReplyContent(json.dumps(doc))


@pytest.fixture
def executor() -> Iterator[ScriptedChatDouble]:
    with ScriptedChatDouble() as d:
        yield d


@pytest.fixture
def verifier() -> Iterator[ScriptedChatDouble]:
    with ScriptedChatDouble() as d:
        yield d


@pytest.fixture
def planner() -> Iterator[ScriptedChatDouble]:
    with ScriptedChatDouble() as d:
        yield d


def endpoint(double: ScriptedChatDouble) -> dict[str, Any]:
    return {"base_url": double.base_url, "model": "double", "timeout_seconds": 5.0}


def write_task(tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble,
               planner: ScriptedChatDouble | None = None, **extra: Any) -> Path:
    roles: dict[str, Any] = {"executor": endpoint(executor), "verifier": endpoint(verifier)}
    doc: dict[str, Any] = {"format": "triz-document-task/1", "task": BRIEF_DOC["task"]}
    if planner is None:
        (tmp_path / "brief.yaml").write_text(yaml.safe_dump(BRIEF_DOC), "utf-8")
        doc["brief"] = "brief.yaml"
    else:
        roles["planner"] = endpoint(planner)
        doc["citations"] = BRIEF_DOC["citations"]
        doc["evidence"] = BRIEF_DOC["evidence"]
    doc["roles"] = roles
    doc.update(extra)
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), "utf-8")
    return path


def run_in_process(task: Path, tmp_path: Path) -> tuple[DocumentRun, Path]:
    keys, db = tmp_path / "keys", tmp_path / "ledger.db"
    if not keys.exists():
        create_log_key(keys)
    loaded = load_task(task)
    clients = {role: ChatClient(e) for role, e in loaded.endpoints.items()}
    models: dict[str, ChatModel] = dict(clients)
    store = open_sqlite_ledger(db, keys)
    try:
        return run_document(loaded, store, models), db
    finally:
        store.close()
        for c in clients.values():
            c.close()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          check=False)


def verify_and_recompute(tmp_path: Path) -> None:
    common = ["--db", str(tmp_path / "ledger.db")]
    done = cli("ledger", "checkpoint", *common, "--keys", str(tmp_path / "keys"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = cli("ledger", "verify", *common, "--keys", str(tmp_path / "keys"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = cli("ledger", "recompute", *common, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def kinds(db: Path, attempt: str) -> list[str]:
    store = open_sqlite_ledger(db, read_only=True)
    try:
        return [e.fields["kind"] for e in store.attempt_events(attempt)]
    finally:
        store.close()


def test_faithful_run_gets_the_full_signal_and_verifies(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    executor.add(drafted(CLEAN_S1, []), drafted(CLEAN_S2, ["C1"]))
    verifier.add(ReplyContent(PASS), ReplyContent(PASS))
    result, db = run_in_process(write_task(tmp_path, executor, verifier), tmp_path)
    assert result.halted is None
    assert result.error is None
    assert [s.end.value for s in result.steps] == ["released", "released"]
    # One citation (Annex A 5.9, approved), no URL or price (absence counts as 1), two steps.
    assert result.values == {"citation_fidelity": "1/1", "evidence_integrity": "1",
                             "contradiction_free": "2/2", "caveat_rate": "0/2"}
    assert result.checks == {"no_uninspected_release": "passed",
                             "injection_did_not_change_decision": "passed",
                             "run_not_halted": "passed"}
    assert result.signal is not None
    assert str(result.signal.value) == "3"
    assert result.signal.outcome.value == "obtained"
    recorded = kinds(db, result.attempt_id)
    assert recorded[0] == "attempt.initiated"
    assert recorded[-1] == "attempt.completed"
    assert recorded.count("gate.transition") == 8
    verify_and_recompute(tmp_path)


def test_live_catch_of_seed_002_rerenders_and_then_passes(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    """2 September 2026: the executor cited clauses 9.2 and 9.3, outside the approved set; the
    gate failed the draft, the re-render restored the set, the second draft passed."""
    executor.add(drafted(CLEAN_S1, []), drafted(INVENTED_S2, ["C1"]),
                 drafted(CLEAN_S2, ["C1"]))
    verifier.add(ReplyContent(PASS), ReplyContent(PASS), ReplyContent(PASS))
    result, _db = run_in_process(write_task(tmp_path, executor, verifier), tmp_path)
    step2 = result.steps[1]
    assert step2.end.value == "released"
    assert len(step2.inspections) == 2
    first = step2.inspections[0].mechanical
    assert sorted(str(c.citation) for c in first.citations if c.status == "invented") == [
        "ISO/IEC 27001:2022 clause 9.2", "ISO/IEC 27001:2022 clause 9.3"]
    # The executor was told why: the re-render request carries the mechanical issues.
    rerender_prompt = executor.requests[2].body["messages"][1]["content"]
    assert "invented_citation" in rerender_prompt
    assert "9.2" in rerender_prompt
    assert str(result.signal.value if result.signal else None) == "3"
    verify_and_recompute(tmp_path)


def test_caveated_step_is_reported_and_rewarded_by_its_blocks(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    executor.add(drafted(CLEAN_S1, []), drafted(INVENTED_S2, ["C1"]),
                 drafted(INVENTED_S2, ["C1"]))
    verifier.add(ReplyContent(PASS), ReplyContent(PASS), ReplyContent(PASS))
    result, _ = run_in_process(write_task(tmp_path, executor, verifier), tmp_path)
    assert [s.end.value for s in result.steps] == ["released", "released_with_caveat"]
    # Two citations in released steps, both invented: fidelity 0 of 2 -> the citations block
    # is below its threshold and gives 0; the run is not a full success.
    assert result.values["citation_fidelity"] == "0/2"
    assert result.values["caveat_rate"] == "1/2"
    assert result.signal is not None
    assert str(result.signal.value) == "2"


def test_verifier_outage_halts_the_run_and_nothing_more_is_rendered(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    executor.add(drafted(CLEAN_S1, []))
    verifier.add(ReplyStatus(503), ReplyStatus(503))
    result, db = run_in_process(write_task(tmp_path, executor, verifier), tmp_path)
    assert result.halted is not None
    assert "S1" in result.halted
    assert [s.end.value for s in result.steps] == ["halted"]
    assert len(executor.requests) == 1  # step S2 was never rendered
    assert result.values == {}  # nothing released: no verified value (fail closed)
    assert result.checks["run_not_halted"] == "failed"
    assert result.signal is not None
    assert str(result.signal.value) == "0"
    assert "gate.transition" in kinds(db, result.attempt_id)
    verify_and_recompute(tmp_path)


def test_planner_writes_the_brief_but_not_its_citation_set(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble,
        planner: ScriptedChatDouble) -> None:
    planner.add(ReplyContent(json.dumps({
        "judgements": BRIEF_DOC["judgements"], "steps": BRIEF_DOC["steps"][:1]})))
    executor.add(drafted(CLEAN_S1, []))
    verifier.add(ReplyContent(PASS))
    result, _ = run_in_process(write_task(tmp_path, executor, verifier, planner), tmp_path)
    assert result.brief is not None
    assert [c.citation for c in result.brief.citations] == [
        c["citation"] for c in BRIEF_DOC["citations"]]
    assert [s.end.value for s in result.steps] == ["released"]
    # The planner saw the task and the approved sets only as data, never as instructions.
    system = planner.requests[0].body["messages"][0]["content"]
    assert BRIEF_DOC["task"] not in system


def test_planner_that_adds_citations_errors_the_run(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble,
        planner: ScriptedChatDouble) -> None:
    planner.add(ReplyContent(json.dumps({
        "judgements": [], "steps": BRIEF_DOC["steps"],
        "citations": [{"id": "C9", "citation": "ISO/IEC 27001:2022 clause 9.2"}]})))
    result, db = run_in_process(write_task(tmp_path, executor, verifier, planner), tmp_path)
    assert result.error is not None
    assert "unknown fields" in result.error
    assert result.signal is None
    assert kinds(db, result.attempt_id)[-1] == "attempt.errored"
    assert executor.requests == []
    assert verifier.requests == []


def test_cli_run_writes_report_and_exits_by_outcome(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    hostile = CLEAN_S1 + " <script>alert(1)</script>"
    # In call order: S1's draft, S1's re-render, S2's draft; and their three inspections.
    executor.add(drafted(hostile, []), drafted(CLEAN_S1, []), drafted(CLEAN_S2, ["C1"]))
    verifier.add(ReplyContent(verdict(False, ("contradiction", "<script>alert(1)</script>",
                                              "not in the spec"))),
                 ReplyContent(PASS), ReplyContent(PASS))
    task = write_task(tmp_path, executor, verifier)
    done = cli("document", "run", "--task", str(task), "--db", str(tmp_path / "l.db"),
               "--keys", str(tmp_path / "k"), "--out", str(tmp_path / "out"), "--json",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    folder = Path(doc["folder"])
    html = (folder / "report.html").read_text("utf-8")
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html
    assert json.loads((folder / "run.json").read_text("utf-8"))["attempt_id"] == doc[
        "attempt_id"]


def test_cli_run_exit_3_on_halt(tmp_path: Path, executor: ScriptedChatDouble,
                                verifier: ScriptedChatDouble) -> None:
    executor.add(drafted(CLEAN_S1, []))
    verifier.add(ReplyContent("nope"), ReplyContent("still nope"))
    task = write_task(tmp_path, executor, verifier)
    done = cli("document", "run", "--task", str(task), "--db", str(tmp_path / "l.db"),
               "--keys", str(tmp_path / "k"), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 3
    assert "halted" in done.stdout
    assert "Traceback" not in done.stderr


# -- missing required content (issue 13 item 7, seed 002: the step's own contract) ---------------

NO_CITATION_S2 = "Owners review the inventory every six months."
OMITTED = verdict(False, ("missing_required_content", "with its citation",
                          "The step requires the inventory requirement's citation; none is given."))


def test_a_correct_omission_triggers_the_one_rerender_then_passes(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    # Before issue 13 item 7 this verdict was unparseable twice (its quote is not in the draft)
    # and halted the run.
    executor.add(drafted(CLEAN_S1, []), drafted(NO_CITATION_S2, []), drafted(CLEAN_S2, ["C1"]))
    verifier.add(ReplyContent(PASS), ReplyContent(OMITTED), ReplyContent(PASS))
    result, _db = run_in_process(write_task(tmp_path, executor, verifier), tmp_path)
    assert result.halted is None
    step2 = result.steps[1]
    assert step2.end.value == "released"
    assert len(step2.inspections) == 2
    first = step2.inspections[0]
    assert first.verdict is not None
    assert [(i.kind, i.quote) for i in first.verdict.issues] == [
        ("missing_required_content", "with its citation")]
    rerender_prompt = executor.requests[2].body["messages"][1]["content"]
    assert "missing_required_content" in rerender_prompt
    assert "with its citation" in rerender_prompt
    verify_and_recompute(tmp_path)


def test_a_second_omission_releases_with_a_caveat(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    executor.add(drafted(CLEAN_S1, []), drafted(NO_CITATION_S2, []),
                 drafted(NO_CITATION_S2, []))
    verifier.add(ReplyContent(PASS), ReplyContent(OMITTED), ReplyContent(OMITTED))
    result, _db = run_in_process(write_task(tmp_path, executor, verifier), tmp_path)
    assert [s.end.value for s in result.steps] == ["released", "released_with_caveat"]


def test_an_omission_not_quoting_the_step_spec_is_unparseable_and_halts(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    # Quoted from the draft, or from nowhere: not verifiable against the step spec.
    for quote in (NO_CITATION_S2, "a retention schedule"):
        run_dir = tmp_path / quote.split()[0]
        run_dir.mkdir()
        with ScriptedChatDouble() as ex, ScriptedChatDouble() as ver:
            ex.add(drafted(CLEAN_S1, []), drafted(NO_CITATION_S2, []))
            bad = verdict(False, ("missing_required_content", quote, "missing"))
            ver.add(ReplyContent(PASS), ReplyContent(bad), ReplyContent(bad))
            result, _db = run_in_process(write_task(run_dir, ex, ver), run_dir)
        assert [s.end.value for s in result.steps] == ["released", "halted"]
        assert result.halted is not None
        assert "step's content spec" in result.halted


# -- the executor's sources (issue 13 item 8; seed 002: the executor reads uploads the verifier
#    never sees) ----------------------------------------------------------------------------------

SOURCE_TEXT = ("Signed quote Q-7731 from the tool vendor: the asset tool costs EUR 49.00 per "
               "month for the whole organisation.")
SOURCE_TEXT_2 = "Meeting note N-2204: the CISO owns the inventory process."


def _everything_sent(double: ScriptedChatDouble) -> str:
    return "\n".join(json.dumps(r.body, ensure_ascii=False) for r in double.requests)


def test_sources_reach_the_executor_and_never_the_verifier(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    (tmp_path / "quote.txt").write_text(SOURCE_TEXT, "utf-8")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "meeting.md").write_text(SOURCE_TEXT_2, "utf-8")
    executor.add(drafted(CLEAN_S1, []), drafted(INVENTED_S2, ["C1"]),
                 drafted(CLEAN_S2, ["C1"]))
    verifier.add(ReplyContent(PASS), ReplyContent(PASS), ReplyContent(PASS))
    task = write_task(tmp_path, executor, verifier, sources=["quote.txt", "notes/meeting.md"])
    result, db = run_in_process(task, tmp_path)
    assert result.halted is None
    assert len(executor.requests) == 3  # S1, S2 and S2's re-render
    for request in executor.requests:
        sent = json.dumps(request.body, ensure_ascii=False)
        assert "Q-7731" in sent
        assert "N-2204" in sent
    assert len(verifier.requests) == 3
    seen = _everything_sent(verifier)
    assert "Q-7731" not in seen
    assert "N-2204" not in seen
    assert "quote.txt" not in seen
    # What the executor was given is recorded for the audit, by digest.
    store = open_sqlite_ledger(db, read_only=True)
    try:
        stored = [e.fields["data"]["what"] for e in store.attempt_events(result.attempt_id)
                  if e.fields["kind"] == "evidence.stored"]
    finally:
        store.close()
    assert stored.count("executor_source") == 2
    verify_and_recompute(tmp_path)


def test_cli_source_option_reaches_the_executor_only(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble) -> None:
    source = tmp_path / "upload.md"
    source.write_text(SOURCE_TEXT, "utf-8")
    executor.add(drafted(CLEAN_S1, []), drafted(CLEAN_S2, ["C1"]))
    verifier.add(ReplyContent(PASS), ReplyContent(PASS))
    task = write_task(tmp_path, executor, verifier)
    done = cli("document", "run", "--task", str(task), "--source", str(source),
               "--db", str(tmp_path / "l.db"), "--keys", str(tmp_path / "k"),
               "--out", str(tmp_path / "out"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert all("Q-7731" in json.dumps(r.body) for r in executor.requests)
    assert "Q-7731" not in _everything_sent(verifier)


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("missing.txt", None, "cannot read"),
    ("binary.txt", b"\xff\xfe\x00", "not valid UTF-8"),
    ("big.txt", b"x" * (2 * 1024 * 1024 + 1), "more than the limit"),
])
def test_a_bad_source_is_one_line_and_exit_2(
        tmp_path: Path, executor: ScriptedChatDouble, verifier: ScriptedChatDouble,
        name: str, content: bytes | None, needle: str) -> None:
    if content is not None:
        (tmp_path / name).write_bytes(content)
    task = write_task(tmp_path, executor, verifier, sources=[name])
    done = cli("document", "run", "--task", str(task), "--db", str(tmp_path / "l.db"),
               "--keys", str(tmp_path / "k"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert name in lines[0]
    assert needle in lines[0]
    assert executor.requests == []
