"""``triz-eval report``: one static HTML page per ledger (issue 16 item 6; docs/dashboard.md).

The page is a single file that needs no server and no network: plotly.js is inlined once.  It
shows, from one pass over the ledger:

- **signals over time** per task class, each verified award's S at its time;
- **the divergence monitor**, per class: the known-suite minus hidden-control gap of every
  observation, and the monitor's declared tolerance (``min_gap``) as a band.  A gap that stays
  outside the band is what suspends a class (spec 9.8);
- **the outcome mix** per class: completed outcomes, errored, abandoned...;
- **quarantined awards**, **red-team campaigns** and **each attempt's breakdown** (the latest
  :data:`MAX_ATTEMPTS`), as tables.

Every string from the ledger is data and never markup.  The tables go through Jinja's
autoescaping.  The figures are JSON built here, with ``<``, ``>`` and ``&`` written as
``\\u`` escapes, so nothing in a string can end the ``<script>`` it sits in.  The plots carry
only class ids, attempt ids, times and numbers, never a free-text reason, which plotly would
read as its own pseudo-HTML.
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from importlib import resources
from typing import Any

import jinja2
import plotly.graph_objects as go
from plotly.io import to_json
from plotly.offline import get_plotlyjs

from ..evaluation.divergence import Settings
from ..ledger.events import OUTCOME_KINDS, EventKind
from ..ledger.store import LedgerStore

MAX_ATTEMPTS = 1000


@dataclass
class _Attempt:
    attempt_id: str
    task_class: str = "?"
    started: str = ""
    status: str = "initiated"
    outcome: str | None = None
    signal: str | None = None
    final: str | None = None
    verified: bool | None = None
    critical: bool = False
    reasons: list[str] = field(default_factory=list)
    quarantine: str = "clear"
    awarded_at: str | None = None


@dataclass
class LedgerView:
    """What the page shows, gathered from one pass over the ledger."""

    size: int = 0
    attempts: dict[str, _Attempt] = field(default_factory=dict)
    observations: dict[str, list[tuple[str, float, float, str]]] = field(
        default_factory=lambda: defaultdict(list))
    campaigns: list[dict[str, Any]] = field(default_factory=list)


def _fraction(text: object) -> float | None:
    part, _, whole = str(text).partition("/")
    try:
        return float(Fraction(int(part), int(whole)))
    except (ValueError, ZeroDivisionError):
        return None


def gather(store: LedgerStore) -> LedgerView:
    """One pass over the ledger's events (their bodies, as stored)."""
    view = LedgerView(size=store.size())
    for _, body in store.scan():
        e = json.loads(body)
        kind, data, attempt, at = e["kind"], e.get("data") or {}, e.get("attempt"), e["at"]
        if kind == EventKind.CONTROL_OBSERVATION.value:
            known, hidden = _fraction(data.get("known")), _fraction(data.get("hidden"))
            if known is not None and hidden is not None:
                view.observations[str(data.get("task_class"))].append(
                    (at, known, hidden, str(data.get("attempt"))))
            continue
        if kind == EventKind.AUDIT_REPORT.value:
            view.campaigns.append({**data, "at": at})
            continue
        if not isinstance(attempt, str) or attempt.startswith("loop/"):
            continue
        if kind == EventKind.ATTEMPT_INITIATED.value:
            view.attempts[attempt] = _Attempt(attempt, str(data.get("task_class")),
                                              str(data.get("started_at", at)))
        a = view.attempts.get(attempt)
        if a is None:
            continue
        if kind == EventKind.AWARD_DECISION.value:
            a.outcome, a.signal, a.final = data.get("outcome"), data.get("value"), \
                data.get("final")
            a.verified, a.critical = bool(data.get("verified")), \
                bool(data.get("critical_violation"))
            a.reasons, a.awarded_at = [str(r) for r in data.get("reasons") or []], at
        elif kind in OUTCOME_KINDS:
            a.status = kind.removeprefix("attempt.")
            if a.outcome is None:
                a.reasons = [str(data.get("reason") or "")]
        elif kind == EventKind.QUARANTINE_CHANGED.value and data.get("subject") in (
                None, "attempt"):
            a.quarantine = str(data.get("status", "quarantined"))
    return view


def _plain(text: str) -> str:
    """A ledger string for a plot label: plotly reads labels as its own pseudo-HTML (``<b>``,
    ``<a href>``), so the string's markup characters are entities it shows as text."""
    return html.escape(text, quote=True)


def _figure_json(fig: go.Figure) -> str:
    """The figure as JSON safe inside a ``<script>``: ``<``, ``>`` and ``&`` escaped."""
    text: str = to_json(fig, validate=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _signals(view: LedgerView) -> go.Figure:
    fig = go.Figure()
    by_class: dict[str, list[_Attempt]] = defaultdict(list)
    for a in view.attempts.values():
        if a.awarded_at is not None and a.verified and a.signal is not None:
            by_class[a.task_class].append(a)
    for task_class, rows in sorted(by_class.items()):
        fig.add_trace(go.Scatter(x=[a.awarded_at for a in rows],
                                 y=[float(str(a.signal)) for a in rows], mode="markers",
                                 name=_plain(task_class), text=[_plain(a.attempt_id) for a in rows],
                                 hovertemplate="%{text}<br>S = %{y}<extra></extra>"))
    fig.update_layout(title="Verified signals over time", xaxis_title="awarded at",
                      yaxis_title="S", height=380, margin={"t": 50})
    return fig


def _divergence(view: LedgerView, settings: Settings) -> go.Figure:
    fig = go.Figure()
    band = float(settings.min_gap)
    for task_class, rows in sorted(view.observations.items()):
        fig.add_trace(go.Scatter(x=[r[0] for r in rows], y=[r[1] - r[2] for r in rows],
                                 mode="lines+markers", name=_plain(task_class),
                                 text=[_plain(r[3]) for r in rows],
                                 hovertemplate="%{text}<br>known - hidden = %{y:.3f}"
                                               "<extra></extra>"))
    fig.add_hrect(y0=-band, y1=band, fillcolor="green", opacity=0.12, line_width=0,
                  annotation_text=f"declared tolerance ±{band:g}")
    fig.update_layout(title="Divergence monitor: known suite minus hidden control",
                      xaxis_title="observed at", yaxis_title="pass-rate gap", height=380,
                      margin={"t": 50})
    return fig


def _status_of(a: _Attempt) -> str:
    if a.critical:
        return "critical_violation"
    return a.outcome or a.status


def _outcomes(view: LedgerView) -> go.Figure:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for a in view.attempts.values():
        counts[a.task_class][_status_of(a)] += 1
    statuses = sorted({s for c in counts.values() for s in c})
    classes = sorted(counts)
    fig = go.Figure([go.Bar(name=_plain(s), x=[_plain(c) for c in classes],
                            y=[counts[c][s] for c in classes])
                     for s in statuses])
    fig.update_layout(barmode="stack", title="Outcome mix per class", yaxis_title="attempts",
                      height=380, margin={"t": 50})
    return fig


#: The page's template, beside this module (package data); autoescaped, strict.
_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
_ENV.filters["shown"] = lambda value: "—" if value is None else value
_PAGE = _ENV.from_string(
    resources.files(__package__).joinpath("dashboard.html.j2").read_text("utf-8"))


def render(view: LedgerView, *, title: str, settings: Settings | None = None,
           now: datetime | None = None) -> str:
    """The page's HTML (see the module docstring)."""
    attempts = sorted(view.attempts.values(), key=lambda a: a.started)
    figures = [_figure_json(f) for f in (_signals(view), _divergence(view, settings or Settings()),
                                         _outcomes(view))]
    return _PAGE.render(
        title=title, size=view.size, attempts_total=len(attempts),
        written=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        plotlyjs=get_plotlyjs().replace("</script", "<\\/script"), figures=figures,
        quarantined=[a for a in attempts if a.quarantine != "clear"],
        campaigns=view.campaigns, shown=attempts[-MAX_ATTEMPTS:][::-1], status_of=_status_of)
