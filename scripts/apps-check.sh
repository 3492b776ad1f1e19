#!/usr/bin/env bash
# Real applications against `cascade serve`, as a user runs them (issue #31): BullMQ with
# ioredis, python-rq, Celery (Redis broker and result backend), redis-py's Lock and
# PubSub. Installs them (pip into target/apps/venv, npm into target/apps/node) on first
# use; starts one server on a fresh data directory; runs each check; prints one line per
# application and exits non-zero if any failed.
#   scripts/apps-check.sh [CASCADE_BIN] [APP ...]   apps: bullmq rq celery redispy
# env: PORT (6397)
set -u
cd "$(dirname "$0")/.."
bin=${1:-target/release/cascade}; shift || true
apps=("$@"); [ ${#apps[@]} -gt 0 ] || apps=(redispy rq celery bullmq)
port=${PORT:-6397}
root=$PWD/target/apps
mkdir -p "$root"
if [ ! -x "$root/venv/bin/python" ]; then
  python3 -m venv "$root/venv" && "$root/venv/bin/pip" install --quiet 'redis>=5' 'rq>=2' 'celery[redis]>=5.3' || exit 1
fi
if [ ! -d "$root/node/node_modules/bullmq" ]; then
  mkdir -p "$root/node" && (cd "$root/node" && npm init -y >/dev/null && npm install --silent bullmq ioredis) || exit 1
fi
cp scripts/apps/bullmq_check.mjs "$root/node/"
data=$(mktemp -d /dev/shm/apps-check.XXXXXX 2>/dev/null || mktemp -d)
"$bin" serve --dir "$data/db" --port "$port" >"$data/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port/0"
failed=0
for app in "${apps[@]}"; do
  case $app in
    bullmq) cmd=(node "$root/node/bullmq_check.mjs" "$port");;
    rq) cmd=("$root/venv/bin/python" scripts/apps/rq_check.py "$url");;
    celery) cmd=("$root/venv/bin/python" scripts/apps/celery_check.py "$url");;
    redispy) cmd=("$root/venv/bin/python" scripts/apps/redispy_check.py "$url");;
    *) echo "unknown app $app"; failed=1; continue;;
  esac
  if out=$(timeout 300 "${cmd[@]}" 2>&1); then
    echo "$out" | tail -1
  else
    echo "$app: FAILED"; echo "$out" | tail -15 | sed 's/^/    /'; failed=1
  fi
done
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$pid"
wait "$pid" 2>/dev/null
rm -rf "$data"
exit $failed
