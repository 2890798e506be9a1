"""``triz-eval report`` in a real headless browser (issue 16 item 6): Debian's Chromium driven by
Playwright opens the page from disk with no server and no network, the three plots render,
the tables hold the ledger's attempts, and hostile strings written into the ledger (an
errored attempt's reason, a campaign's name and statement, an observation's attempt id) show
as text and never run."""

from __future__ import annotations

import html
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from tests.acceptance._cli import cli
from tests.ledger._attempt_cli import with_stored_evidence
from tests.signal.factories import PILOT, inputs_for, pilot_values, task_class
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import (
    DEFAULT_ORIGIN,
    create_log_key,
    open_sqlite_ledger,
)
from triz_ri_smart_ai_evaluator.ledger.payloads import AttemptEnded, QuarantineChanged
from triz_ri_smart_ai_evaluator.rules import pin

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
T0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
SCRIPT = "</script><script>window.pwned = 1</script>"
IMG = "<img src=x onerror=\"window.pwned = 2\">"
BOLD = "<b>not bold</b> & <a href=\"javascript:window.pwned=3\">link</a>"


def _ledger(root: Path) -> None:
    """A ledger with a verified award, a quarantined one, an errored attempt with a hostile
    reason, a divergence observation and a red-team report with hostile text."""
    create_log_key(root / "keys", origin=DEFAULT_ORIGIN)
    store = open_sqlite_ledger(root / "ledger.db", root / "keys")
    try:
        pinned = pin(task_class(PILOT), started_at=T0)
        for n, attempt in enumerate(("ok-1", "quarantined-1", "broken-1")):
            at = T0 + timedelta(minutes=n)
            attempts.initiate(store, pinned, attempt_id=attempt, task_version=pinned.version,
                              started_at=at, deadline=at + timedelta(hours=1))
        for attempt in ("ok-1", "quarantined-1"):
            inputs = with_stored_evidence(store, attempt, inputs_for(PILOT, pilot_values()))
            attempts.evaluate(store, pinned, inputs, attempt_id=attempt, at=T0)
        store.append([
            NewEvent.make(EventKind.QUARANTINE_CHANGED, QuarantineChanged(
                status="quarantined", reason=BOLD), actor="owner-1", at=T0,
                attempt="quarantined-1"),
            NewEvent.make(EventKind.ATTEMPT_ERRORED, AttemptEnded(reason=IMG + SCRIPT,
                                                                  stage="run"),
                          actor="harness", at=T0, attempt="broken-1"),
            NewEvent.make(EventKind.CONTROL_OBSERVATION, {
                "task_class": PILOT, "attempt": "ok-1", "known": "9/10", "hidden": "5/10",
                "known_cases": 10, "hidden_cases": 10}, actor="loop", at=T0,
                attempt=f"loop/{PILOT}"),
            # a class name no catalogue would accept, written straight into the log: it
            # becomes a plot's trace name, inside the page's <script>
            NewEvent.make(EventKind.CONTROL_OBSERVATION, {
                "task_class": SCRIPT, "attempt": "ok-1", "known": "1/2", "hidden": "1/2",
                "known_cases": 2, "hidden_cases": 2}, actor="loop", at=T0,
                attempt="loop/hostile"),
            NewEvent.make(EventKind.AUDIT_REPORT, {
                "task_class": PILOT, "rules_version": pinned.version, "harness_version": "h/1",
                "campaign": SCRIPT, "budget": {"automated": 1}, "tried": {"automated": 1},
                "caught": 1, "exploits": [IMG], "stopped": "budget", "statement": BOLD,
                "passed": False, "report": "ab" * 32}, actor="auditor-1", at=T0,
                attempt=f"loop/{PILOT}"),
        ])
    finally:
        store.close()


@pytest.fixture
def page(tmp_path: Path) -> Iterator[tuple[Any, list[str], dict[str, Any]]]:
    _ledger(tmp_path)
    done = cli(tmp_path, "report", "-o", tmp_path / "report.html", "--title", "Ledger " + IMG)
    assert done.returncode == 0, done.stderr
    errors: list[str] = []
    seen: dict[str, Any] = {"dialogs": 0, "requests": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            tab = browser.new_page()
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.on("dialog", lambda d: (seen.__setitem__("dialogs", seen["dialogs"] + 1),
                                        d.dismiss()))
            tab.on("request", lambda r: seen["requests"].append(r.url))
            tab.goto((tmp_path / "report.html").as_uri())
            tab.wait_for_selector(".figure .main-svg")
            yield tab, errors, seen
        finally:
            browser.close()


def test_the_page_renders_its_plots_and_tables_offline(page: Any) -> None:
    tab, errors, seen = page
    assert errors == []
    assert tab.locator(".figure").count() == 3
    assert tab.locator(".figure .main-svg").count() >= 3, "each plot drew its SVG"
    assert tab.locator("#attempts tr").count() == 1 + 3
    assert tab.locator("#quarantined tr").count() == 1 + 1
    assert tab.locator("#campaigns tr").count() == 1 + 1
    assert all(url.startswith("file:") for url in seen["requests"]), seen["requests"]
    # the divergence plot holds the observation's gap: 9/10 - 5/10
    traces = tab.evaluate("document.getElementById('fig-2').data.map(t => [t.name, t.y])")
    assert [PILOT, [pytest.approx(0.4)]] in traces
    assert [html.escape(SCRIPT), [0]] in traces, "the hostile name is plotly text, as such"
    legend = tab.locator("#fig-2 .legendtext").all_text_contents()
    assert SCRIPT in legend, "shown literally in the legend"


def test_hostile_strings_show_as_text_and_never_run(page: Any) -> None:
    tab, errors, seen = page
    assert tab.evaluate("typeof window.pwned") == "undefined"
    assert seen["dialogs"] == 0
    assert errors == []
    broken = tab.locator("#attempts tr", has_text="broken-1").inner_text()
    assert IMG in broken
    assert SCRIPT in broken
    campaign = tab.locator("#campaigns tr").nth(1).inner_text()
    assert SCRIPT in campaign
    assert BOLD in campaign
    assert tab.locator("#campaigns img, #attempts img, #attempts script").count() == 0
    assert IMG in tab.title()
