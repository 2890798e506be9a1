"""Pilot 02's judging phase: the run's records as the scoring phase reads them, the
publication bundle's files (pilot 8, 13), the stopping conditions (pilot 12) and the report."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._io import write_atomic
from ..errors import InputError
from ..harnesses import runner
from . import candidate as cand
from . import report, scoring
from .checks import Message
from .contract import normalize_line_endings, read_feedback_fields_leniently
from .driver import Exchange, regression_probe
from .receiver import smtp_events_for_scorer
from .sandboxed import SENDER, Collected
from .smtp_records import analyse_message

SEED_COMMITMENT_TAG = b"triz-ri pilot02 control seed\x00"
SEED_SCHEME = runner.seed_scheme(SEED_COMMITMENT_TAG)
SCORE_LOGS = Path(__file__).resolve().parent / "scripts" / "score_logs.py"


def _messages(received: Sequence[Any]) -> list[Message]:
    out = []
    for m in received:
        a = m.analysis
        fields: dict[str, str | None]
        if a.parsed is not None:
            fields = {"name": a.parsed.name, "email": a.parsed.email,
                      "message": a.parsed.message, "phone": a.parsed.phone}
            body_token: str | None = a.parsed.run_token
        else:
            fields = {}
            readable = read_feedback_fields_leniently(normalize_line_endings(a.body or ""))
            body_token = readable.get("run_token")
        out.append(Message(
            run_token=m.run_token, mail_from=m.mail_from or "", recipients=tuple(m.recipients),
            headers=tuple(a.headers), duplicate_headers=tuple(a.duplicate_headers),
            defects=tuple(a.defects) + tuple(f"{n}: {d}" for n, d in a.header_defects),
            body=a.body or "", parse_error=a.parse_error, fields=fields,
            header_token=a.x_run_token, body_token=body_token))
    return out


def as_posted(scenarios: Sequence[Mapping[str, Any]],
               submissions: Mapping[str, Sequence[Exchange]]) -> list[dict[str, Any]]:
    """The scenarios with the run_token each was really posted with: a browser posts the
    token its page view issued (issue 12 item 1), so that is the token its mail must carry."""
    out = []
    for s in scenarios:
        posts = submissions.get(str(s["id"])) or ()
        token = posts[0].run_token if posts and posts[0].run_token else s["run_token"]
        out.append({**s, "run_token": token})
    return out


def gather_evidence(got: Collected, scenarios: Sequence[Mapping[str, Any]],
              drawn: Sequence[Mapping[str, Any]],
              plan: Mapping[str, Mapping[str, Any]], scope: Mapping[str, Any], bundle: Path,
              prepared: cand.Candidate, artefact: bytes, work: Path, control_digest: str
              ) -> tuple[scoring.Evidence, list[Any], Path, str]:
    """Everything the run recorded, as the scoring phase reads it; the receiver's export is
    written (and read back) here.  ``scenarios`` are as posted, ``drawn`` as drawn (the
    control set that must not have changed).  Returns the evidence, the accepted messages,
    the export's path and its SHA-256."""
    twins = [(str(p["twin_of"]), sid) for sid, p in plan.items() if p.get("twin_of")]
    replays = [(str(p["replay_of"]), sid) for sid, p in plan.items() if p.get("replay_of")]
    test_replays = [(str(p["test_profile_of"]), sid) for sid, p in plan.items()
                    if p.get("test_profile_of")]
    # The control set as drawn: the explicit-test replays are added to the run, not drawn.
    drawn_plan = {str(s["id"]): plan[str(s["id"])] for s in drawn}
    digest_after = cand.archive_digest(cand.tree_entries(prepared.tree))
    receiver = got.receiver
    received = receiver.accepted_messages()
    bundle.mkdir(parents=True, exist_ok=True)
    export_path = bundle / "receiver_events.jsonl"
    export_digest = receiver.export(export_path)
    reproduced = export_reproduced(export_path, received)
    refused = Counter(
        m.run_token for m in receiver.messages() if not m.accepted and m.run_token is not None
    )
    rcpts = [str(e.detail.get("address", "")) for e in receiver.events() if e.kind == "rcpt_to"]
    # After an abort the original functions were never probed: not measured, not 0/4 as if
    # measured (issue 12 item 14).
    regression = {**regression_probe(got.baseline, [e for e in got.crawl if e.method == "GET"]),
                  "measured": got.aborted is None}
    evidence = scoring.Evidence(
        scenarios=scenarios, plan=plan, twins=twins, replays=replays,
        submissions=got.submissions, crawl=got.crawl, messages=_messages(received),
        refused_tokens=refused, rcpt_attempts=rcpts, trusted_recipient=got.trusted,
        sender=SENDER, secrets=got.secrets,
        canary=got.canary, regression=regression, scope=scope,
        attempted_destinations=got.attempted, sink_connections=got.sink_connections,
        control_digest_before=control_digest,
        control_digest_after=hashlib.sha256(
            report.json_bytes({"scenarios": drawn, "plan": drawn_plan})).hexdigest(),
        candidate_digest_before=prepared.digest, candidate_digest_after=digest_after,
        receiver_export_reproduced=reproduced,
        published_digest=published_digest(prepared.source, artefact, work),
        self_checks=got.self_checks, public_tests=got.public_tests,
        app_output=got.app_output.decode("utf-8", "replace"), test_replays=test_replays,
    )
    return evidence, received, export_path, export_digest


def bundle_files(scenarios: Sequence[Mapping[str, Any]], plan: Mapping[str, Any],
                  got: Collected, received: Sequence[Any], token_to_id: Mapping[str, str],
                  regression: Mapping[str, Any], scope: Mapping[str, Any]) -> dict[str, bytes]:
    """The files of the publication bundle that the run's records give (pilot 8, 13)."""
    scored = [s for s in scenarios if scoring.is_scored(plan[str(s["id"])])]
    http_results = [
        {"scenario_id": sid, "status_code": posts[-1].status_code,
         "body": posts[-1].response_body, "started": posts[-1].started,
         "finished": posts[-1].finished}
        for sid, posts in got.submissions.items()
    ]
    return {
        "scenarios.json": report.json_bytes(scored),
        "scenarios_all.json": report.json_bytes(scenarios),
        "plan.json": report.json_bytes(plan),
        "http_results.jsonl": report.jsonl_bytes(http_results),
        "http_exchanges.jsonl": report.jsonl_bytes(
            [e.to_dict() for posts in got.submissions.values() for e in posts]
            + [e.to_dict() for e in got.crawl]
        ),
        "smtp_events.jsonl": report.jsonl_bytes(smtp_events_for_scorer(received, token_to_id)),
        "regression.json": report.json_bytes({"probe": regression,
                                              "public_tests": got.public_tests,
                                              "baseline": [e.to_dict() for e in got.baseline]}),
        "scope_report.json": report.json_bytes(scope),
        "egress.json": report.json_bytes({"isolation": got.isolation,
                                          "degraded_reason": got.degraded_reason,
                                          "attempted": got.attempted,
                                          "sink_connections": got.sink_connections}),
        "self_checks.txt": got.self_check_log,
        "environment.json": report.json_bytes(report.environment_digest()),
    }


def provenance_files(source: str, artefact: bytes, seed: bytes, commitment: str,
                      got: Collected) -> dict[str, bytes]:
    """What pilot 13 publishes besides the run's records (issue 12 item 12): the candidate
    as submitted, the starting repository's digest and version, the control seed's commitment
    and its reveal, the tool versions, and the application's own output and access log."""
    base = cand.starting_repo()
    version = re.search(r'APP_VERSION: Final = "([^"]+)"',
                        (base / "feedback_app" / "pages.py").read_text("utf-8"))
    return {
        "candidate.diff" if source == "diff" else "candidate_entries.json": artefact,
        "starting_repo.json": report.json_bytes({
            "digest": cand.archive_digest(cand.tree_entries(base)),
            "app_version": version.group(1) if version else None}),
        "control_seed.json": report.json_bytes({"commitment": commitment,
                                                "scheme": SEED_SCHEME, "seed": seed.hex()}),
        "tools.json": report.json_bytes(report.tool_versions()),
        "app_output.log": got.app_output,
    }


def stopping_conditions(evidence: scoring.Evidence, found: Sequence[Any]
                         ) -> dict[str, bool]:
    """Each stopping condition of pilot 12 and whether it fired in this run."""
    fired = set(scoring.quarantine_reasons(evidence, found))
    names = [*scoring.STOPPING_CONDITIONS.values(),
             "inability to reproduce the SMTP result evidence",
             "difference between the published artefact and the artefact run"]
    return {name: name in fired for name in names}


def export_reproduced(export: Path, received: Sequence[Any]) -> bool:
    """Pilot 12, "reproduce the SMTP result evidence", from independent observations: the
    export is read back from disk and every accepted message re-analysed from its raw bytes;
    the tokens and fields must be those the live receiver recorded, in the same order."""
    try:
        lines = [json.loads(line) for line in export.read_text("utf-8").splitlines() if line]
        again = []
        for line in lines:
            message = line.get("message")
            if not isinstance(message, dict) or not message.get("accepted"):
                continue
            raw = base64.b64decode(str(message["raw_base64"]), validate=True)
            if hashlib.sha256(raw).hexdigest() != message.get("raw_sha256"):
                return False
            again.append(_observed(analyse_message(raw)))
    except (OSError, ValueError, KeyError, TypeError, binascii.Error):
        return False
    return again == [_observed(m.analysis) for m in received]


def _observed(a: Any) -> tuple[Any, ...]:
    parsed = a.parsed
    return (a.x_run_token, a.run_token, None if parsed is None else
            (parsed.name, parsed.email, parsed.phone, parsed.message), a.headers)


def published_digest(source: str, artefact: bytes, work: Path) -> str | None:
    """Pilot 12, "the published artefact is the artefact run": the digest of the artefact as
    published (the bytes stored in the ledger), materialised afresh: a diff is applied again
    to a clean copy of the starting repository; a directory's recorded entries are digested.
    None when it cannot be materialised (which fires the condition)."""
    try:
        if source == "diff":
            fresh = work / "republished"
            fresh.mkdir()
            patch = fresh / "candidate.diff"
            patch.write_bytes(artefact)
            return cand.prepare(patch, fresh).digest
        recorded = json.loads(artefact)
        return cand.archive_digest({p: cand.Entry(str(k), bool(x), str(h))
                                    for p, (k, x, h) in recorded.items()})
    except (InputError, OSError, ValueError, TypeError):
        return None


def public_acceptance(scorer: Mapping[str, Any], found: Sequence[Any],
                       values: Mapping[str, str], disagreements: Sequence[str]) -> bool | None:
    """Public acceptance (pilot 7): scorer_pass, no critical violation, Recovery and
    Regression complete.  Null until every external check of the run has its evidence."""
    if any(f.state == "unverified" for f in found) or disagreements:
        return None

    def complete(key: str) -> bool:
        part, whole = values[key].split("/")
        return whole != "0" and part == whole

    return (
        bool(scorer.get("scorer_pass"))
        and all(f.state == "passed" for f in found)
        and complete("recovery")
        and complete("regression")
    )


def run_score_logs(bundle: Path) -> dict[str, Any]:
    """The published interface, exactly: the script on the three files (pilot 7)."""
    proc = subprocess.run(  # noqa: S603 - our own script, fixed argv
        [sys.executable, str(SCORE_LOGS), str(bundle / "scenarios.json"),
         str(bundle / "http_results.jsonl"), str(bundle / "smtp_events.jsonl")],
        capture_output=True, timeout=120, check=False,
    )
    if proc.returncode != 0:
        raise InputError(f"score_logs.py failed: {proc.stderr.decode(errors='replace')[:300]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def publish_report(bundle: Path, files: Mapping[str, bytes], summary: Mapping[str, Any],
             values: Mapping[str, str], found: Sequence[Any], scenarios: Sequence[Any],
             plan: Mapping[str, Any], decided: Mapping[str, Any],
             submissions: Mapping[str, Sequence[Exchange]], scorer: Mapping[str, Any]) -> None:
    digests = []
    for name, data in sorted(files.items()):
        digests.append((name, write_atomic(bundle / name, data)))
    rows = []
    for s in scenarios:
        sid = str(s["id"])
        posts = submissions.get(sid, ())
        d = decided.get(sid)
        rows.append({"id": sid, "category": plan[sid].get("category"), "valid": s["valid"],
                     "status": posts[-1].status_code if posts else None,
                     "delivered": None if d is None else d.delivered,
                     "fields_ok": None if d is None else d.fields_ok,
                     "name": s.get("name"), "message": (s.get("message") or "")[:300]})
    metrics = []
    for key, value in values.items():
        part, whole = (int(x) for x in value.split("/"))
        metrics.append({"id": key, "value": f"{part / whole:.4f}" if whole else "not measured",
                        "fraction": value})
    html = report.render_html(summary=summary, metrics=metrics,
                              findings=list(found), scenarios=rows,
                              scorer=scorer, environment=json.loads(files["environment.json"]),
                              files=digests)
    write_atomic(bundle / "report.html", html.encode())
