#!/usr/bin/env bash
# Regenerates the peer comparison of docs/benchmarks.md (issue #4): CascadeKV vs RocksDB
# vs dram-index in one run per setting, with JSON and PNG plots under
# docs/bench-results/<date>/, and a new dated section inserted at the top of
# docs/benchmarks.md (older sections are kept).
#
# Needs the RocksDB peer: the first build compiles RocksDB from source (~20 minutes).
# Not part of CI. Usage: scripts/bench-peers.sh [quick]
#   quick: 10x smaller key counts, for a smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=1
[ "${1:-}" = quick ] && SCALE=10
cargo build --release -p cascade --features rocksdb >/dev/null
BIN=./target/release/cascade
DATE=$(date +%F)
OUT=docs/bench-results/$DATE
mkdir -p "$OUT"
SHM=/dev/shm/cascade-peers
DISK=${BENCH_DISK_DIR:-$PWD/target/bench-disk}
MD="$OUT/report.md"
: > "$MD"
run() { # name, args...
  local name=$1; shift
  echo "#### $name" >> "$MD"
  echo '```' >> "$MD"
  echo "cascade bench $*" >> "$MD"
  echo '```' >> "$MD"
  "$BIN" bench --quiet --json "$OUT/$name.json" --plot "$OUT/$name" "$@" | grep '^|' >> "$MD"
  echo >> "$MD"
}
E=cascade,rocksdb,dram-index
N4=$((4000000 / SCALE)); N1=$((1000000 / SCALE))
run micro-8b --engine $E --dir $SHM --num $N4 --threads 2 --key-size 8 --value-size 8 \
  --faststore-capacity 64M --workloads fillrandom,readrandom,overwrite
run ycsb-1kb --engine $E --dir $SHM --num $N1 --ops $N1 --threads 2 --value-size 1000 \
  --faststore-capacity 256M --workloads load,a,b,c,d,e,f
run ycsb-1kb-sync-disk --engine $E --dir "$DISK" --num $((N1 / 50)) --duration 10 --threads 2 \
  --value-size 1000 --durability sync --faststore-capacity 256M --workloads load,a,c
rm -rf "$SHM" "$DISK"
python3 - "$DATE" "$MD" <<'PY'
import sys
date, md = sys.argv[1], sys.argv[2]
body = open(md).read()
doc = open("docs/benchmarks.md").read()
sec = f"## {date} — peers side by side (issue #4)\n\nRegenerate: `scripts/bench-peers.sh`. JSON and plots: `docs/bench-results/{date}/`.\n\n{body}\n"
marker = "## 2026-11-21 — Flush and compaction (issue #3)"
i = doc.find("\n## ", doc.find("## Machine"))
doc = doc[: i + 1] + sec + doc[i + 1 :] if i >= 0 else doc + "\n" + sec
open("docs/benchmarks.md", "w").write(doc)
PY
echo "wrote $MD and a new section in docs/benchmarks.md"
