"""The publication bundle of one run (pilot 8, 13) and its self-contained HTML report.

Everything the candidate produced is untrusted text: the HTML report is rendered by Jinja2 with
autoescaping on, so a message carrying ``<script>`` is shown, never run.  Files are written
atomically (temp file, then ``os.replace``).
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

import jinja2

# The bundle JSON every class writes; pilot code reaches it as report.json_bytes.
from ..harnesses.runner import json_bytes as json_bytes  # noqa: PLC0414 - a re-export
from ..rules import residual_risk

_PACKAGES = ("triz-ri-smart-ai-evaluator", "flask", "gunicorn", "aiosmtpd", "httpx", "faker")


def environment_digest() -> dict[str, Any]:
    """Interpreter, kernel and package versions of the run (pilot 8, 13)."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    doc = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "packages": versions,
    }
    doc["sha256"] = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    return doc


def tool_versions() -> dict[str, str | None]:
    """The versions of the tools a run used (pilot 13): gunicorn and aiosmtpd, bubblewrap,
    nftables and the kernel.  A tool that cannot be asked is None."""
    out: dict[str, str | None] = {"kernel": platform.release()}
    for name in ("gunicorn", "aiosmtpd", "flask"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    for name, argv in (("bwrap", ["bwrap", "--version"]), ("nft", ["nft", "--version"])):
        path = shutil.which(argv[0])
        try:
            proc = subprocess.run(  # noqa: S603 - fixed argv of a system tool
                [path or argv[0], *argv[1:]], capture_output=True, text=True,
                                  timeout=10, check=False)
            out[name] = (proc.stdout or proc.stderr).strip().splitlines()[0] or None
        except (OSError, subprocess.SubprocessError, IndexError):
            out[name] = None
    return out


def jsonl_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return "".join(
        json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows
    ).encode()


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Pilot 02 run {{ summary.attempt_id }}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem;color:#222}
table{border-collapse:collapse;margin:1rem 0;width:100%}
td,th{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top;font-size:.9rem}
th{background:#f3f3f3}.passed{color:#176317}.failed{color:#a11}.unverified{color:#a60}
code,pre{font-family:ui-monospace,monospace;font-size:.85rem;white-space:pre-wrap;word-break:break-all}
.big{font-size:1.4rem;font-weight:600}
</style></head><body>
<h1>Pilot 02, feedback form: evaluation of one candidate</h1>
<p class="big">Signal S = {{ summary.signal }} ({{ summary.outcome }});
scorer_pass = {{ summary.scorer_pass }}; pilot_pass = {{ summary.pilot_pass }}</p>
<table>
<tr><th>attempt</th><td><code>{{ summary.attempt_id }}</code></td></tr>
<tr><th>candidate digest (before / after)</th><td><code>{{ summary.candidate_digest }}</code><br>
<code>{{ summary.candidate_digest_after }}</code></td></tr>
<tr><th>isolation</th><td>{{ summary.isolation }}</td></tr>
<tr><th>rules version</th><td><code>{{ summary.rules_version }}</code></td></tr>
<tr><th>quarantine</th><td>{{ summary.quarantine or "none" }}</td></tr>
<tr><th>reasons</th><td>{% for r in summary.reasons %}{{ r }}<br>{% endfor %}</td></tr>
</table>
<h2>Metrics (pilot 7)</h2>
<table><tr><th>metric</th><th>value</th><th>as fraction</th></tr>
{% for m in metrics %}<tr><td>{{ m.id }}</td><td>{{ m.value }}</td><td>{{ m.fraction }}</td></tr>
{% endfor %}</table>
<h2>Critical checks (external layer)</h2>
<table><tr><th>check</th><th>state</th><th>details</th></tr>
{% for f in findings %}<tr><td>{{ f.id }}</td><td class="{{ f.state }}">{{ f.state }}</td>
<td>{% for d in f.details %}<code>{{ d }}</code><br>{% endfor %}</td></tr>
{% endfor %}</table>
<h2>Scenarios</h2>
<table><tr><th>id</th><th>category</th><th>valid</th><th>HTTP</th><th>messages</th>
<th>fields</th><th>name</th><th>message</th></tr>
{% for s in scenarios %}<tr><td><code>{{ s.id }}</code></td><td>{{ s.category }}</td>
<td>{{ s.valid }}</td><td>{{ s.status }}</td><td>{{ s.delivered }}</td><td>{{ s.fields_ok }}</td>
<td>{{ s.name }}</td><td><pre>{{ s.message }}</pre></td></tr>
{% endfor %}</table>
<h2>Basic scorer report (score_logs.py)</h2><pre>{{ scorer }}</pre>
<h2>Environment</h2><pre>{{ environment }}</pre>
<h2>Files of this bundle</h2>
<table><tr><th>file</th><th>SHA-256</th></tr>
{% for name, digest in files %}<tr><td>{{ name }}</td><td><code>{{ digest }}</code></td></tr>
{% endfor %}</table>
</body></html>
"""


def render_html(
    *,
    summary: Mapping[str, Any],
    metrics: Sequence[Mapping[str, Any]],
    findings: Sequence[Mapping[str, Any]],
    scenarios: Sequence[Mapping[str, Any]],
    scorer: Mapping[str, Any],
    environment: Mapping[str, Any],
    files: Sequence[tuple[str, str]],
) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return with_residual_risks(env, env.from_string(_TEMPLATE).render(
        summary=summary,
        metrics=metrics,
        findings=findings,
        scenarios=scenarios,
        scorer=json.dumps(scorer, ensure_ascii=False, indent=2),
        environment=json.dumps(environment, ensure_ascii=False, indent=2),
        files=files,
    ))


_RISKS_TEMPLATE = """<h2>Residual risks (spec 11.24)</h2>
<p>{{ applying|length }} of the {{ total }} entries of the residual-risk log apply to this class;
the whole log: <code>triz-eval catalogue risks</code>.</p>
<table><tr><th>risk</th><th>kind</th><th>limit</th><th>design boundary</th><th>owner</th>
<th>detected by</th></tr>
{% for r in applying %}<tr><td><code>{{ r.id }}</code></td><td>{{ r.kind }}</td>
<td>{{ r.title }}</td><td>{{ r.boundary }}</td><td>{{ r.owner }}</td>
<td><code>{{ r.detected_by }}</code></td></tr>
{% endfor %}</table>
"""


def with_residual_risks(env: jinja2.Environment, page: str,
                        task_class: str = "pilot_02_feedback_form") -> str:
    """``page`` with the residual-risk log's entries for ``task_class`` before its end (spec
    11.24: the system reports its known limits in every report)."""
    risks = residual_risk.load()
    section = env.from_string(_RISKS_TEMPLATE).render(
        applying=[r for r in risks if r.applies(task_class)], total=len(risks))
    end = page.rindex("</body>")
    return page[:end] + section + page[end:]
