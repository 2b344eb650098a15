# Sourced by .ci/engines and .ci/bench: `start_postgres` creates a throw-away PostgreSQL
# cluster on a free loopback port (.ci/pg decides where it lives and how it starts) and
# exports TEST_POSTGRES_URL for the integration tests (each makes a database of its own);
# `stop_postgres` removes it. SECKILL_PG_DIR is its folder (server.log is there).

start_postgres() {
  SECKILL_PG_DIR=$(bash .ci/pg start "$(free_port)")
  export TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$(cat "$SECKILL_PG_DIR/port")/postgres"
}

stop_postgres() {
  if [ -n "${SECKILL_PG_DIR:-}" ]; then
    bash .ci/pg remove "$SECKILL_PG_DIR"
    SECKILL_PG_DIR=""
  fi
}
