#!/usr/bin/env bash
# Reproduces the popularity-placement measurements of docs/benchmarks.md (issue #15,
# PrismDB). Fast tier: a pool on /dev/shm; slow tier: a directory on the real disk
# ($SLOW, default /work/cascade-place-bench); RocksDB gets the same two directories.
#   1. YCSB A, B, C with zipfian 0.99 and 0.7, 1 KB values, 1M records (about 1 GB),
#      fast budget 20 % and 10 % of the data: cascade-place (popularity placement,
#      pin fraction 0.7, MSC), cascade (the default: key-order demotion, nothing
#      pinned), cascade-fast (everything in the pool) and RocksDB. Workloads run
#      load, c (warm-up), a, b, c; ratios are cascade-place over each engine.
#   2. Slow-tier bytes written by victim choice, pinning at 0.7: msc, msc-exact,
#      random, oldest, key-order (load + YCSB A, zipfian 0.99, 20 % budget).
#   3. As 1 with --slow-direct-reads: a get's slow-tier reads bypass the page cache
#      (O_DIRECT), so each costs a device read; RocksDB gets use_direct_reads. Zipfian
#      0.99 and 0.7 at 20 % and 10 %. ($SLOW must be on a file system with O_DIRECT.)
# Not part of CI (about 15 minutes). Needs the RocksDB build:
#   cargo build --release -p cascade --features rocksdb --target-dir /work/target-rocks
# Usage: scripts/bench-placement.sh [1|2|3 ...]   (default: 1 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-/work/target-rocks/release/cascade}
FAST=/dev/shm/cascade-place-bench
SLOW=${SLOW:-/work/cascade-place-bench}
NUM=${NUM:-1000000}
OPS=${OPS:-1000000}
COMMON=(--num "$NUM" --ops "$OPS" --threads 2 --value-size 1000 --faststore-capacity 64M
        --faststore-log-capacity 32M --quiet)
summary() {
    python3 - "$1" "$2" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))
label = sys.argv[2]
seen = {}
rows = {}
for r in rs:
    k = (r['engine'], r['workload'])
    seen[k] = seen.get(k, 0) + 1
    w = r['workload'] + ('' if seen[k] == 1 or r['workload'] != 'c' else '2')
    rows[(r['engine'], w)] = r
engines = []
for r in rs:
    if r['engine'] not in engines:
        engines.append(r['engine'])
for w in ['load', 'c', 'a', 'b', 'c2']:
    base = rows.get(('cascade-place', w))
    for e in engines:
        r = rows.get((e, w))
        if not r:
            continue
        ratio = lambda o: (base['ops_per_sec'] / o['ops_per_sec']) if o and o['ops_per_sec'] else 0
        print(f"| {label} | {w if w != 'c2' else 'c'}{' (warm-up)' if w == 'c' else ''} | {e} | "
              f"{r['ops_per_sec']/1e6:.3f} | {ratio(r):.2f}x | {r['latency_us']['p99']:.1f} | "
              f"{100*(1-r['slow_get_share']) if r['workload'] != 'load' else 0:.1f} | "
              f"{100*r['pinned_get_share']:.1f} | {r['promotions']} | "
              f"{r['slow_bytes_written']/2**20:.0f} | {r['fast_tier_bytes']/2**20:.0f} |")
PY
}
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(1 2)
table1() {
    # $1: zipfian constants, $2: budgets in %, $3...: extra bench flags
    local zs=$1 pcts=$2; shift 2
    echo "| zipf, budget | workload | engine | Mops/s | cascade-place / this | p99 µs | gets from fast % | gets of pinned keys % | promotions | slow MB written | fast tier MB |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for z in $zs; do
        for pct in $pcts; do
            budget=$((NUM * 1030 * pct / 100))
            rm -rf "$FAST" "$SLOW"; mkdir -p "$SLOW"
            "$BIN" bench --engine cascade-place,cascade,cascade-fast,rocksdb "${COMMON[@]}" \
                --zipf-constant "$z" --fast-budget "$budget" --workloads load,c,a,b,c \
                --dir "$FAST" --slow-dir "$SLOW" --json /tmp/place-$z-$pct.json "$@" >/dev/null 2>&1
            summary /tmp/place-$z-$pct.json "$z, $pct %"
        done
    done
}
for p in "${parts[@]}"; do
case $p in
1)
    table1 "0.99 0.7" "20 10"
    ;;
2)
    echo "| policy | A Mops/s | slow MB written (load) | slow MB written (A) | gets from fast % |"
    echo "|---|---|---|---|---|"
    budget=$((NUM * 1030 * 20 / 100))
    for pol in msc msc-exact random oldest key-order; do
        rm -rf "$FAST" "$SLOW"; mkdir -p "$SLOW"
        "$BIN" bench --engine cascade "${COMMON[@]}" --demotion-policy "$pol" --pin-fraction 0.7 \
            --fast-budget "$budget" --workloads load,a --dir "$FAST" --slow-dir "$SLOW" \
            --json /tmp/place-pol.json >/dev/null 2>&1
        python3 - "$pol" <<'PY'
import json, sys
rs = {r['workload']: r for r in json.load(open('/tmp/place-pol.json'))}
a, l = rs['a'], rs['load']
print(f"| {sys.argv[1]} | {a['ops_per_sec']/1e6:.3f} | {l['slow_bytes_written']/2**20:.0f} | "
      f"{a['slow_bytes_written']/2**20:.0f} | {100*(1-a['slow_get_share']):.1f} |")
PY
    done
    ;;
3)
    table1 "0.99 0.7" "20 10" --slow-direct-reads
    ;;
esac
done
