#!/usr/bin/env bash
# Quick start, command 2: the whole test suite, with the linters that guard it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# The PostgreSQL ledger tests run against the real local server: start it if it is down.
bash scripts/ensure-postgres.sh
.venv/bin/ruff check .
.venv/bin/mypy
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "run-tests: pytest collected no tests: failing on purpose" >&2
    exit 1
fi
exit "$status"
