#!/usr/bin/env bash
# Quick start, command 2: the whole test suite, with the linters that guard it.
#
# With no arguments the suite runs as two pytest processes side by side: the tests that start
# sandboxes (bubblewrap, network namespaces, gunicorn inside them) in one, everything else in
# the other. The sandbox tests spend most of their time waiting on sockets and processes, so the
# two share this machine's cores well; the sandbox tests stay in one process because some of
# them check that no sandbox is left behind. Any arguments (a path, -m "not slow", -k ...) run
# one plain pytest with them instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# The PostgreSQL ledger tests run against the real local server: start it if it is down.
bash scripts/ensure-postgres.sh
.venv/bin/ruff check .
.venv/bin/mypy

# tests/service runs pilot attempts in its worker pool (which opens sandboxes and probes
# isolation): it stays with the sandbox tests, after them, as before the split.
SANDBOXED=(tests/pilot tests/sandbox tests/service)

collected_nothing() {
    echo "run-tests: pytest collected no tests ($1): failing on purpose" >&2
}

if [ "$#" -gt 0 ]; then
    status=0
    .venv/bin/python -m pytest -q -p no:cacheprovider "$@" || status=$?
    if [ "$status" -eq 5 ]; then
        collected_nothing "$*"
        exit 1
    fi
    exit "$status"
fi

log="$(mktemp -t triz-sandboxed-tests.XXXXXX)"
trap 'rm -f "$log"' EXIT
echo "run-tests: the sandbox tests run beside the rest; their report follows the first" >&2
.venv/bin/python -m pytest -q -p no:cacheprovider "${SANDBOXED[@]}" >"$log" 2>&1 &
sandboxed_pid=$!
# Interrupted: stop the sandbox tests we started (by their PID) rather than leave them running.
trap '[ -z "$sandboxed_pid" ] || kill "$sandboxed_pid" 2>/dev/null || true; rm -f "$log"' EXIT
ignores=()
for path in "${SANDBOXED[@]}"; do
    ignores+=("--ignore=$path")
done
rest=0
.venv/bin/python -m pytest -q -p no:cacheprovider "${ignores[@]}" tests || rest=$?
sandboxed=0
wait "$sandboxed_pid" || sandboxed=$?
sandboxed_pid=""
echo
echo "run-tests: the sandbox tests (${SANDBOXED[*]}):"
cat "$log"
for pair in "rest:$rest" "sandboxed:$sandboxed"; do
    if [ "${pair#*:}" -eq 5 ]; then
        collected_nothing "${pair%%:*}"
        exit 1
    fi
done
if [ "$rest" -ne 0 ] || [ "$sandboxed" -ne 0 ]; then
    echo "run-tests: FAILED (the rest: exit $rest; the sandbox tests: exit $sandboxed)" >&2
    exit 1
fi
echo "run-tests: both parts passed"
