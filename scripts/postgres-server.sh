#!/usr/bin/env bash
# A PostgreSQL server of the tests' own, in a directory that holds its data,
# its log and its Unix socket; it listens on nothing else.
#
#     scripts/postgres-server.sh start DIR   # initdb, then start; prints nothing on success
#     scripts/postgres-server.sh stop DIR    # fast shutdown; harmless if not running
#
# initdb refuses to run as root, so as root the server runs as a system user
# of its own (strata-postgres, made on first use). The cluster trusts every
# local connection, and runs with fsync off: it is for the behaviour tests,
# which a crash of the machine would not need to survive. The database is
# "postgres", its superuser "postgres".
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
command=$1
dir=$2

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "$0: no PostgreSQL server found under /usr/lib/postgresql (install Debian's postgresql)" >&2
    exit 1
fi

as_owner=()
if [ "$(id -u)" = 0 ]; then
    if ! id strata-postgres >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin strata-postgres
    fi
    as_owner=(runuser -u strata-postgres --)
fi

case $command in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ ${#as_owner[@]} -gt 0 ]; then chown strata-postgres "$dir"; fi
    # Clients (the tests, as whoever runs them) reach the socket through it.
    chmod 755 "$dir"
    if ! "${as_owner[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --no-locale \
        >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        exit 1
    fi
    if ! "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -s \
        -o "-c listen_addresses='' -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start; then
        cat "$dir/server.log" >&2
        exit 1
    fi
    ;;
stop)
    [ -d "$dir/data" ] || exit 0
    "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w -s stop || true
    ;;
*)
    usage
    ;;
esac
