# Sourced by .ci/test and .ci/bench: `start_postgres` creates a throw-away PostgreSQL
# cluster (Debian's server binaries; .ci/setup installs them) on a free loopback port, exports
# TEST_POSTGRES_URL for the integration tests (each makes a database of its own), and
# `stop_postgres` removes it. initdb refuses to run as root, so as root the cluster
# belongs to the `postgres` user.

pg_bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres() {
  local bin port
  bin=$(pg_bin)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "no PostgreSQL server binaries (run .ci/setup with SECKILL_NEED_POSTGRES=1)" >&2
    return 1
  fi
  port=$(free_port)
  SECKILL_PG_DIR=$(mktemp -d)
  chmod 755 "$SECKILL_PG_DIR"
  [ "$(id -u)" = 0 ] && chown postgres "$SECKILL_PG_DIR"
  as_postgres "$bin/initdb" -D "$SECKILL_PG_DIR/data" -A trust -U postgres --no-sync >"$SECKILL_PG_DIR/initdb.log"
  as_postgres "$bin/pg_ctl" -D "$SECKILL_PG_DIR/data" -l "$SECKILL_PG_DIR/server.log" -w start \
    -o "-p $port -k $SECKILL_PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=500" >/dev/null
  SECKILL_PG_BIN=$bin
  export TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres"
}

stop_postgres() {
  if [ -n "${SECKILL_PG_DIR:-}" ]; then
    as_postgres "$SECKILL_PG_BIN/pg_ctl" -D "$SECKILL_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$SECKILL_PG_DIR"
    SECKILL_PG_DIR=""
  fi
}
