#!/usr/bin/env bash
# Space under sustained overwrites through the server (issue #10): a small hot key set
# overwritten far beyond the pool. Starts `cascade serve` on a fresh directory with
# --pool-size $POOL, runs redis-benchmark SETs of $SIZE-byte values over $KEYS keys
# ($N requests), samples INFO every 10 s, then prints the final space figures.
#
#   scripts/bench-space-server.sh            # N=10000000 KEYS=10000 SIZE=1000 POOL=256M
#   N=1000000 scripts/bench-space-server.sh  # shorter
#
# Needs redis-benchmark and redis-cli (Debian: redis-tools) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000000}
KEYS=${KEYS:-10000}
SIZE=${SIZE:-1000}
POOL=${POOL:-256M}
PORT=${PORT:-6391}
BIN=${BIN:-target/release/cascade}
OUT=${OUT:-$(mktemp -d /tmp/cascade-space.XXXXXX)}
mkdir -p "$OUT"
[ -x "$BIN" ] || cargo build --release -p cascade
"$BIN" serve --dir "$OUT/data" --port "$PORT" --pool-size "$POOL" > "$OUT/serve.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping > /dev/null 2>&1 && break; sleep 0.1; done
fields='^(pool_bytes_used|vlog_bytes|vlog_live_bytes|vlog_cleanings|faststore_log_bytes|live_bytes):'
(
    while kill -0 $PID 2> /dev/null; do
        redis-cli -p "$PORT" info 2> /dev/null | tr -d '\r' | grep -E "$fields" | tr '\n' ' '
        echo
        sleep 10
    done
) > "$OUT/info.log" &
redis-benchmark -p "$PORT" -t set -d "$SIZE" -r "$KEYS" -n "$N" -P 16 -c 20 -q \
    > "$OUT/bench.log" 2>&1
sleep 3
redis-cli -p "$PORT" info | tr -d '\r' > "$OUT/final.log"
redis-cli -p "$PORT" shutdown nosave > /dev/null 2>&1 || true
wait $PID || true
echo "redis-benchmark: $(tr '\r' '\n' < "$OUT/bench.log" | grep -E 'requests per second' | tail -1)"
echo "errors in redis-benchmark output: $(grep -ciE 'err|oom' "$OUT/bench.log" || true)"
echo "peak pool_bytes_used sampled: $(grep -oE 'pool_bytes_used:[0-9]+' "$OUT/info.log" | cut -d: -f2 | sort -n | tail -1)"
grep -E '^(pool_bytes_used|live_bytes|vlog_bytes|vlog_live_bytes|vlog_cleanings|vlog_cleaned_bytes|vlog_released_segments|space_amplification):' "$OUT/final.log"
echo "samples and logs in $OUT"
