#!/usr/bin/env bash
# Starts three `cascade serve` instances (ports 6380-6382, data under ./cascade-shards/)
# and twemproxy in front of them on 127.0.0.1:22121 (config: nutcracker.yml next to this
# script), in the foreground. Ctrl-C stops the proxy and the instances.
#
#   ./examples/twemproxy/run-local.sh
#   redis-cli -p 22121 set user:1 ada        # in another terminal
#
# CASCADE (the binary, default: target/release/cascade, built if missing),
# SHARD_DIR (default: ./cascade-shards) and STATS_PORT (nutcracker's stats, default 22222)
# can be overridden from the environment.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cascade="${CASCADE:-$root/target/release/cascade}"
shard_dir="${SHARD_DIR:-./cascade-shards}"
stats_port="${STATS_PORT:-22222}"

command -v nutcracker >/dev/null 2>&1 || {
  echo "nutcracker not found: install twemproxy (Debian/Ubuntu: apt-get install nutcracker)" >&2
  exit 1
}
if [ ! -x "$cascade" ]; then
  (cd "$root" && cargo build --release -p cascade)
fi
nutcracker -t -c "$here/nutcracker.yml" >/dev/null

pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

for i in 0 1 2; do
  port=$((6380 + i))
  mkdir -p "$shard_dir/cascade$i"
  "$cascade" serve --dir "$shard_dir/cascade$i" --port "$port" --bind 127.0.0.1 &
  pids+=("$!")
done

# Wait until every instance answers (opening a large store can take a moment).
for i in 0 1 2; do
  port=$((6380 + i))
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      break
    fi
    sleep 0.1
  done
done

echo "twemproxy on 127.0.0.1:22121 -> cascade on 6380, 6381, 6382 (stats on $stats_port)"
nutcracker -c "$here/nutcracker.yml" -s "$stats_port" &
pids+=("$!")
wait "${pids[-1]}"
