"""Issue 10: indicator domains, the caps that bound performance, class effective dates, and the
declared vocabularies that refuse proxy indicators (spec 3.3) and impressions (3.8, 11.12)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.conftest import CliResult
from triz_ri_smart_ai_evaluator.rules.loader import BUNDLED_CATALOGUE
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass

from .conftest import PILOT_FILE
from .test_versions import variant


def indicator(data: dict[str, Any], ind_id: str) -> dict[str, Any]:
    (found,) = [i for i in data["indicators"] if i["id"] == ind_id]
    assert isinstance(found, dict)
    return found


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("name", "Response length"),
        ("id", "response_length"),
        ("unit", "words per answer (word count)"),
        ("name", "Length of the answer"),
        ("name", "Number of steps"),
        ("measurement_method", "count of tool calls made by the agent"),
        ("name", "Tool-call count"),
        ("name", "Formatting quality"),
        ("name", "Number of formatted sections"),
        ("name", "Confident tone"),
        ("measurement_method", "number of tests written by the agent"),
        ("measurement_method", "number of documents retrieved for the query"),
        ("name", "Usefulness"),
        ("name", "Helpfulness of the reply"),
        ("unit", "tokens (token count of the completion)"),
    ],
)
def test_proxy_indicators_are_refused_in_any_spelling_spec_3_3(
    pilot_class: TaskClass, field: str, text: str
) -> None:
    def change(data: dict[str, Any]) -> None:
        indicator(data, "status_correctness")[field] = text

    with pytest.raises(ValidationError, match=r"spec 3\.3"):
        variant(pilot_class, change)


@pytest.mark.parametrize(
    "method",
    [
        "the reviewer's impression of the page",
        "liked by the product owner",
        "the evaluator feels the form works",
        "looks good to the reviewer",
        "gut feel of the on-call engineer",
        "opinion of two annotators",
        "subjectively rated",
        "thumbs up from the user",
        "eyeballing the output",
    ],
)
def test_impression_methods_are_refused_spec_3_8_11_12(pilot_class: TaskClass, method: str) -> None:
    def change(data: dict[str, Any]) -> None:
        indicator(data, "status_correctness")["measurement_method"] = method

    with pytest.raises(ValidationError, match=r"spec 3\.8"):
        variant(pilot_class, change)


def test_every_indicator_declares_its_domain(pilot_class: TaskClass) -> None:
    def change(data: dict[str, Any]) -> None:
        del indicator(data, "delivery")["domain"]

    with pytest.raises(ValidationError, match="domain"):
        variant(pilot_class, change)


@pytest.mark.parametrize("kind", ["count", "non_negative"])
def test_an_unbounded_rewarded_indicator_needs_a_cap_spec_4_6(
    pilot_class: TaskClass, kind: str
) -> None:
    def change(data: dict[str, Any]) -> None:
        indicator(data, "delivery")["domain"] = {"kind": kind}

    with pytest.raises(ValidationError, match=r"spec 4\.6: the performance of 'delivery'"):
        variant(pilot_class, change)

    def capped(data: dict[str, Any]) -> None:
        change(data)
        data["combination"]["caps"] = [{
            "indicator": "delivery", "maximum": "1", "justification": "one message per scenario",
            "shift_protection": "per attempt, no carry-over",
        }]

    tc = variant(pilot_class, capped)
    assert tc.max_performance("delivery") == 1
    assert tc.honest_maximum() == 2


def test_a_declared_overall_cap_raises_the_honest_maximum_only_as_declared(
    pilot_class: TaskClass,
) -> None:
    def change(data: dict[str, Any]) -> None:
        data["combination"]["overall_cap"] = {
            "maximum": "3/2", "justification": "x", "shift_protection": "y"}

    assert variant(pilot_class, change).honest_maximum() == 1 + 1 * 1.5


def test_a_benchmark_outside_its_domain_is_refused(pilot_class: TaskClass) -> None:
    def change(data: dict[str, Any]) -> None:
        data["benchmarks"][0]["versions"][0]["value"] = "2"

    with pytest.raises(ValidationError, match="outside its domain"):
        variant(pilot_class, change)


@pytest.mark.parametrize(
    "domain",
    [{"kind": "range"}, {"kind": "range", "low": "2", "high": "1"},
     {"kind": "proportion", "low": "0", "high": "2"}],
)
def test_malformed_domains_are_refused(pilot_class: TaskClass, domain: dict[str, str]) -> None:
    def change(data: dict[str, Any]) -> None:
        indicator(data, "delivery")["domain"] = domain

    with pytest.raises(ValidationError):
        variant(pilot_class, change)


@pytest.fixture
def run_cli(triz_eval: Callable[..., CliResult]) -> Callable[..., CliResult]:
    """``triz-eval ARGS`` in process (``cli.main``), in this environment without TRIZ_EVAL_*."""

    def run(*args: str) -> CliResult:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRIZ_EVAL_")}
        return triz_eval(*args, env=env)

    return run


def test_a_catalogue_file_edited_in_place_exits_3(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    """issue 10 class 7: an edited published benchmark version was used under the old label.
    Now the file is checked against the published store; the change in place is refused."""
    folder = tmp_path / "catalogue"
    shutil.copytree(BUNDLED_CATALOGUE, folder, ignore=shutil.ignore_patterns("published", "access"))
    edited = folder / PILOT_FILE.name
    text = edited.read_text(encoding="utf-8")
    needle = ("{version: 1, value: 1, effective_from: 2026-11-01T00:00:00Z, ground: initial,\n"
              '         justification: "pilot 7: public acceptance requires 100% Delivery"}')
    assert needle in text
    edited.write_text(text.replace(needle, needle.replace("value: 1,", "value: 1/2,")),
                      encoding="utf-8")
    example = Path(__file__).resolve().parents[2] / "examples/signal/pilot_02_partial.json"
    proc = run_cli("signal", "compute", "-t", "pilot_02_feedback_form", "-i", str(example),
                   "--catalogue", str(folder))
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "spec 4.4" in proc.stderr


def test_an_unpublished_catalogue_file_is_refused(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    folder = tmp_path / "catalogue"
    shutil.copytree(BUNDLED_CATALOGUE, folder, ignore=shutil.ignore_patterns("published", "access"))
    example = Path(__file__).resolve().parents[2] / "examples/signal/pilot_02_honest.json"
    proc = run_cli("signal", "compute", "-t", "pilot_02_feedback_form", "-i", str(example),
                   "--catalogue", str(folder), "--store", str(tmp_path / "empty-store"))
    assert proc.returncode == 2, proc.stderr
    assert "publish" in proc.stderr
