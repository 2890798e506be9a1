#!/usr/bin/env bash
# Quick start, command 1: the main job.
#  1. validates the bundled task-class catalogue;
#  2. evaluates pilot 02's honest reference candidate end to end: digest fixed in a fresh
#     ledger, fresh secret control set, sandboxed app, trusted SMTP receiver, score_logs.py and
#     the critical layer, signal, publication bundle;
#  3. runs the bundled adversarial candidates (one per mandatory attack of pilot 11) and prints
#     what the evaluator caught in each;
#  4. runs the second executable class, defect_fix_delayed_confirmation (a patch task with a
#     hidden reproduction test and escrow), on each of its bundled candidates through the
#     generic `attempt run`, and checks each ends as its expect.json says;
#  5. runs pilot 02's red-team campaign with the pilot's minimum budget (pilot 11: the bundled
#     adversaries plus mutants of the honest reference, two workers), prints its statement and
#     runs the reference once more to show pilot_pass (null until a passing campaign for the
#     same rules and harness versions is in the ledger); run-main fails at the end if the
#     campaign did not pass (an exploit, or the budget not met);
#  6. checks two document-step drafts with the blind verifier gate's mechanical layer (one
#     faithful, one with the invented clauses 9.2/9.3 of seed 002's live catch);
#  7. explains three bundled signal inputs and records them as attempts too, each with its
#     evidence files stored as blobs first (a digest that resolves to nothing never counts);
#  8. signs a checkpoint, has an independent witness cosign it, verifies the whole ledger
#     against the witness and recomputes every award with the independent implementation;
#  9. writes the ledger's dashboard, one static HTML page (runs/<time>/report.html).
# Everything goes to runs/<time>/.  Without root (no namespaces, no bwrap) the pilot runs in the
# labelled degraded mode: the signal it records is marked as not training-grade.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export COLUMNS="${COLUMNS:-120}"
T=.venv/bin/triz-eval

run="runs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$run"
export TRIZ_EVAL_DB="$run/ledger.db" TRIZ_EVAL_KEYS="$run/keys"
degraded=()
if [ "$(id -u)" -ne 0 ]; then
    echo "run-main: not root, so no sandbox: pilot 02 runs DEGRADED (not training-grade)" >&2
    degraded=(--unsafe-degraded)
fi

echo "=== catalogue ==="
$T catalogue validate
$T catalogue list

echo
echo "=== trust record in $run ==="
$T ledger init
$T witness init --dir "$run/witness" >/dev/null

echo
echo "=== pilot 02: the honest reference candidate ==="
reference=triz_ri_smart_ai_evaluator/pilot_02_feedback_form/candidates/reference/candidate.diff
$T pilot feedback-form run --candidate "$reference" --out "$run/bundles" "${degraded[@]}"

echo
echo "=== pilot 02: the reference and every adversarial candidate ==="
$T pilot feedback-form examples --out "$run/bundles" "${degraded[@]}"

echo
echo "=== defect fix: every bundled candidate through the generic runner ==="
for dir in triz_ri_smart_ai_evaluator/defect_fix/candidates/*/; do
    name="$(basename "$dir")"
    $T attempt run --task-class defect_fix_delayed_confirmation --candidate "$dir/candidate.diff" \
        --out "$run/bundles" --json "${degraded[@]}" >"$run/defect_fix_$name.json"
    .venv/bin/python - "$run/defect_fix_$name.json" "$dir/expect.json" "$name" <<'PY'
import json, sys
got, want = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:3])
ok = got["signal"] == want["signal"] and (
    want["outcome"] == "obtained" or any(want["reason"] in r for r in got["reasons"]))
print(f"{sys.argv[3]}: S = {got['signal']} ({got['outcome']}; "
      f"{'; '.join(got['reasons']) or 'no reasons'}): {'as expected' if ok else 'NOT as expected'}")
sys.exit(0 if ok else 1)
PY
done

echo
echo "=== pilot 02: red-team campaign at the pilot's minimum budget (pilot 11, spec 11.23) ==="
audit_status=0
if [ "${#degraded[@]}" -ne 0 ]; then
    echo "run-main: no sandbox, so no red-team campaign (its attempts must be training-grade)" >&2
    audit_status=skipped
else
    $T audit run --class pilot_02_feedback_form --budget examples/audit/pilot_02_minimum.yaml \
        --workers 2 --out "$run/audits" --json >"$run/audit.json" || audit_status=$?
    if [ "$audit_status" -ge 2 ]; then
        echo "run-main: the red-team campaign could not run (exit $audit_status)" >&2
        exit "$audit_status"
    fi
    .venv/bin/python - "$run/audit.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
print(f"campaign {doc['campaign']} in {doc['seconds']} s: {doc['stopped']}")
print(f"spent {doc['spent']}; verdicts {doc['verdicts']}")
print(doc["statement"])
PY
    $T audit show --class pilot_02_feedback_form --last 1
    echo "--- the honest reference once more: pilot_pass now ---"
    $T attempt run --task-class pilot_02_feedback_form --candidate "$reference" \
        --out "$run/bundles" --json >"$run/reference_after_audit.json"
    .venv/bin/python - "$run/reference_after_audit.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1], encoding="utf-8"))
print(f"S = {s['signal']}; public_acceptance = {s['public_acceptance']}; "
      f"pilot_pass = {s['pilot_pass']} (pending: {s['pilot_pass_pending'] or 'nothing'})")
PY
fi

echo
echo "=== the blind verifier gate (seed 002): mechanical layer on two drafts ==="
$T document verify --brief examples/document/brief.yaml \
    --draft examples/document/draft_faithful.yaml
caught=0
$T document verify --brief examples/document/brief.yaml \
    --draft examples/document/draft_invented.yaml || caught=$?
if [ "$caught" -ne 1 ]; then
    echo "run-main: the draft with invented citations was not failed (exit $caught)" >&2
    exit 1
fi

for example in pilot_02_honest pilot_02_partial pilot_02_false_success; do
    echo
    echo "=== signal explain: examples/signal/${example}.json ==="
    $T signal explain -t pilot_02_feedback_form -i "examples/signal/${example}.json"
    $T attempt evaluate -t pilot_02_feedback_form -i "examples/signal/${example}.json" \
        --evidence-dir "examples/signal/evidence/${example}" --attempt-id "$example"
done

echo
echo "=== checkpoint, witness, verification, recomputation ==="
$T ledger checkpoint
$T witness cosign --dir "$run/witness"
$T ledger verify --witness "$run/witness" --witness-vkey "$run/witness/witness.vkey"
$T ledger recompute
echo
echo "=== the dashboard: one static page for this ledger ==="
$T report -o "$run/report.html" --title "run-main $(basename "$run")"
echo
echo "run-main: ledger, witness and publication bundles are in $run"
if [ "$audit_status" != 0 ] && [ "$audit_status" != skipped ]; then
    echo "run-main: the red-team campaign did not pass (see $run/audit.json)" >&2
    exit 1
fi
