#!/usr/bin/env bash
# Shared set-up for the two quick-start commands.  Idempotent; safe to run on a fresh machine.
# - creates .venv with a Python >= 3.11 and installs the project with its dev extras and the
#   trainers and eval frameworks its integrations are tested against (trl, inspect,
#   verifiers) and Ray for the scale-out backend (ray), again
#   only when pyproject.toml changed;
# - when run as root on Debian, installs the Debian packages the project needs (none yet for
#   the catalogue and calculator; the sandbox adds bubblewrap and nftables).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# chromium: the dashboard's browser tests drive Debian's Chromium through Playwright (its
# own browser download needs the internet).
DEBIAN_PACKAGES=(bubblewrap nftables iproute2 util-linux chromium)

pick_python() {
    for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "setup: no Python 3.11-3.13 found (set PYTHON=/path/to/python3.11)" >&2
    return 1
}

install_debian_packages() {
    [ "${#DEBIAN_PACKAGES[@]}" -gt 0 ] || return 0
    local missing=()
    for pkg in "${DEBIAN_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "setup: missing Debian packages ${missing[*]} (not root or no apt-get): continuing without" >&2
        return 0
    fi
    echo "setup: installing Debian packages: ${missing[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

install_debian_packages

stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ] || [ ! -x .venv/bin/triz-eval ]; then
    python=$(pick_python)
    [ -x .venv/bin/python ] || "$python" -m venv .venv
    echo "setup: installing the project into .venv (first run takes a minute)" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,trl,inspect,verifiers,ray]" >/dev/null 2>&1 ||
        .venv/bin/python -m pip install --disable-pip-version-check -e ".[dev,trl,inspect,verifiers,ray]"
    rm -f .venv/.installed-*
    touch "$stamp"
fi
