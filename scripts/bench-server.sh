#!/usr/bin/env bash
# cascade serve vs redis-server (Debian 7.0) over the network, same machine, one run
# (issue #5). redis-benchmark SET/GET (100 B values, 1M random keys, pipeline 16, 50
# clients) and go-ycsb workloads a and c through the redis binding, in both durability
# pairings: cascade buffered vs Redis AOF everysec, cascade sync vs Redis AOF always.
# Data of both servers lives on the same file system ($BENCH_DIR, default
# target/bench-server). Writes a Markdown report to docs/bench-results/<date>/server.md.
#
# Not part of CI. Needs redis-server, redis-benchmark, and go-ycsb (scripts/test.sh
# builds it into target/tools/go-ycsb). Usage: scripts/bench-server.sh [quick]
set -euo pipefail
cd "$(dirname "$0")/.."
N=1000000; RECORDS=200000; OPS=400000
if [ "${1:-}" = quick ]; then N=100000; RECORDS=20000; OPS=40000; fi
THREADS=${THREADS:-2}
cargo build --release -p cascade >/dev/null
BIN=$PWD/target/release/cascade
YCSB=${GO_YCSB:-$PWD/target/tools/go-ycsb}
WL=$(go env GOMODCACHE)/github.com/pingcap/go-ycsb@v1.0.1/workloads
BASE=${BENCH_DIR:-$PWD/target/bench-server}
OUT=docs/bench-results/$(date +%F)
mkdir -p "$OUT"
MD=$OUT/server.md
PORT=6399
PID=

wait_ready() { for _ in $(seq 1 300); do redis-cli -p $PORT ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server did not start" >&2; exit 1; }
stop() { if [ -n "$PID" ]; then redis-cli -p $PORT shutdown >/dev/null 2>&1 || true; wait "$PID" 2>/dev/null || true; PID=; fi; }
trap stop EXIT
start_cascade() { # durability
  rm -rf "$BASE/cascade"; mkdir -p "$BASE/cascade"
  "$BIN" serve --dir "$BASE/cascade" --port $PORT --durability "$1" --threads "$THREADS" --pool-size 8G >/dev/null &
  PID=$!; wait_ready
}
start_redis() { # appendfsync
  rm -rf "$BASE/redis"; mkdir -p "$BASE/redis"
  redis-server --port $PORT --dir "$BASE/redis" --appendonly yes --appendfsync "$1" --save "" \
    --daemonize no --logfile "$BASE/redis.log" &
  PID=$!; wait_ready
}
rss_mb() { echo $(( $(ps -o rss= -p "$PID") / 1024 )); }
# Heap as each server reports it (INFO used_memory: Redis's allocator, cascade's
# counting allocator). cascade's RSS also counts the mapped pool pages it touched.
heap_mb() { echo $(( $(redis-cli -p $PORT info memory | tr -d '\r' | sed -n 's/^used_memory://p') / 1048576 )); }
# redis-benchmark --csv: "test","rps","avg","min","p50","p95","p99","max"
rb() { # label
  redis-benchmark -p $PORT -t set,get -n $N -r 1000000 -d 100 -P 16 -c 50 --csv 2>/dev/null |
    tail -n +2 | tr -d '"' | while IFS=, read -r t rps avg min p50 p95 p99 max; do
      echo "| $1 | $t | $rps | $p50 | $p99 |"
    done
}
ycsb() { # label
  "$YCSB" load redis -P "$WL/workloada" -p redis.addr=127.0.0.1:$PORT -p recordcount=$RECORDS \
    -p threadcount=16 > "$BASE/ycsb-load.txt" 2>&1
  for w in a c; do
    "$YCSB" run redis -P "$WL/workload$w" -p redis.addr=127.0.0.1:$PORT -p recordcount=$RECORDS \
      -p operationcount=$OPS -p threadcount=16 > "$BASE/ycsb-$w.txt" 2>&1
    local line; line=$(grep '^TOTAL' "$BASE/ycsb-$w.txt" | tail -1)
    local ops p50 p99
    ops=$(sed -E 's/.*OPS: ([0-9.]+).*/\1/' <<<"$line")
    p50=$(sed -E 's/.*50th\(us\): ([0-9]+).*/\1/' <<<"$line")
    p99=$(sed -E 's/.*99th\(us\): ([0-9]+).*/\1/' <<<"$line")
    echo "| $1 | ycsb-$w | $ops | $p50 | $p99 |"
  done
}

{
  echo "### cascade serve vs redis-server 7.0 ($(date +%F), $(nproc) cores)"
  echo
  echo "redis-benchmark -t set,get -n $N -r 1000000 -d 100 -P 16 -c 50 --csv;"
  echo "go-ycsb (v1.0.1, redis binding) load + run a, c: recordcount=$RECORDS operationcount=$OPS threadcount=16."
  echo "cascade serve --threads $THREADS. Data dirs on $(df --output=source "$BASE" 2>/dev/null | tail -1 || echo ?)."
  echo
  echo "| server | test | ops/s | p50 (redis-benchmark: ms, ycsb: µs) | p99 |"
  echo "|---|---|---:|---:|---:|"
} > "$MD"
mkdir -p "$BASE"
for pair in "buffered everysec" "sync always"; do
  set -- $pair
  start_cascade "$1"; rb "cascade ($1)" >> "$MD"; ycsb "cascade ($1)" >> "$MD"
  echo "| cascade ($1) | memory after: heap / RSS | $(heap_mb) MB / $(rss_mb) MB | | |" >> "$MD"; stop
  start_redis "$2"; rb "redis (aof $2)" >> "$MD"; ycsb "redis (aof $2)" >> "$MD"
  echo "| redis (aof $2) | memory after: used_memory / RSS | $(heap_mb) MB / $(rss_mb) MB | | |" >> "$MD"; stop
done
cat "$MD"
