#!/usr/bin/env bash
# Throughput of the application commands of issue #31 — PUBLISH to 1 and to 100
# subscribers, EVALSHA of a small script, PFADD, XADD and XREADGROUP — on `cascade
# serve` and on redis-server, one after the other on this machine, data on /dev/shm.
#   scripts/bench-apps.sh [CASCADE_BIN]      (default target/release/cascade)
# env: PORT (6396), N (requests per workload, 200000), C (clients, 50)
# Redis runs `--save '' --appendonly no`; cascade its defaults (durability buffered, one
# worker per core). Subscribers are redis-cli processes reading to /dev/null; they,
# redis-benchmark and the server share the cores. A workload whose command a server
# refuses is reported as such. Prints one markdown table.
set -eu
bin=${1:-target/release/cascade}
port=${PORT:-6396}
n=${N:-200000}
c=${C:-50}
out=$(mktemp -d)
rps() { # name args...: runs redis-benchmark, prints requests/s (or "refused")
  local name=$1; shift
  if ! redis-benchmark -p "$port" -n "$n" -c "$c" -P 1 --csv "$@" >"$out/$name.csv" 2>"$out/$name.err"; then
    echo refused; return
  fi
  python3 - "$out/$name.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r and r[0] != "test"]
print(f"{float(rows[0][1]):.0f}" if rows else "refused")
PY
}
subscribers() { # count: starts that many subscribers of channel `ch`
  for _ in $(seq 1 "$1"); do redis-cli -p "$port" subscribe ch >/dev/null 2>&1 & echo $! >>"$out/subs"; done
  for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$port" pubsub numsub ch | tail -1)" -ge "$1" ] 2>/dev/null && return; sleep 0.1
  done
}
stop_subscribers() { [ -f "$out/subs" ] && xargs kill <"$out/subs" 2>/dev/null; rm -f "$out/subs"; sleep 0.2; }
run_all() { # server-name port
  local s=$1
  subscribers 1;   echo "PUBLISH, 1 subscriber|$(rps "$s.pub1" publish ch hello)" >>"$out/$s"; stop_subscribers
  subscribers 100; echo "PUBLISH, 100 subscribers|$(rps "$s.pub100" publish ch hello)" >>"$out/$s"; stop_subscribers
  local sha
  sha=$(redis-cli -p "$port" script load "return redis.call('incr', KEYS[1])" 2>/dev/null || true)
  if [ ${#sha} -eq 40 ]; then
    echo "EVALSHA (INCR in Lua)|$(rps "$s.eval" evalsha "$sha" 1 counter)" >>"$out/$s"
  else
    echo "EVALSHA (INCR in Lua)|refused" >>"$out/$s"
  fi
  echo "PFADD (random elements)|$(rps "$s.pfadd" -r 1000000 pfadd hll __rand_int__)" >>"$out/$s"
  redis-cli -p "$port" xgroup create st g 0 mkstream >/dev/null 2>&1 || true
  echo "XADD|$(rps "$s.xadd" xadd st '*' f v)" >>"$out/$s"
  echo "XREADGROUP COUNT 1|$(rps "$s.xrg" xreadgroup group g c count 1 streams st '>')" >>"$out/$s"
}

# shellcheck source=scripts/lib/side-by-side.sh
. "$(dirname "$0")/lib/side-by-side.sh"
on_cascade "$bin" "$port" run_all
on_redis "$port" run_all

echo "| workload (-n $n -c $c -P 1) | cascade req/s | redis req/s | cascade / redis |"
echo "|---|---:|---:|---:|"
paste -d'|' "$out/cascade" "$out/redis" | while IFS='|' read -r name cv _ rv; do
  ratio=$(python3 -c "import sys; a,b=sys.argv[1:]; print(f'{float(a)/float(b):.2f}' if a.replace('.','').isdigit() and b.replace('.','').isdigit() else '-')" "$cv" "$rv")
  echo "| $name | $cv | $rv | $ratio |"
done
rm -rf "$out"
