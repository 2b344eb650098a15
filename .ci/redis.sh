# Sourced by the scripts here: `start_redis [dir]` runs a redis-server on a free
# loopback port, exports REDIS_URL, and stops it when the calling script exits.
# Without `dir` it is throw-away; with one, it keeps its data there in an append-only
# file synced on every write (appendfsync always): nothing answered `queued` is lost.

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_redis() {
  local port dir aof=no
  port=$(free_port)
  if [ -n "${1:-}" ]; then dir=$1; aof=yes; mkdir -p "$dir"; else dir=$(mktemp -d); fi
  redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' --appendonly "$aof" \
    --appendfsync always \
    --daemonize no >"$dir/redis.log" 2>&1 &
  SECKILL_REDIS_PID=$!
  trap 'stop_redis' EXIT
  for _ in $(seq 1 100); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      export REDIS_URL="redis://127.0.0.1:$port/"
      return 0
    fi
    sleep 0.1
  done
  echo "redis-server did not start; its log:" >&2
  cat "$dir/redis.log" >&2
  return 1
}

stop_redis() {
  if [ -n "${SECKILL_REDIS_PID:-}" ]; then
    kill "$SECKILL_REDIS_PID" 2>/dev/null || true
    wait "$SECKILL_REDIS_PID" 2>/dev/null || true
    SECKILL_REDIS_PID=""
  fi
}
