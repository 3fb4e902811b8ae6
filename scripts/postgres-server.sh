#!/usr/bin/env bash
# A PostgreSQL server of the tests' own, in a directory that holds its data,
# its log, its Unix socket and a self-signed certificate.
#
#     scripts/postgres-server.sh start DIR [PID]   # initdb, then start; prints nothing on success
#     scripts/postgres-server.sh stop DIR          # fast shutdown; harmless if not running
#
# With a PID, the server is stopped and DIR removed once that process has
# ended, however it ended (a watcher in the background checks every second):
# what the tests use when they start a server of their own.
#
# initdb refuses to run as root, so as root the server runs as a system user
# of its own (strata-postgres, made on first use). It runs with fsync off: it
# is for the behaviour tests, which a crash of the machine would not need to
# survive. The database is "postgres", its superuser "postgres".
#
# Who may connect, and how (pg_hba.conf):
# - the Unix socket: anyone, trusted;
# - TCP on 127.0.0.1, on the port written to DIR/port (a free one):
#   strata_password with its password (SCRAM-SHA-256), with or without TLS;
#   strata_tls with its password, over TLS only; nobody else.
# Both roles' password is "strata-test-password".
set -euo pipefail

usage() { echo "usage: $0 start DIR [PID] | stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || [ $# -eq 3 ] || usage
command=$1
dir=$2
owner_pid=${3:-}

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
    cat >"$dir/data/pg_hba.conf" <<'HBA'
local     all  all                           trust
hostssl   all  strata_tls       127.0.0.1/32 scram-sha-256
hostnossl all  strata_tls       127.0.0.1/32 reject
host      all  strata_password  127.0.0.1/32 scram-sha-256
HBA
    openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 2 \
        -keyout "$dir/data/server.key" -out "$dir/data/server.crt" >/dev/null 2>&1
    chmod 600 "$dir/data/server.key"
    if [ ${#as_owner[@]} -gt 0 ]; then chown strata-postgres "$dir/data/server.key" "$dir/data/server.crt"; fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    if ! "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -s \
        -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c ssl=on -c password_encryption=scram-sha-256 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start; then
        cat "$dir/server.log" >&2
        exit 1
    fi
    echo "$port" >"$dir/port"
    for role in strata_password strata_tls; do
        "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres \
            -c "CREATE ROLE $role LOGIN CREATEDB PASSWORD 'strata-test-password'" >/dev/null
    done
    if [ -n "$owner_pid" ]; then
        # Detached, its output nowhere: the owner's pipes must not wait for it.
        script=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
        setsid bash -c "while kill -0 $owner_pid 2>/dev/null; do sleep 1; done; '$script' stop '$dir'; rm -rf '$dir'" \
            </dev/null >/dev/null 2>&1 &
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
