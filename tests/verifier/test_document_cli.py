"""``triz-eval document verify`` and ``run`` as a user meets them: exit codes, one-line errors,
no traceback, for good drafts, caught drafts and bad input (issue 5: a malformed brief, an
empty draft, a citation set with duplicates, a gigantic draft).

The refusals run in process through the console script's entry function (``cli.main``, the
``triz_eval`` fixture) with the same environment and working directory; the passing and caught
drafts run the installed script in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult
from tests.verifier.conftest import BRIEF_DOC, CLEAN_S2, INVENTED_S2, PASS
from tests.verifier.openai_double import ReplyContent, ReplyStatus, ScriptedChatDouble

TRIZ_EVAL = str(Path(sys.executable).parent / "triz-eval")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "document"


ENV = {"PATH": "/usr/bin:/bin", "COLUMNS": "200"}
Result = subprocess.CompletedProcess[str] | CliResult
Run = Callable[..., Result]


def triz(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRIZ_EVAL, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False, env=ENV)


@pytest.fixture
def cli(triz_eval: Callable[..., CliResult]) -> Run:
    """``triz`` in process: the same environment and working directory."""

    def run(*args: str | Path, cwd: Path) -> CliResult:
        return triz_eval(*args, env=ENV, cwd=cwd)

    return run


def write(tmp_path: Path, name: str, doc: Any) -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True),
                    "utf-8")
    return path


def assert_one_line_error(done: Result, code: int,
                          *needles: str) -> None:
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.slow  # the installed script in a subprocess
def test_bundled_examples_pass_and_fail_as_documented(tmp_path: Path) -> None:
    good = triz("document", "verify", "--brief", EXAMPLES / "brief.yaml",
                "--draft", EXAMPLES / "draft_faithful.yaml", cwd=tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "PASS" in good.stdout
    bad = triz("document", "verify", "--brief", EXAMPLES / "brief.yaml",
               "--draft", EXAMPLES / "draft_invented.yaml", "--json", cwd=tmp_path)
    assert bad.returncode == 1
    doc = json.loads(bad.stdout)
    kinds = sorted(f["kind"] for f in doc["mechanical"]["findings"])
    assert kinds == ["invented_citation", "invented_citation", "price_off_evidence",
                     "url_off_evidence"]
    assert doc["mechanical"]["injection"], "the evaluator instruction must raise the signal"


def test_plain_text_draft_needs_its_step(tmp_path: Path, cli: Run) -> None:
    brief = write(tmp_path, "brief.yaml", BRIEF_DOC)
    draft = write(tmp_path, "draft.md", CLEAN_S2)
    assert_one_line_error(cli("document", "verify", "--brief", brief, "--draft", draft,
                              cwd=tmp_path), 2, "draft.md")
    done = cli("document", "verify", "--brief", brief, "--draft", draft, "--step", "S2",
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


BadInput = Callable[[Path], tuple[Path, Path, str]]


def _malformed_brief(tmp: Path) -> tuple[Path, Path, str]:
    return (write(tmp, "brief.yaml", "format: triz-brief/1\nsteps: [\n"),
            write(tmp, "d.yaml", {"format": "triz-draft/1", "step": "S1", "text": "x"}),
            "brief.yaml")


def _brief_missing_steps(tmp: Path) -> tuple[Path, Path, str]:
    doc = {k: v for k, v in BRIEF_DOC.items() if k != "steps"}
    return (write(tmp, "brief.yaml", doc),
            write(tmp, "d.yaml", {"format": "triz-draft/1", "step": "S1", "text": "x"}),
            "steps")


def _duplicate_citations(tmp: Path) -> tuple[Path, Path, str]:
    doc = dict(BRIEF_DOC)
    doc["citations"] = [*BRIEF_DOC["citations"],
                        {"id": "C9", "citation": "Annex A 5.9 of ISO/IEC 27001:2022"}]
    return (write(tmp, "brief.yaml", doc),
            write(tmp, "d.yaml", {"format": "triz-draft/1", "step": "S1", "text": "x"}),
            "duplicate")


def _empty_draft(tmp: Path) -> tuple[Path, Path, str]:
    return (write(tmp, "brief.yaml", BRIEF_DOC),
            write(tmp, "d.yaml", {"format": "triz-draft/1", "step": "S1",
                                  "text": " \u200b\u2060 \n"}),
            "empty")


def _gigantic_draft(tmp: Path) -> tuple[Path, Path, str]:
    return (write(tmp, "brief.yaml", BRIEF_DOC),
            write(tmp, "d.md", "clause 9.2 " * 300_000), "d.md")


def _unknown_step(tmp: Path) -> tuple[Path, Path, str]:
    return (write(tmp, "brief.yaml", BRIEF_DOC),
            write(tmp, "d.yaml", {"format": "triz-draft/1", "step": "S7", "text": "x"}),
            "S7")


def _not_utf8(tmp: Path) -> tuple[Path, Path, str]:
    brief = tmp / "brief.yaml"
    brief.write_bytes(b"format: triz-brief/1\ntask: \xff\xfe\n")
    return (brief, write(tmp, "d.yaml", {"format": "triz-draft/1", "step": "S1", "text": "x"}),
            "brief.yaml")


@pytest.mark.parametrize("make", [_malformed_brief, _brief_missing_steps, _duplicate_citations,
                                  _empty_draft, _gigantic_draft, _unknown_step, _not_utf8],
                         ids=lambda f: f.__name__.strip("_"))
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, make: BadInput, cli: Run) -> None:
    brief, draft, needle = make(tmp_path)
    before = {p: p.read_bytes() for p in (brief, draft)}
    done = cli("document", "verify", "--brief", brief, "--draft", draft, "--step", "S1",
               cwd=tmp_path)
    assert_one_line_error(done, 2, needle)
    assert {p: p.read_bytes() for p in (brief, draft)} == before  # nothing was touched


@pytest.mark.slow  # the installed script in a subprocess
def test_verify_with_the_model_layer(tmp_path: Path) -> None:
    brief = write(tmp_path, "brief.yaml", BRIEF_DOC)
    draft = write(tmp_path, "d.yaml", {"format": "triz-draft/1", "step": "S2",
                                       "text": INVENTED_S2})
    with ScriptedChatDouble([ReplyContent(PASS)]) as double:
        endpoint = write(tmp_path, "verifier.yaml", {"base_url": double.base_url,
                                                     "model": "double"})
        done = triz("document", "verify", "--brief", brief, "--draft", draft,
                    "--verifier", endpoint, "--json", cwd=tmp_path)
    # The model said pass; the mechanical findings are final.
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["verdict"]["pass"] is True
    assert doc["passed"] is False


def test_verify_exit_4_when_the_model_gives_no_verdict(tmp_path: Path, cli: Run) -> None:
    brief = write(tmp_path, "brief.yaml", BRIEF_DOC)
    draft = write(tmp_path, "d.yaml", {"format": "triz-draft/1", "step": "S2",
                                       "text": CLEAN_S2})
    with ScriptedChatDouble([ReplyStatus(500), ReplyStatus(502)]) as double:
        endpoint = write(tmp_path, "verifier.yaml", {"base_url": double.base_url,
                                                     "model": "double"})
        done = cli("document", "verify", "--brief", brief, "--draft", draft,
                   "--verifier", endpoint, cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "no verdict after one retry" in done.stderr
    assert "Traceback" not in done.stderr


def test_endpoint_holding_a_key_is_refused(tmp_path: Path, cli: Run) -> None:
    brief = write(tmp_path, "brief.yaml", BRIEF_DOC)
    draft = write(tmp_path, "d.yaml", {"format": "triz-draft/1", "step": "S2",
                                       "text": CLEAN_S2})
    endpoint = write(tmp_path, "verifier.yaml", {"base_url": "http://127.0.0.1:9/v1",
                                                 "model": "m", "api_key": "sk-secret-123"})
    done = cli("document", "verify", "--brief", brief, "--draft", draft,
               "--verifier", endpoint, cwd=tmp_path)
    assert_one_line_error(done, 2, "api_key")
    assert "sk-secret-123" not in done.stderr + done.stdout


def test_run_refuses_a_task_without_brief_or_planner(tmp_path: Path, cli: Run) -> None:
    task = write(tmp_path, "task.yaml", {
        "format": "triz-document-task/1", "task": "t",
        "roles": {"executor": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
                  "verifier": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}})
    done = cli("document", "run", "--task", task, "--db", tmp_path / "l.db",
               "--keys", tmp_path / "k", cwd=tmp_path)
    assert_one_line_error(done, 2, "task.yaml", "planner")
    assert not (tmp_path / "l.db").exists()


def _nested(kind: str, levels: int) -> str:
    """A value nested ``levels`` deep, as JSON or as YAML block mappings."""
    if kind == "json":
        return '{"a": ' * levels + "1" + "}" * levels
    return "\n" + "".join(" " * (i + 1) + "k:\n" for i in range(levels)) + " " * (levels + 1) + "1"


@pytest.mark.parametrize("kind", ["json", "yaml"])
@pytest.mark.parametrize("which", ["brief", "draft"])
@pytest.mark.parametrize("levels", [1_000, 100_000])
def test_deeply_nested_input_is_one_line_and_exit_2(tmp_path: Path, kind: str, which: str,
                                                    levels: int, cli: Run) -> None:
    # issue 13 item 9 (issue 10): nesting past any parser's recursion limit is bad input
    # (exit 2, one line naming the file), never an internal error (exit 70).
    if kind == "yaml" and levels > 1_000:
        nested = "[" * levels + "]" * levels  # flow style: block style would pass 2 MiB
    else:
        nested = _nested(kind, levels)
    if which == "brief":
        body = ('{"format": "triz-brief/1", "task": ' + nested + "}" if kind == "json"
                else f"format: triz-brief/1\ntask: {nested}\n")
        brief = write(tmp_path, f"deep.{kind}", body)
        draft = write(tmp_path, "d.yaml", {"format": "triz-draft/1", "step": "S1", "text": "x"})
    else:
        body = ('{"format": "triz-draft/1", "step": "S1", "text": ' + nested + "}"
                if kind == "json" else f"format: triz-draft/1\nstep: S1\ntext: {nested}\n")
        brief = write(tmp_path, "brief.yaml", BRIEF_DOC)
        draft = write(tmp_path, f"deep.{kind}", body)
    done = cli("document", "verify", "--brief", brief, "--draft", draft, cwd=tmp_path)
    assert_one_line_error(done, 2, f"deep.{kind}", "nested deeper")
