"""``triz-eval document calibrate``: the model layer against a labelled corpus, through the
OpenAI protocol over a real socket (the scripted double), printing the confusion table (issue 13
"Done when"; seed 002 checklist 4: measure the false-positive share first).

The refusals run in process through the console script's entry function (``cli.main``, the
``triz_eval`` fixture) with the same environment and working directory; the tables are printed
by the installed script in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliResult
from tests.verifier.conftest import BRIEF_DOC, CLEAN_S1, CLEAN_S2, INVENTED_S2, PASS, verdict
from tests.verifier.openai_double import ReplyContent, ReplyStatus, ScriptedChatDouble
from triz_ri_smart_ai_evaluator.verifier.calibrate import Confusion, Outcome, load_corpus

TRIZ_EVAL = str(Path(sys.executable).parent / "triz-eval")
CORPUS = Path(__file__).resolve().parent / "corpus"


ENV = {"PATH": "/usr/bin:/bin", "COLUMNS": "200"}


def triz(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRIZ_EVAL, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False, env=ENV)


@pytest.fixture
def cli(triz_eval: Callable[..., CliResult]) -> Callable[..., CliResult]:
    """``triz`` in process: the same environment and working directory."""

    def run(*args: str | Path, cwd: Path) -> CliResult:
        return triz_eval(*args, env=ENV, cwd=cwd)

    return run


def write_corpus(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    (tmp_path / "brief.yaml").write_text(yaml.safe_dump(BRIEF_DOC), "utf-8")
    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


ROWS: list[dict[str, object]] = [
    {"id": "clean-1", "brief": "brief.yaml", "step": "S1", "draft": CLEAN_S1, "expected": "pass"},
    {"id": "clean-2", "brief": "brief.yaml", "step": "S2", "draft": CLEAN_S2, "expected": "pass"},
    {"id": "live-1", "brief": "brief.yaml", "step": "S2", "draft": INVENTED_S2,
     "expected": "fail"},
    {"id": "live-2", "brief": "brief.yaml", "step": "S2", "draft": INVENTED_S2,
     "expected": "fail"},
    {"id": "live-3", "brief": "brief.yaml", "step": "S2", "draft": INVENTED_S2,
     "expected": "fail"},
    {"id": "live-4", "brief": "brief.yaml", "step": "S2", "draft": INVENTED_S2,
     "expected": "fail"},
]
FAIL_92 = verdict(False, ("invented_citation", "clause 9.2", "not in the citation set"))
FAIL_CLEAN = verdict(False, ("contradiction", "every six months", "over-literal"))
# In row order: TN; FP; TP; FN; unparseable twice; a crash, then a TP on the retry.
SCRIPT = [ReplyContent(PASS), ReplyContent(FAIL_CLEAN), ReplyContent(FAIL_92), ReplyContent(PASS),
          ReplyContent("nope"), ReplyContent('{"pass": false, "issues": []}'),
          ReplyStatus(503), ReplyContent(FAIL_92)]


@pytest.mark.slow  # the installed script in a subprocess
def test_calibrate_prints_the_confusion_table_as_json(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path, ROWS)
    with ScriptedChatDouble(SCRIPT) as double:
        endpoint = tmp_path / "verifier.yaml"
        endpoint.write_text(yaml.safe_dump({"base_url": double.base_url, "model": "m"}),
                            "utf-8")
        done = triz("document", "calibrate", "--corpus", corpus, "--verifier", endpoint,
                    "--json", cwd=tmp_path)
        requests = list(double.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert {k: doc[k] for k in ("drafts", "tp", "fp", "tn", "fn", "unparseable", "crashed")} == {
        "drafts": 6, "tp": 2, "fp": 1, "tn": 1, "fn": 1, "unparseable": 1, "crashed": 0}
    assert doc["precision"] == pytest.approx(2 / 3)
    assert doc["recall"] == pytest.approx(2 / 3)
    assert doc["false_positive_share"] == pytest.approx(1 / 2)
    assert sorted(m["id"] for m in doc["misjudged"]) == ["clean-2", "live-2", "live-3"]
    # The verifier saw what the gate sends: the brief, the step and the draft as data.
    assert len(requests) == 8
    user = requests[0].body["messages"][1]["content"]
    assert CLEAN_S1 in user
    assert BRIEF_DOC["judgements"][0]["text"] in user


@pytest.mark.slow  # the installed script in a subprocess
def test_calibrate_prints_a_table_for_people_and_takes_a_task_file(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path, ROWS[:3])
    with ScriptedChatDouble([ReplyContent(PASS), ReplyContent(PASS),
                             ReplyContent(FAIL_92)]) as double:
        task = tmp_path / "task.yaml"
        role = {"base_url": double.base_url, "model": "m"}
        task.write_text(yaml.safe_dump({"format": "triz-document-task/1", "task": "t",
                                        "brief": "brief.yaml",
                                        "roles": {"executor": dict(role),
                                                  "verifier": dict(role)}}),
                        "utf-8")
        done = triz("document", "calibrate", "--corpus", corpus, "--task", task, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TP 1" in done.stdout
    assert "FN 0" in done.stdout
    assert "FP 0" in done.stdout
    assert "TN 2" in done.stdout
    assert "precision = 1.000" in done.stdout
    assert "unparseable = 0" in done.stdout


@pytest.mark.parametrize(("row", "needle"), [
    ({"brief": "brief.yaml", "step": "S1", "draft": "x", "expected": "maybe"}, "expected"),
    ({"brief": "brief.yaml", "step": "S9", "draft": "x", "expected": "pass"}, "S9"),
    ({"brief": "nope.yaml", "step": "S1", "draft": "x", "expected": "pass"}, "brief"),
    ({"brief": "brief.yaml", "step": "S1", "expected": "pass"}, "draft"),
])
def test_a_bad_row_is_one_line_naming_the_line_and_exit_2(
        tmp_path: Path, row: dict[str, object], needle: str,
        cli: Callable[..., CliResult]) -> None:
    corpus = write_corpus(tmp_path, [ROWS[0], row])
    done = cli("document", "calibrate", "--corpus", corpus, "--verifier",
               tmp_path / "unused.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "labelled.jsonl:2" in lines[0], lines[0]
    assert needle in lines[0], lines[0]


def test_exactly_one_endpoint_source_is_required(tmp_path: Path,
                                                 cli: Callable[..., CliResult]) -> None:
    corpus = write_corpus(tmp_path, ROWS[:1])
    done = cli("document", "calibrate", "--corpus", corpus, cwd=tmp_path)
    assert done.returncode == 2
    assert "exactly one of --verifier" in done.stderr


def test_the_mechanical_corpus_reads_as_a_labelled_corpus() -> None:
    # Reuse of tests/verifier/corpus: a row fails when it expects a finding the model judges;
    # URL and price rows are the mechanical layer's alone and are expected to pass.
    rows = load_corpus(CORPUS / "drafts.jsonl")
    assert len(rows) == 660
    by_id = {r.id: r.expected for r in rows}
    raw = [json.loads(line) for line in (CORPUS / "drafts.jsonl").read_text("utf-8").splitlines()]
    for r in raw:
        kinds = set(r["expected_findings"])
        want = "fail" if kinds & {"altered_citation", "invented_citation"} else "pass"
        assert by_id[r["id"]] == want, r["id"]
    assert sum(1 for r in rows if r.expected == "pass") > 320  # clean + URL/price rows


def test_the_table_counts_each_cell() -> None:
    outcomes = [Outcome("a", "fail", "fail"), Outcome("b", "pass", "fail"),
                Outcome("c", "pass", "pass"), Outcome("d", "fail", "pass"),
                Outcome("e", "fail", "unparseable"), Outcome("f", "pass", "crashed")]
    table = Confusion.of(outcomes)
    assert (table.tp, table.fp, table.tn, table.fn, table.unparseable, table.crashed) == (
        1, 1, 1, 1, 1, 1)
    assert Confusion.of([]).precision is None
