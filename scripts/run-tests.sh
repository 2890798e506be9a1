#!/usr/bin/env bash
# Quick start, command 2: the whole test suite, with the linters that guard it.
#
# With no arguments the suite runs as three pytest processes side by side: the tests that start
# sandboxes (bubblewrap, network namespaces, gunicorn inside them) in one, tests/ledger with the
# verifier, audit and rules tests in another, everything else in the third (the last two at
# nice 10, see below). The sandbox tests stay in one process because some of them check that no
# sandbox is left behind. Any arguments (a path, -m "not slow", -k ...) run
# one plain pytest with them instead.
#
# --fast (first argument) is the developers' inner loop: the linters, then every test that is
# not marked slow, sandbox, postgres or root (tests/conftest.py applies the markers), with the
# hypothesis "fast" profile (few examples), as two pytest processes side by side. Arguments
# after --fast go to both (-x, -k ...). CI runs the script without arguments: everything.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
fast=0
if [ "${1:-}" = "--fast" ]; then
    fast=1
    shift
else
    # The PostgreSQL ledger tests run against the real local server: start it if it is down.
    bash scripts/ensure-postgres.sh
fi
.venv/bin/ruff check .
if [ "$fast" -eq 1 ] || [ "$#" -gt 0 ]; then
    .venv/bin/mypy
fi
# The layers of the design (docs/architecture.md), as contracts on the import graph.
.venv/bin/lint-imports --no-cache --no-logo .importlinter

# The service tests that run pilot attempts in a worker pool (which opens sandboxes and probes
# isolation; the Ray tests' actors too) stay with the sandbox tests; the other service tests
# (no worker pool) run with the rest, which balances the two processes. tests/defect_fix
# opens sandboxes too: beside the pilot's leftover checks it would look like a leak.
SANDBOXED=(tests/pilot tests/sandbox tests/service/test_service.py tests/service/test_hostile.py
           tests/service/test_ray_dispatch.py tests/defect_fix tests/acceptance
           tests/integrations/test_swebench_end_to_end.py tests/integrations/test_trl_example.py
           tests/integrations/test_inspect_example.py)

collected_nothing() {
    echo "run-tests: pytest collected no tests ($1): failing on purpose" >&2
}

if [ "$fast" -eq 1 ]; then
    export HYPOTHESIS_PROFILE=fast
    fast_marks="not slow and not sandbox and not postgres and not root"
    # The ledger tests are about half of the fast selection: they run beside the rest.
    log="$(mktemp -t triz-fast-tests.XXXXXX)"
    trap 'rm -f "$log"' EXIT
    .venv/bin/python -m pytest -q -p no:cacheprovider -m "$fast_marks" "$@" tests/ledger \
        >"$log" 2>&1 &
    ledger_pid=$!
    trap '[ -z "$ledger_pid" ] || kill "$ledger_pid" 2>/dev/null || true; rm -f "$log"' EXIT
    rest=0
    .venv/bin/python -m pytest -q -p no:cacheprovider -m "$fast_marks" --ignore=tests/ledger \
        "$@" tests || rest=$?
    ledger=0
    wait "$ledger_pid" || ledger=$?
    ledger_pid=""
    echo
    echo "run-tests: the ledger tests (tests/ledger):"
    cat "$log"
    # 5 (nothing collected) is not a failure here: -k may leave one part empty.
    for pair in "rest:$rest" "ledger:$ledger"; do
        code="${pair#*:}"
        if [ "$code" -ne 0 ] && [ "$code" -ne 5 ]; then
            echo "run-tests: --fast FAILED (the rest: exit $rest; tests/ledger: exit $ledger)" >&2
            exit 1
        fi
    done
    if [ "$rest" -eq 5 ] && [ "$ledger" -eq 5 ]; then
        collected_nothing "--fast $*"
        exit 1
    fi
    echo "run-tests: --fast passed (not the slow, sandbox, postgres or root tests: CI runs them)"
    exit 0
fi

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
ledger_log="$(mktemp -t triz-ledger-tests.XXXXXX)"
mypy_log="$(mktemp -t triz-mypy.XXXXXX)"
sandboxed_pid=""
ledger_pid=""
mypy_pid=""
# Interrupted: stop what we started (by its PID) rather than leave it running.
trap 'for pid in $sandboxed_pid $ledger_pid $mypy_pid; do kill "$pid" 2>/dev/null || true; done
      rm -f "$log" "$ledger_log" "$mypy_log"' EXIT
# mypy (about a minute from a cold cache) checks beside the tests; its verdict counts the same.
nice -n 10 .venv/bin/mypy >"$mypy_log" 2>&1 &
mypy_pid=$!
# The files of tests/pilot that open no sandbox (pure scoring, the control set, the contract,
# the receiver on loopback) run with the ledger part: the sandbox part is the longest.
PILOT_PURE=(tests/pilot/test_score_logs.py tests/pilot/test_control_set.py
            tests/pilot/test_blind_spots.py tests/pilot/test_candidate_patches.py
            tests/pilot/test_contract.py tests/pilot/test_receiver.py
            tests/pilot/test_unanswered.py)
pure_ignores=()
for path in "${PILOT_PURE[@]}"; do
    pure_ignores+=("--ignore=$path")
done
echo "run-tests: three parts side by side (the sandbox tests; tests/ledger and the checkers;" \
     "the rest); the reports of the first two follow the third" >&2
.venv/bin/python -m pytest -q -p no:cacheprovider "${pure_ignores[@]}" "${SANDBOXED[@]}" \
    >"$log" 2>&1 &
sandboxed_pid=$!
# The other two parts yield the CPU to the sandbox tests (nice 10): together the three want
# more than this machine's 2 cores, and the sandbox tests run real candidates against clocks
# (a candidate's start, its own tests) where a starved run could be judged, not only delayed.
# The other parts have no such clock: they take what the sandbox tests leave, and when those
# end, the two of them keep both cores busy.
LEDGER_PART=(tests/ledger tests/verifier tests/audit tests/rules)
nice -n 10 .venv/bin/python -m pytest -q -p no:cacheprovider "${LEDGER_PART[@]}" \
    "${PILOT_PURE[@]}" >"$ledger_log" 2>&1 &
ledger_pid=$!
ignores=()
for path in "${SANDBOXED[@]}" "${LEDGER_PART[@]}"; do
    ignores+=("--ignore=$path")
done
rest=0
nice -n 10 .venv/bin/python -m pytest -q -p no:cacheprovider "${ignores[@]}" tests || rest=$?
ledger=0
wait "$ledger_pid" || ledger=$?
ledger_pid=""
sandboxed=0
wait "$sandboxed_pid" || sandboxed=$?
sandboxed_pid=""
checked=0
wait "$mypy_pid" || checked=$?
mypy_pid=""
echo
echo "run-tests: mypy:"
cat "$mypy_log"
echo
echo "run-tests: tests/ledger and the checkers (${LEDGER_PART[*]} ${PILOT_PURE[*]}):"
cat "$ledger_log"
echo
echo "run-tests: the sandbox tests (${SANDBOXED[*]}):"
cat "$log"
for pair in "rest:$rest" "ledger:$ledger" "sandboxed:$sandboxed"; do
    if [ "${pair#*:}" -eq 5 ]; then
        collected_nothing "${pair%%:*}"
        exit 1
    fi
done
if [ "$rest" -ne 0 ] || [ "$ledger" -ne 0 ] || [ "$sandboxed" -ne 0 ] || [ "$checked" -ne 0 ]; then
    echo "run-tests: FAILED (the rest: exit $rest; tests/ledger and the checkers: exit $ledger;" \
         "the sandbox tests: exit $sandboxed; mypy: exit $checked)" >&2
    exit 1
fi
echo "run-tests: all three parts and mypy passed"
