#!/usr/bin/env bash
# PFADD (and PFCOUNT, GEOADD, GEOSEARCH, BITFIELD) throughput of `cascade serve` vs
# redis-server, one after the other on this machine, data directories on /dev/shm
# (issue #31, item 4). GEOADD puts every member within a few cm of (13, 38) (redis-benchmark
# pads __rand_int__ to 12 digits), so the GEOSEARCH 55 km away finds none: it measures
# the 9-cell scan of an empty area.
#   PORT=6402 scripts/bench-pfadd.sh [CASCADE_BIN]     (default target/release/cascade)
# Redis runs `--save '' --appendonly no`; cascade runs with its defaults (durability
# buffered, one worker per core). redis-benchmark shares the cores with the server.
# Prints one markdown table: requests per second per server and their ratio.
set -eu
bin=${1:-target/release/cascade}
port=${PORT:-6402}
n=${N:-200000}
out=$(mktemp -d)
tests=(
  "pfadd-1key|pfadd hll __rand_int__"
  "pfadd-100k-keys|pfadd hll:__rand_int__ __rand_int__"
  "pfcount-1key|pfcount hll"
  "geoadd|geoadd geo 13.__rand_int__ 38.__rand_int__ m:__rand_int__"
  "geosearch-5km-no-match|geosearch geo fromlonlat 13.5 38.5 byradius 5 km"
  "bitfield-incrby|bitfield bf:__rand_int__ incrby u8 100 1"
)
bench() { # name port
  local name=$1 p=$2
  for t in "${tests[@]}"; do
    local label=${t%%|*} cmd=${t#*|}
    # shellcheck disable=SC2086
    redis-benchmark -p "$p" -n "$n" -r 100000 -c 50 -P 1 --csv $cmd |
      tail -n 1 | sed "s/^\"[^\"]*\"/\"$label\"/" >>"$out/$name.csv"
  done
}
# shellcheck source=scripts/lib/side-by-side.sh
. "$(dirname "$0")/lib/side-by-side.sh"
on_cascade "$bin" "$port" bench
on_redis "$port" bench

python3 - "$out" <<'PY'
import csv, sys, os
out = sys.argv[1]
def rows(name):
    r = {}
    with open(os.path.join(out, f"{name}.csv")) as f:
        for row in csv.reader(f):
            if row and row[0] != "test":
                r[row[0]] = (float(row[1]), row[5] if len(row) > 5 else "")
    return r
c, r = rows("cascade"), rows("redis")
print("| command | cascade req/s | cascade p50 ms | redis req/s | redis p50 ms | cascade / redis |")
print("|---|---:|---:|---:|---:|---:|")
for k in c:
    print(f"| {k} | {c[k][0]:.0f} | {c[k][1]} | {r[k][0]:.0f} | {r[k][1]} | {c[k][0] / r[k][0]:.2f} |")
PY
rm -rf "$out"
