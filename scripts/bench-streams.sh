#!/usr/bin/env bash
# XADD and XREADGROUP throughput: `cascade serve` and redis-server, one after the other,
# on the same port, data directories on /dev/shm, driven by redis-benchmark (50 clients,
# 200 000 requests each, without and with -P 16 pipelining).
#   scripts/bench-streams.sh [CASCADE_BIN] [PORT]     (defaults: target/release/cascade 6403)
# redis-server runs with --appendonly yes --appendfsync everysec --save ''; cascade serve
# with --threads 2 --durability buffered (persists every log each second: the same
# promise). XREADGROUP reads one entry per call (COUNT 1) as consumer `c` of group `g`
# created at 0 on the stream XADD filled, so every call delivers an entry and adds it
# to the group's pending list. Prints one CSV line per server and test.
set -eu
bin=${1:-target/release/cascade}
port=${2:-6403}
work=$(mktemp -d /tmp/bench-streams.XXXXXX)
n=200000

run_tests() { # label port
  local label=$1
  for p in 1 16; do
    local s="s$p"
    redis-cli -p "$port" del "$s" >/dev/null
    redis-benchmark -p "$port" -n $n -c 50 -P $p --csv xadd "$s" '*' f v |
      tail -1 | sed "s/^/$label,XADD -P $p,/"
    redis-cli -p "$port" xgroup create "$s" g 0 >/dev/null
    redis-benchmark -p "$port" -n $n -c 50 -P $p --csv xreadgroup group g c count 1 streams "$s" '>' |
      tail -1 | sed "s/^/$label,XREADGROUP -P $p,/"
    echo "$label,check,xlen=$(redis-cli -p "$port" xlen "$s") pending=$(redis-cli -p "$port" xpending "$s" g | head -1)"
  done
}

# shellcheck source=scripts/lib/side-by-side.sh
. "$(dirname "$0")/lib/side-by-side.sh"
echo "server,test,name,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
out=$work
on_cascade "$bin" "$port" run_tests --threads 2 --durability buffered --pool-size 2G
on_redis "$port" run_tests --save '' --appendonly yes --appendfsync everysec
rm -rf "$work"
