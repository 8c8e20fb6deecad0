#!/usr/bin/env bash
# A throwaway PostgreSQL server for jido's persistence tests and benches:
# `initdb` + `pg_ctl` in a fresh temporary directory, listening only on a Unix
# socket in that directory (no TCP port, so nothing clashes), trust
# authentication for the role `jido`. Installs the Debian/Ubuntu package
# `postgresql` with apt if no server binaries are found.
#
#   scripts/pg_server.sh start   # install if needed, init, start, wait until ready,
#                                # print the connection string
#   scripts/pg_server.sh stop    # stop the server started by `start` (pg_ctl) and remove its files
#   scripts/pg_server.sh status  # print the connection string if it runs, else exit 1
#
# Then: JIDO_TEST_PG=$(scripts/pg_server.sh start) cargo test --features persist-postgres --test persist_postgres
#
# PostgreSQL refuses to run as root: as root the server runs as the `postgres`
# user (created by the package; else a `jido-pg` system user is created) through
# `runuser`. As any other user it runs as that user.
#
# Settings (environment):
#   JIDO_PG_STATE  where the state file lives (default target/pg); the cluster
#                  itself goes to a new directory under ${TMPDIR:-/tmp}
#
# Only the connection string goes to stdout; progress goes to stderr, the server
# log to <cluster dir>/server.log.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE_DIR=${JIDO_PG_STATE:-$ROOT/target/pg}
STATE=$STATE_DIR/cluster.dir

say() { printf 'pg_server: %s\n' "$*" >&2; }

find_bindir() {
  local d
  # Debian layout: /usr/lib/postgresql/<major>/bin, newest first.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r); do
    [[ -x $d/initdb && -x $d/pg_ctl ]] && { echo "$d"; return 0; }
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v pg_ctl)"
    return 0
  fi
  return 1
}

install() {
  say "no PostgreSQL server found: installing the apt package postgresql"
  local sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo -n)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  # The package's own cluster is not needed (ours lives in a temp dir).
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
}

# Runs a command as the server's user.
as_server() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u "$PGUSER_OS" -- "$@"
  else
    "$@"
  fi
}

conn() { printf 'host=%s user=jido dbname=postgres\n' "$1"; }

running() {
  [[ -f $STATE ]] || return 1
  local dir
  dir=$(cat "$STATE")
  [[ -d $dir/data ]] && as_server "$BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

setup() {
  BIN=$(find_bindir) || { install; BIN=$(find_bindir) || { say "PostgreSQL binaries still missing"; exit 1; }; }
  PGUSER_OS=$(id -un)
  if [[ $(id -u) -eq 0 ]]; then
    if id postgres >/dev/null 2>&1; then
      PGUSER_OS=postgres
    else
      id jido-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin jido-pg
      PGUSER_OS=jido-pg
    fi
  fi
}

start() {
  setup
  if running; then
    conn "$(cat "$STATE")"
    return
  fi
  mkdir -p "$STATE_DIR"
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/jido-pg.XXXXXX")
  chmod 700 "$dir"
  [[ $(id -u) -eq 0 ]] && chown "$PGUSER_OS" "$dir"
  say "initdb in $dir ($("$BIN/postgres" --version))"
  as_server "$BIN/initdb" -D "$dir/data" -A trust -U jido -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  say "starting (socket in $dir)"
  as_server "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-k $dir -c listen_addresses= -c max_connections=200" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
  printf '%s' "$dir" >"$STATE"
  conn "$dir"
}

stop() {
  setup
  [[ -f $STATE ]] || { say "not running"; return 0; }
  local dir
  dir=$(cat "$STATE")
  if [[ -d $dir/data ]]; then
    as_server "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  fi
  rm -rf "$dir" "$STATE"
  say "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    setup
    if running; then conn "$(cat "$STATE")"; else exit 1; fi
    ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
