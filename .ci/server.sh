# Sourced by .ci/fuzz and .ci/clients (both under .ci/engines, after the release build):
# `start_release_server DIR [NAME=VALUE...]` starts the release server on a free
# loopback port with a fresh SQLite file in DIR, REDIS_URL's Redis under a namespace of
# its own, an admin token and cheap password hashes, plus the settings given; sets
# `base` (its URL), `token` (the admin token) and `server` (its pid), stops it and
# removes DIR on exit, and returns once it is ready (its log is DIR/server.log).
source .ci/redis.sh # free_port

start_release_server() {
  local dir=$1 port
  shift
  port=$(free_port)
  base="http://127.0.0.1:$port"
  token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
  env LEPTOS_SITE_ADDR="127.0.0.1:$port" LEPTOS_SITE_ROOT=target/site DATABASE_URL="sqlite://$dir/app.db" \
    SECKILL_ADMIN_TOKEN="$token" SECKILL_REDIS_NAMESPACE="ci$$" \
    SECKILL_PASSWORD_MEMORY_KIB=64 SECKILL_PASSWORD_ITERATIONS=1 "$@" \
    ./target/release/seckill >"$dir/server.log" 2>&1 &
  server=$!
  # shellcheck disable=SC2064 # the values now, not at exit
  trap "kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf '$dir'" EXIT
  for _ in $(seq 1 300); do
    if curl -sf "$base/readyz" >/dev/null; then return 0; fi
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  echo "[ci] the release server did not get ready in 30 s; its log:" >&2
  cat "$dir/server.log" >&2
  return 1
}
