#!/usr/bin/env bash
# List, set and sorted-set throughput of `cascade serve` vs redis-server, one after the
# other on this machine, data directories on /dev/shm (issue #16).
#   scripts/bench-redis-types.sh [CASCADE_BIN]     (default target/release/cascade)
# Redis runs `--save '' --appendonly no`; cascade runs with its defaults (durability
# buffered, one worker per core). redis-benchmark shares the cores with the server.
# Prints one markdown table: requests per second per server and their ratio.
set -eu
bin=${1:-target/release/cascade}
port=${PORT:-6395}
out=$(mktemp -d)
bench() { # name port
  local name=$1 p=$2
  redis-benchmark -p "$p" -t lpush,lpop,sadd,zadd -n 200000 -c 50 -P 1 --csv >"$out/$name.t.csv"
  redis-benchmark -p "$p" -n 100000 -r 100000 -c 50 -P 1 --csv zadd myz __rand_int__ m:__rand_int__ >"$out/$name.z.csv"
  redis-benchmark -p "$p" -n 100000 -c 50 -P 1 --csv zrange myz 0 9 >"$out/$name.r.csv"
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
    for part in "tzr":
        with open(os.path.join(out, f"{name}.{part}.csv")) as f:
            for row in csv.reader(f):
                if row and row[0] != "test":
                    label = row[0].split(" ")[0].upper() if part == "t" else {"z": "ZADD myz (random members)", "r": "ZRANGE myz 0 9"}[part]
                    r[label] = (float(row[1]), row[5] if len(row) > 5 else "")
    return r
c, r = rows("cascade"), rows("redis")
print("| command | cascade req/s | cascade p50 ms | redis req/s | redis p50 ms | cascade / redis |")
print("|---|---:|---:|---:|---:|---:|")
for k in c:
    print(f"| {k} | {c[k][0]:.0f} | {c[k][1]} | {r[k][0]:.0f} | {r[k][1]} | {c[k][0] / r[k][0]:.2f} |")
PY
rm -rf "$out"
