# Sourced by the scripts here: `start_redis [dir]` runs a redis-server on a free
# loopback port, exports REDIS_URL, and stops it when the calling script exits.
# Without `dir` it is throw-away; with one, it keeps its data there in an append-only
# file synced on every write (appendfsync always): nothing answered `queued` is lost.

# `free_ports N [bus]`: N free loopback ports below the range the kernel hands out to
# outgoing connections and to binds of port 0 (32768 and up on Linux), as the tests'
# and the chaos tool's Redis get (`local_redis::steady_port`, 12000-22000): no
# outgoing connection takes one between the check here and the server binding it.
# Each is claimed as `steady_port` claims its own (an abstract Unix socket named after
# the port), and held until the script that asked ($$) is gone: the chaos tool runs
# beside the servers these scripts start (.ci/test), and a port it holds while the
# process on it is down (killed as a fault, started again on the same port) is not
# handed out here, nor one handed out here there. With `bus`, each one's cluster-bus
# port (port + 10000) is free too.
free_ports() {
  python3 - "$1" "${2:-}" "$$" <<'PY'
import os, random, socket, sys, time
def free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False
def claim(p):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind("\0seckill-steady-port-%d" % p)
        return s
    except OSError:
        s.close()
        return None
want, bus, owner = int(sys.argv[1]), sys.argv[2] == "bus", int(sys.argv[3])
ports, claims = [], []
while len(ports) < want:
    p = random.randrange(12000, 22000)
    if p in ports or not free(p) or (bus and not free(p + 10000)):
        continue
    held = claim(p)
    if held:
        ports.append(p)
        claims.append(held)
print(" ".join(map(str, ports)), flush=True)
# The claims outlive this process in a child of its own, which lets go of the
# caller's output (so that `$(free_ports ...)` returns now) and ends after the owner.
if os.fork() == 0:
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    while True:
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            os._exit(0)
        time.sleep(1)
PY
}
free_port() { free_ports 1; }

start_redis() {
  local port dir aof=no
  port=$(free_port)
  if [ -n "${1:-}" ]; then dir=$1; aof=yes; mkdir -p "$dir"; else dir=$(mktemp -d); fi
  local pin=()
  # The bench's placement (.ci/bench): the first of its Redis cores.
  if [ -n "${BENCH_REDIS_CPUS:-}" ]; then pin=(taskset -c "${BENCH_REDIS_CPUS%%[,-]*}"); fi
  ${pin[@]+"${pin[@]}"} redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' --appendonly "$aof" \
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

# `start_redis_cluster [masters] [replicas]` runs a throw-away Redis Cluster of three
# masters (or as many as asked), each with one replica (or as many as asked), on
# loopback ports, and exports REDIS_CLUSTER_URL (the node URLs, comma-separated: what
# REDIS_URL takes for a cluster). With BENCH_REDIS_CPUS (a list of cores, `taskset`'s
# form), node i runs on the list's core i, in turn. `stop_redis_cluster` removes it.
start_redis_cluster() {
  local masters=${1:-3} replicas=${2:-1} port urls="" nodes=() ok pin=() cores=() i=0
  SECKILL_CLUSTER_DIR=$(mktemp -d)
  SECKILL_CLUSTER_PIDS=()
  if [ -n "${BENCH_REDIS_CPUS:-}" ]; then
    read -r -a cores <<<"$(python3 -c 'import sys
out = []
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    out += range(int(a), int(b or a) + 1)
print(*out)' "$BENCH_REDIS_CPUS")"
  fi
  for port in $(free_ports $((masters * (1 + replicas))) bus); do
    mkdir -p "$SECKILL_CLUSTER_DIR/$port"
    pin=()
    if [ "${#cores[@]}" -gt 0 ]; then pin=(taskset -c "${cores[$((i % ${#cores[@]}))]}"); fi
    i=$((i + 1))
    ${pin[@]+"${pin[@]}"} redis-server --bind 127.0.0.1 --port "$port" --dir "$SECKILL_CLUSTER_DIR/$port" --save '' \
      --appendonly no --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 3000 --daemonize no >"$SECKILL_CLUSTER_DIR/$port/redis.log" 2>&1 &
    SECKILL_CLUSTER_PIDS+=($!)
    nodes+=("127.0.0.1:$port")
    urls+="${urls:+,}redis://127.0.0.1:$port/"
  done
  for node in "${nodes[@]}"; do
    for _ in $(seq 1 100); do
      redis-cli -p "${node#*:}" ping >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas "$replicas" --cluster-yes >"$SECKILL_CLUSTER_DIR/create.log" 2>&1 || {
    cat "$SECKILL_CLUSTER_DIR/create.log" >&2
    return 1
  }
  for _ in $(seq 1 200); do
    ok=1
    for node in "${nodes[@]}"; do
      redis-cli -p "${node#*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=0
    done
    [ "$ok" = 1 ] && break
    sleep 0.1
  done
  if [ "$ok" != 1 ]; then
    echo "the Redis Cluster did not come up; see $SECKILL_CLUSTER_DIR" >&2
    return 1
  fi
  export REDIS_CLUSTER_URL=$urls
}

stop_redis_cluster() {
  local pid
  for pid in ${SECKILL_CLUSTER_PIDS[@]+"${SECKILL_CLUSTER_PIDS[@]}"}; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  SECKILL_CLUSTER_PIDS=()
  if [ -n "${SECKILL_CLUSTER_DIR:-}" ]; then rm -rf "$SECKILL_CLUSTER_DIR"; fi
  SECKILL_CLUSTER_DIR=""
}
