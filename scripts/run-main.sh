#!/usr/bin/env bash
# Quick start, command 1: the main job.
#  1. validates the bundled task-class catalogue;
#  2. explains the pilot 02 signal for three bundled example inputs (honest, partial, false
#     success);
#  3. records them as attempts in a fresh tamper-evident ledger under runs/<time>/, signs a
#     checkpoint, has an independent witness cosign it, then verifies the ledger against the
#     witness and recomputes every award with the independent implementation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export COLUMNS="${COLUMNS:-120}"
T=.venv/bin/triz-eval

$T catalogue validate
$T catalogue list
for example in pilot_02_honest pilot_02_partial pilot_02_false_success; do
    echo
    echo "=== signal explain: examples/signal/${example}.json ==="
    $T signal explain -t pilot_02_feedback_form -i "examples/signal/${example}.json"
done

run="runs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$run"
export TRIZ_EVAL_DB="$run/ledger.db" TRIZ_EVAL_KEYS="$run/keys"
echo
echo "=== trust record in $run ==="
$T ledger init
$T witness init --dir "$run/witness" >/dev/null
for example in pilot_02_honest pilot_02_partial pilot_02_false_success; do
    $T attempt evaluate -t pilot_02_feedback_form -i "examples/signal/${example}.json" \
        --attempt-id "$example"
done
$T ledger checkpoint
$T witness cosign --dir "$run/witness"
$T ledger verify --witness "$run/witness"
$T ledger recompute
$T attempt show pilot_02_false_success
