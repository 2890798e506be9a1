#!/usr/bin/env bash
# Quick start, command 1: the main job.  Validates the bundled task-class catalogue and explains
# the pilot 02 signal for three bundled example inputs (honest, partial, false success).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export COLUMNS="${COLUMNS:-120}"
.venv/bin/triz-eval catalogue validate
.venv/bin/triz-eval catalogue list
for example in pilot_02_honest pilot_02_partial pilot_02_false_success; do
    echo
    echo "=== signal explain: examples/signal/${example}.json ==="
    .venv/bin/triz-eval signal explain -t pilot_02_feedback_form -i "examples/signal/${example}.json"
done
