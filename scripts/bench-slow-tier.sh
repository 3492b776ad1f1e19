#!/usr/bin/env bash
# Reproduces the slow-tier measurements of docs/benchmarks.md (issue #14). The fast tier
# is a pool on /dev/shm, the slow tier a directory on the real disk ($SLOW, default
# /work/cascade-slow-bench); RocksDB gets the same two directories (db_paths).
#   1. YCSB A-F, 1 KB values, data 5x the fast budget (1M keys, 200 MiB budget);
#   2. load and random reads, 8 B keys and values, 10M keys over a 40 MiB budget;
#   3. write amplification as the data grows from 1x to 10x the fast budget
#      (1 KB values, 64 MiB budget; LightKV Fig. 9);
#   4. p99 reads under a 50/50 read/write load (YCSB A), slow-tier writes unlimited
#      and limited to 32 MB/s;
#   5. recovery: reopening a store whose data is 5x its fast budget.
# Not part of CI (takes ~10 minutes). Needs the RocksDB build:
#   cargo build --release -p cascade --features rocksdb --target-dir /work/target-rocks
# Usage: scripts/bench-slow-tier.sh [1|2|3|4|5 ...]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-/work/target-rocks/release/cascade}
FAST=/dev/shm/cascade-slow-bench
SLOW=${SLOW:-/work/cascade-slow-bench}
run() {
    rm -rf "$FAST" "$SLOW"; mkdir -p "$SLOW"
    echo '```'; echo "$ cascade bench $* --dir $FAST --slow-dir $SLOW"; echo '```'
    "$BIN" bench "$@" --dir "$FAST" --slow-dir "$SLOW" --quiet 2>/dev/null | grep '^|'
    echo
}
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(1 2 3 4 5)
for p in "${parts[@]}"; do
case $p in
1)
    echo "### YCSB A-F, 1 KB values, data 5x the fast budget"
    run --engine cascade,rocksdb --num 1000000 --ops 300000 --threads 2 --value-size 1000 \
        --faststore-capacity 256M --fast-budget 200M --workloads load,settle,a,b,c,d,e,f
    ;;
2)
    echo "### 8 B keys and values, 10M keys, 40 MiB fast budget"
    run --engine cascade,rocksdb --num 10000000 --threads 2 --key-size 8 --value-size 8 \
        --faststore-capacity 64M --fast-budget 40M --workloads fillrandom,settle,readrandom
    ;;
3)
    echo "### Write amplification as the data grows (1 KB values, 64 MiB fast budget)"
    echo "| data / budget | engine | WA total | WA fast | WA slow | slow tier MB | fast tier MB |"
    echo "|---|---|---|---|---|---|---|"
    for m in 1 2 4 6 8 10; do
        rm -rf "$FAST" "$SLOW"; mkdir -p "$SLOW"
        "$BIN" bench --engine cascade,rocksdb --num $((m * 65536)) --threads 2 --value-size 1000 \
            --faststore-capacity 32M --fast-budget 64M --workloads fillrandom,settle \
            --dir "$FAST" --slow-dir "$SLOW" --quiet --json /tmp/slow-wa.json >/dev/null 2>&1
        python3 - "$m" <<'PY'
import json, sys
for r in json.load(open('/tmp/slow-wa.json')):
    if r['workload'] == 'settle':
        print(f"| {sys.argv[1]}x | {r['engine']} | {r['write_amp']:.2f} | {r['fast_write_amp']:.2f} | "
              f"{r['slow_write_amp']:.2f} | {r['slow_tier_bytes']/2**20:.0f} | {r['fast_tier_bytes']/2**20:.0f} |")
PY
    done
    echo
    ;;
4)
    echo "### p99 reads under 50/50 reads and writes (YCSB A, 1 KB, 5x budget)"
    for rate in 0 32M; do
        run --engine cascade,rocksdb --num 1000000 --ops 1000000 --threads 2 --value-size 1000 \
            --faststore-capacity 256M --fast-budget 200M --slow-write-rate $rate --workloads load,a
    done
    ;;
5)
    echo "### Recovery: reopen a store holding 5x its fast budget (1 KB values), then YCSB C"
    rm -rf "$FAST" "$SLOW"; mkdir -p "$SLOW"
    "$BIN" bench --engine cascade,rocksdb --num 1000000 --threads 2 --value-size 1000 \
        --faststore-capacity 256M --fast-budget 200M --workloads load,settle \
        --dir "$FAST" --slow-dir "$SLOW" --quiet >/dev/null 2>&1
    echo '```'; echo "$ cascade bench --reuse --engine cascade,rocksdb --workloads c ..."; echo '```'
    "$BIN" bench --reuse --engine cascade,rocksdb --num 1000000 --ops 300000 --threads 2 \
        --value-size 1000 --faststore-capacity 256M --fast-budget 200M --workloads c \
        --dir "$FAST" --slow-dir "$SLOW" --quiet --json /tmp/slow-open.json 2>/dev/null | grep '^|'
    python3 - <<'PY'
import json
for r in json.load(open('/tmp/slow-open.json')):
    if r['workload'] == 'open':
        print(f"open {r['engine']}: {r['seconds'] * 1000:.0f} ms")
PY
    echo
    ;;
esac
done
rm -rf "$FAST" "$SLOW"
