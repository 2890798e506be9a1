"""A document run's publication folder: ``run.json``, ``brief.json`` and a readable report.

Everything shown comes from untrusted drafts and model answers, so the HTML template escapes
everything (jinja2 autoescape) and the page loads nothing from anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from .._io import write_atomic
from .pipeline import DocumentRun

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Document run {{ run.attempt_id }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; }
td, th { border: 1px solid #ccc; padding: .25rem .5rem; text-align: left; vertical-align: top; }
.passed, .released { color: #176117; } .failed, .halted { color: #a11; }
.released_with_caveat { color: #a66a00; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .5rem; }
</style></head><body>
<h1>Document run {{ run.attempt_id }}</h1>
<table>
<tr><th>signal S</th><td>{{ doc.signal }}</td></tr>
<tr><th>outcome</th><td>{{ doc.outcome }}</td></tr>
<tr><th>halted</th><td>{{ doc.halted or "no" }}</td></tr>
<tr><th>error</th><td>{{ doc.error or "none" }}</td></tr>
</table>
<h2>Indicators</h2>
<table><tr><th>indicator</th><th>verified value</th></tr>
{% for key, value in doc["values"].items() %}<tr><td>{{ key }}</td><td>{{ value }}</td></tr>
{% else %}<tr><td colspan="2">no verified value (nothing was released)</td></tr>{% endfor %}
</table>
<h2>Checklist</h2>
<table><tr><th>item</th><th>state</th></tr>
{% for key, value in doc.checks.items() %}<tr><td>{{ key }}</td>
<td class="{{ value }}">{{ value }}</td></tr>{% endfor %}
</table>
<h2>Steps</h2>
{% for step in doc.steps %}
<h3>{{ step.step }}: <span class="{{ step.end }}">{{ step.end }}</span></h3>
{% if step.halt_reason %}<p>halted: {{ step.halt_reason }}</p>{% endif %}
{% for ins in step.inspections %}
<h4>inspection {{ ins.inspection }} of draft {{ ins.draft_sha256[:16] }}:
 {{ "passed" if ins.passed else ("failed" if ins.complete else "no verdict") }}</h4>
<table><tr><th>layer</th><th>kind</th><th>quote</th><th>explanation</th></tr>
{% for issue in ins.issues %}<tr><td>{{ issue.layer }}</td><td>{{ issue.kind }}</td>
<td><pre>{{ issue.quote }}</pre></td><td>{{ issue.explanation }}</td></tr>
{% else %}<tr><td colspan="4">no issue</td></tr>{% endfor %}
</table>
<p>verifier calls: {% for c in ins.calls %}{{ c.outcome }}{% if c.reason %} ({{ c.reason }})
{% endif %}{% if not loop.last %}, {% endif %}{% endfor %}</p>
{% endfor %}
{% for s in step.injection_signals %}<p class="failed">injection signal ({{ s.kind }}):
<code>{{ s.quote }}</code> - recorded, never changes a decision</p>{% endfor %}
{% endfor %}
</body></html>
"""


def render_html(run: DocumentRun, doc: dict[str, Any] | None = None) -> str:
    """The report; ``doc`` is ``run.to_json()`` when the caller already has it."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_TEMPLATE).render(run=run, doc=doc or run.to_json())


def publish(run: DocumentRun, out_dir: Path) -> Path:
    """Write ``run.json``, ``brief.json`` and ``report.html`` under ``out_dir/<attempt>``."""
    folder = out_dir / run.attempt_id
    doc: dict[str, Any] = run.to_json()
    write_atomic(folder / "run.json", json.dumps(doc, ensure_ascii=False, indent=2).encode())
    if run.brief is not None:
        write_atomic(folder / "brief.json", json.dumps(
            run.brief.model_dump(mode="json"), ensure_ascii=False, indent=2).encode())
    write_atomic(folder / "report.html", render_html(run, doc).encode("utf-8"))
    return folder
