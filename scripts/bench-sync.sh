#!/usr/bin/env bash
# Durable writes on the real disk (issues #12 and #30), side by side with the peers, in
# one run per table, alternating the engines (the host is shared: every pair is printed).
#
#   engine: `cascade bench --durability sync` for cascade (and, with BEFORE_BIN, the same
#           bench through an older binary: `cascade-before`) against RocksDB
#           (`sync=true`, group-committed WAL) at 1, 2, 8 and 32 threads: fillrandom
#           with 100 B values and YCSB load + A, B, F with 1 KB values. Each engine runs
#           as its own command, twice, in alternating order (cascade, rocksdb, rocksdb,
#           cascade), so /proc/diskstats can be read around each: `dev writes/ack` and
#           `flushes/ack` are the device's completed write and flush requests during
#           the command divided by the writes it acknowledged (YCSB: load records plus
#           the workload's write share of its ops). Other processes writing to the same
#           disk meanwhile count too: read them as upper bounds. A flush counts in both
#           columns (the kernel accounts the empty pre-flush write as a write too: one
#           O_DIRECT 4 KiB write and an fdatasync per operation read 2.00 / 1.00), so
#           one synced write alone, made durable by one write and one flush, is 2 / 1.
#   server: `cascade serve --durability sync` (CASCADE_SERVE_ARGS adds arguments, e.g.
#           "--sync-persisters 2"; with BEFORE_BIN, that binary's server too, as
#           `cascade-before`) against `redis-server --appendonly yes --appendfsync
#           always`, alternating twice: redis-benchmark SET, INCR and LPUSH (100 B, -P 1
#           -c 50; p99.9 from its percentile report, the first listed percentile at or
#           above 99.9 %) and go-ycsb (redis binding) A and B, 16 threads. A row after
#           each server's redis-benchmark cells gives the load average then. Rows
#           `cascade-buffered` (--durability buffered) and `redis-no-aof` run the same
#           clients against servers that persist nothing per write: the host's ceiling
#           (CEILING=0 leaves them out).
#   methods: `persist_backends`, what one durable small write costs per method.
#
# Not part of CI. BENCH_DISK_DIR (default target/bench-sync) must be on the disk to
# measure, not on tmpfs. RocksDB needs a `--features rocksdb` build (~20 minutes the
# first time); ROCKS_BIN names such a binary if it is not target/release/cascade. PORT
# (default 7510) is where the servers listen. Knobs of the log path are environment
# variables of the cascade process (pmem/persist.rs `LogIo`): CASCADE_LOG_WRITE=pwrite,
# CASCADE_LOG_PREWRITE=0, CASCADE_LOG_FENCE=fdatasync, CASCADE_LOG_EARLY_WB=0; of the sync journal
# (pmem/journal/): CASCADE_JOURNAL=0|1, CASCADE_JOURNAL_SYNC=dsync|shared,
# CASCADE_JOURNAL_SIZE=bytes; of the group commit (faststore/group.rs):
# CASCADE_GROUP_DEPTH=n. CASCADE_ENV passes them to the `cascade` engine rows (e.g.
# CASCADE_ENV="CASCADE_LOG_PREWRITE=0"); CASCADE_ALT_ENV adds `cascade-alt` rows, the
# same binary with those variables (e.g. CASCADE_ALT_ENV="CASCADE_JOURNAL=0": the
# mapped log's msync fences), in the same rounds; in the server table, ALT_THREADS gives
# the cascade-alt server its own --threads (SERVE_THREADS, default 2, is the others').
# SERVER_CPUS and CLIENT_CPUS (taskset lists, e.g. 0 and 1) pin the servers and the
# server rows' clients to separate CPUs, so that on a small host each server gets the
# same CPU and the client never takes it (Redis is one thread; cascade's workers and
# persisters then share that CPU too).
# Usage: scripts/bench-sync.sh [quick] [engine|server|methods|all]
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=1
if [ "${1:-}" = quick ]; then SCALE=4; shift; fi
WHAT=${1:-all}
BIN=${BIN:-./target/release/cascade}
ROCKS_BIN=${ROCKS_BIN:-$BIN}
DISK=${BENCH_DISK_DIR:-$PWD/target/bench-sync}
PORT=${PORT:-7510}
THREADS_LIST=${THREADS_LIST:-1 2 8 32}
mkdir -p "$DISK"
DEV=$(lsblk -no pkname "$(df --output=source "$DISK" | tail -1)" 2>/dev/null || true)
[ -n "$DEV" ] || DEV=$(basename "$(df --output=source "$DISK" | tail -1)")
# Completed write requests and flush requests of the disk (fields 8 and 19 of diskstats).
disk() { awk -v d="$DEV" '$3 == d { print $8, ($19 == "" ? 0 : $19) }' /proc/diskstats; }

# One engine command; prints its table rows with two extra columns.
engine_rows() { # label bin env args...
  local label=$1 bin=$2 envs=$3; shift 3
  rm -rf "$DISK/eng"
  local w0 f0 w1 f1 out
  read -r w0 f0 < <(disk)
  out=$(env $envs "$bin" bench --quiet --dir "$DISK/eng" --durability sync --pool-size 2G "$@" | grep '^| [a-z]' | grep -v '^| engine ')
  read -r w1 f1 < <(disk)
  # acked writes: fillrandom = its ops; YCSB = load ops + write share of each workload
  local acked
  acked=$(awk -F'|' '{ gsub(/ /, "", $3); ops = $5 + 0;
    if ($3 == "fillrandom" || $3 == "load") n += ops;
    else if ($3 == "a" || $3 == "f") n += ops * 0.5; else if ($3 == "b") n += ops * 0.05 }
    END { printf "%d", n }' <<<"$out")
  [ "$acked" -gt 0 ] || acked=1
  local dw df
  dw=$(awk -v a="$((w1 - w0))" -v n="$acked" 'BEGIN { printf "%.2f", a / n }')
  df=$(awk -v a="$((f1 - f0))" -v n="$acked" 'BEGIN { printf "%.2f", a / n }')
  awk -F'|' -v l="$label" -v dw="$dw" -v df="$df" 'BEGIN { OFS = "|" }
    { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", l, $3, $4, $5, $6, $8, $9, $10, $11, dw, df }' <<<"$out"
}

engine() {
  echo "### engine, --durability sync, $(date -u +%FT%TZ), data on /dev/$DEV ($DISK)"
  echo
  echo "dev writes/ack, flushes/ack: per command (all its workloads), from /proc/diskstats."
  echo
  for t in $THREADS_LIST; do
    local n=$((t * 3000 / SCALE)) d=$((8 / SCALE + 2))
    [ "$n" -gt 60000 ] && n=60000
    local fr=(--workloads fillrandom --num "$n" --threads "$t" --value-size 100)
    local yc=(--workloads load,a,b,f --num 20000 --duration "$d" --threads "$t" --value-size 1000)
    echo "#### $t threads"
    echo '```'
    echo "cascade bench --engine E --dir $DISK --durability sync --pool-size 2G ${fr[*]}"
    echo "cascade bench --engine E --dir $DISK --durability sync --pool-size 2G ${yc[*]}"
    echo '```'
    echo
    echo "| engine | workload | threads | ops | Mops/s | p50 µs | p99 µs | p99.9 µs | max µs | dev writes/ack | flushes/ack |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for round in 1 2; do
      local order="cascade rocksdb"
      [ "$round" = 2 ] && order="rocksdb cascade"
      for e in $order; do
        for args in fr yc; do
          local a
          if [ "$args" = fr ]; then a=("${fr[@]}"); else a=("${yc[@]}"); fi
          if [ "$e" = cascade ]; then
            engine_rows cascade "$BIN" "${CASCADE_ENV:-}" --engine cascade "${a[@]}"
            if [ -n "${BEFORE_BIN:-}" ]; then
              engine_rows cascade-before "$BEFORE_BIN" "" --engine cascade "${a[@]}"
            fi
            if [ -n "${CASCADE_ALT_ENV:-}" ]; then
              engine_rows cascade-alt "$BIN" "$CASCADE_ALT_ENV" --engine cascade "${a[@]}"
            fi
          else
            engine_rows rocksdb "$ROCKS_BIN" "" --engine rocksdb "${a[@]}"
          fi
        done
      done
    done
    echo
  done
  rm -rf "$DISK/eng"
}

wait_ready() { for _ in $(seq 1 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server did not start" >&2; exit 1; }
SPID=
stop() { if [ -n "$SPID" ]; then redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; SPID=; fi; }
trap stop EXIT
SRV_PIN=() CLI_PIN=()
if [ -n "${SERVER_CPUS:-}" ]; then SRV_PIN=(taskset -c "$SERVER_CPUS"); fi
if [ -n "${CLIENT_CPUS:-}" ]; then CLI_PIN=(taskset -c "$CLIENT_CPUS"); fi
start_server() { # cascade|cascade-alt|cascade-before|redis
  rm -rf "$DISK/srv"; mkdir -p "$DISK/srv"
  if [ "$1" = cascade ]; then
    "${SRV_PIN[@]}" env ${CASCADE_ENV:-} "$BIN" serve --dir "$DISK/srv" --port "$PORT" --durability sync --threads "${SERVE_THREADS:-2}" --pool-size 2G \
      ${CASCADE_SERVE_ARGS:-} >/dev/null 2>&1 &
  elif [ "$1" = cascade-alt ]; then
    "${SRV_PIN[@]}" env ${CASCADE_ALT_ENV:-} "$BIN" serve --dir "$DISK/srv" --port "$PORT" --durability sync --threads "${ALT_THREADS:-${SERVE_THREADS:-2}}" --pool-size 2G \
      ${CASCADE_SERVE_ARGS:-} >/dev/null 2>&1 &
  elif [ "$1" = cascade-buffered ]; then
    "${SRV_PIN[@]}" "$BIN" serve --dir "$DISK/srv" --port "$PORT" --durability buffered --threads "${SERVE_THREADS:-2}" --pool-size 2G \
      ${CASCADE_SERVE_ARGS:-} >/dev/null 2>&1 &
  elif [ "$1" = redis-no-aof ]; then
    "${SRV_PIN[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DISK/srv" --appendonly no --save "" \
      --daemonize no --logfile "$DISK/redis.log" &
  elif [ "$1" = cascade-before ]; then
    "${SRV_PIN[@]}" "$BEFORE_BIN" serve --dir "$DISK/srv" --port "$PORT" --durability sync --threads 2 --pool-size 2G >/dev/null 2>&1 &
  else
    "${SRV_PIN[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DISK/srv" --appendonly yes --appendfsync always --save "" \
      --daemonize no --logfile "$DISK/redis.log" &
  fi
  SPID=$!; wait_ready
}
server_rows() { # label
  local n=$((40000 / SCALE)) rec=$((20000 / SCALE)) ops=$((40000 / SCALE))
  local w0 f0 w1 f1
  read -r w0 f0 < <(disk)
  # Not --csv: its columns stop at p99. The full report's "Latency by percentile
  # distribution" gives p99.9 as the first listed percentile at or above 99.9 %.
  "${CLI_PIN[@]}" redis-benchmark -p "$PORT" -t set,incr,lpush -n "$n" -r 100000 -d 100 -P 1 -c 50 --precision 3 2>/dev/null |
    tr '\r' '\n' | awk -v l="$1" '
      /^====== / { t = $2; p999 = "" }
      /^[0-9.]+% <= / && t != "" && p999 == "" { pc = $1; sub(/%/, "", pc); if (pc + 0 >= 99.9) p999 = $3 }
      /throughput summary:/ { rps = $3 }
      /avg +min +p50/ { getline; printf "| %s | %s | %s | %s ms | %s ms | %s ms | %s ms | — |\n", l, t, rps, $3, $5, p999, $6; t = "" }'
  echo "| $1 | (load average: $(cut -d' ' -f1-3 /proc/loadavg)) | | | | | | |"
  read -r w1 f1 < <(disk)
  echo "| $1 | (redis-benchmark: $((3 * n)) writes) | | | | | | $(awk -v a="$((w1 - w0))" -v b="$((f1 - f0))" -v n="$((3 * n))" 'BEGIN { printf "%.2f / %.2f", a / n, b / n }') |"
  local YCSB=target/tools/go-ycsb WL=target/tools/go-ycsb-workloads
  "${CLI_PIN[@]}" "$YCSB" load redis -P "$WL/workloada" -p redis.addr=127.0.0.1:"$PORT" -p recordcount="$rec" \
    -p threadcount=16 >"$DISK/ycsb-load.txt" 2>&1
  for w in a b; do
    read -r w0 f0 < <(disk)
    "${CLI_PIN[@]}" "$YCSB" run redis -P "$WL/workload$w" -p redis.addr=127.0.0.1:"$PORT" -p recordcount="$rec" \
      -p operationcount="$ops" -p threadcount=16 >"$DISK/ycsb-$w.txt" 2>&1
    read -r w1 f1 < <(disk)
    local line wr
    line=$(grep '^TOTAL' "$DISK/ycsb-$w.txt" | tail -1)
    wr=$(grep '^UPDATE ' "$DISK/ycsb-$w.txt" | tail -1 | sed -E 's/.*Count: ([0-9]+).*/\1/')
    [ -n "$wr" ] && [ "$wr" -gt 0 ] || wr=1
    # go-ycsb's TOTAL line: "... OPS: x, Avg(us): .., Max(us): m, 50th(us): a, ... 99th(us): b, 99.9th(us): c, ..."
    field() { grep -oE "(^|[ ,])$1: [0-9.]+" <<<"$line" | head -1 | sed -E 's/.*: //'; }
    printf '| %s | ycsb-%s | %s | %s µs | %s µs | %s µs | %s µs |' "$1" "$w" "$(field OPS)" \
      "$(field '50th\(us\)')" "$(field '99th\(us\)')" "$(field '99\.9th\(us\)')" "$(field 'Max\(us\)')"
    awk -v a="$((w1 - w0))" -v b="$((f1 - f0))" -v n="$wr" 'BEGIN { printf " %.2f / %.2f |\n", a / n, b / n }'
  done
}
server() {
  echo "### server, durable writes, $(date -u +%FT%TZ), data on /dev/$DEV ($DISK)"
  echo
  echo '```'
  echo "cascade serve --durability sync --threads ${SERVE_THREADS:-2} --pool-size 2G   |   redis-server --appendonly yes --appendfsync always --save ''"
  echo "redis-benchmark -t set,incr,lpush -n $((40000 / SCALE)) -r 100000 -d 100 -P 1 -c 50 --precision 3"
  echo "go-ycsb load redis (workloada, recordcount=$((20000 / SCALE)), 16 threads); run a, b (operationcount=$((40000 / SCALE)), 16 threads)"
  if [ -n "${CASCADE_ALT_ENV:-}${ALT_THREADS:-}" ]; then echo "cascade-alt: the same with env '${CASCADE_ALT_ENV:-}' and --threads ${ALT_THREADS:-${SERVE_THREADS:-2}}"; fi
  if [ -n "${SERVER_CPUS:-}${CLIENT_CPUS:-}" ]; then echo "servers on CPUs ${SERVER_CPUS:-any}, clients on CPUs ${CLIENT_CPUS:-any} (taskset)"; fi
  echo '```'
  echo
  echo "| server | test | ops/s | p50 | p99 | p99.9 | max | dev writes / flushes per write |"
  echo "|---|---|---|---|---|---|---|---|"
  local first="cascade" last="cascade"
  if [ -n "${BEFORE_BIN:-}" ]; then first="cascade cascade-before"; last="cascade-before cascade"; fi
  if [ -n "${CASCADE_ALT_ENV:-}${ALT_THREADS:-}" ]; then first="$first cascade-alt"; last="cascade-alt $last"; fi
  # The host's ceiling (CEILING=0 leaves it out): the same clients against both servers
  # persisting nothing per write. On a small host the client shares the CPUs, so no
  # durable server can pass these rows; a ratio to redis above theirs is out of reach.
  local ceil=""
  [ "${CEILING:-1}" = 0 ] || ceil="cascade-buffered redis-no-aof"
  for order in "$first redis $ceil" "$ceil redis $last"; do
    for s in $order; do
      start_server "$s"
      server_rows "$s"
      stop
    done
  done
  rm -rf "$DISK/srv"
}

methods() {
  echo "#### persist_backends"
  ./target/release/persist_backends --dir "$DISK" --threads 1,2,8,32 --ops $((1000 / SCALE))
}

case $WHAT in
  engine) engine ;;
  server) server ;;
  methods) methods ;;
  all) engine; server; methods ;;
  *) echo "usage: $0 [quick] [engine|server|methods|all]" >&2; exit 2 ;;
esac
rm -rf "$DISK"
