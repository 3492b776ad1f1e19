# Shared steps of the scripts that run one workload against `cascade serve` and then
# against redis-server on the same port (bench-apps, bench-pfadd, bench-redis-types,
# bench-streams). Source it; it defines:
#   wait_port PORT                 waits (10 s at most) until PORT answers PING
#   on_cascade BIN PORT FN [ARG..] starts `BIN serve ARG..` on a fresh /dev/shm
#                                  directory, runs `FN cascade PORT`, stops the server
#   on_redis PORT FN [ARG..]       the same with `redis-server ARG..` (no ARG: no
#                                  persistence, --save '' --appendonly no), running
#                                  `FN redis PORT`
# Server logs go to $out (set by the caller) when it is set.

wait_port() {
  for _ in $(seq 1 100); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "server on port $1 did not start" >&2
  exit 1
}

stop_server() { # port pid dir
  redis-cli -p "$1" shutdown nosave >/dev/null 2>&1 || kill "$2"
  wait "$2" 2>/dev/null || true
  rm -rf "$3"
}

on_cascade() { # bin port fn [serve args]
  local bin=$1 port=$2 fn=$3 d pid
  shift 3
  d=$(mktemp -d /dev/shm/bench-cascade.XXXXXX)
  "$bin" serve --dir "$d/db" --port "$port" "$@" >"${out:-$d}/cascade.log" 2>&1 &
  pid=$!
  wait_port "$port"
  "$fn" cascade "$port"
  stop_server "$port" "$pid" "$d"
}

on_redis() { # port fn [redis-server args]
  local port=$1 fn=$2 d pid
  shift 2
  [ $# -gt 0 ] || set -- --save '' --appendonly no
  d=$(mktemp -d /dev/shm/bench-redis.XXXXXX)
  /usr/bin/redis-server --port "$port" --bind 127.0.0.1 --dir "$d" "$@" >"${out:-$d}/redis.log" 2>&1 &
  pid=$!
  wait_port "$port"
  "$fn" redis "$port"
  stop_server "$port" "$pid" "$d"
}
