#!/usr/bin/env bash
# Make sure the local PostgreSQL server the ledger tests use is up: 127.0.0.1:5432, trust
# authentication for local TCP connections, a database named "test" (issue 3).
#
# - already accepting connections: nothing to start;
# - installed but stopped: start the newest cluster "main" with pg_ctlcluster (how this machine's
#   PostgreSQL is started) and wait up to 30 s;
# - not installed: as root with apt-get, install the Debian package postgresql, allow trust
#   authentication from 127.0.0.1 on that fresh cluster only, and start it.
# Then create the database "test" if it is missing.  Prints one line saying what it did; exits
# non-zero with a clear message if it cannot.  It never stops, kills or restarts anything.
set -euo pipefail

HOST=127.0.0.1
PORT=5432
DATABASE=test
did=()

fail() {
    echo "ensure-postgres: $*" >&2
    exit 1
}

ready() {
    command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h "$HOST" -p "$PORT" -t 2
}

newest_version() {
    ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1
}

install_postgres() {
    [ "$(id -u)" -eq 0 ] || fail "PostgreSQL is not installed and this is not root: install the Debian package postgresql"
    command -v apt-get >/dev/null 2>&1 || fail "PostgreSQL is not installed and there is no apt-get to install it with"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || fail "apt-get update failed"
    apt-get install -y -qq postgresql >/dev/null || fail "apt-get install postgresql failed"
    local version hba
    version=$(newest_version)
    [ -n "$version" ] || fail "installed postgresql, but no cluster under /etc/postgresql"
    # A cluster we just created: let local TCP connections in without a password, as on the
    # machines the tests are written for.  Existing clusters are never reconfigured.
    hba="/etc/postgresql/$version/main/pg_hba.conf"
    if [ -f "$hba" ] && ! grep -Eq "^host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust" "$hba"; then
        sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
        # If the package's own set-up already started it, make it read the new rules.
        pg_ctlcluster --skip-systemctl-redirect "$version" main reload >/dev/null 2>&1 || true
    fi
    did+=("installed postgresql $version")
}

start_cluster() {
    local version
    version=$(newest_version)
    [ -n "$version" ] || fail "no PostgreSQL cluster configured under /etc/postgresql"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 ||
        pg_ctlcluster "$version" main status >/dev/null 2>&1 ||
        fail "could not start cluster $version/main (pg_ctlcluster needs root or the postgres user)"
    local waited=0
    until ready; do
        [ "$waited" -lt 30 ] || fail "cluster $version/main started but $HOST:$PORT is not accepting connections after 30 s"
        sleep 1
        waited=$((waited + 1))
    done
    did+=("started cluster $version/main")
}

if ! ready; then
    if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(newest_version)" ]; then
        install_postgres
    fi
    start_cluster
fi

# The tests connect as a superuser with trust authentication: postgres, or root on this machine.
command -v psql >/dev/null 2>&1 || fail "psql not found (Debian package postgresql-client)"
admin=""
for user in postgres root; do
    if psql -X -q -h "$HOST" -p "$PORT" -U "$user" -d postgres -tAc "SELECT 1" >/dev/null 2>&1; then
        admin=$user
        break
    fi
done
[ -n "$admin" ] || fail "$HOST:$PORT is up but neither postgres nor root can log in with trust authentication"
if [ "$(psql -X -h "$HOST" -p "$PORT" -U "$admin" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" != "1" ]; then
    psql -X -q -h "$HOST" -p "$PORT" -U "$admin" -d postgres -c "CREATE DATABASE $DATABASE" >/dev/null ||
        fail "could not create database $DATABASE"
    did+=("created database $DATABASE")
fi

if [ "${#did[@]}" -eq 0 ]; then
    echo "ensure-postgres: PostgreSQL already running on $HOST:$PORT (database $DATABASE ready)"
else
    summary=$(IFS=';'; echo "${did[*]}" | sed 's/;/; /g')
    echo "ensure-postgres: $summary; PostgreSQL accepting connections on $HOST:$PORT"
fi
