#!/usr/bin/env bash
# Durable writes on the real disk (issue #12): `cascade bench --durability sync` for
# cascade (synchronous writes batched across threads, FlatStore §3.3), cascade-vb (each
# thread persists its own log) and RocksDB (`sync=true`, group-committed WAL), in one
# run per setting: fillrandom with 100 B values and YCSB A with 1 KB values at 1, 2, 8
# and 32 threads; then what one durable small write costs per persistence method
# (`persist_backends`). Prints Markdown tables; not part of CI.
#
# Needs the RocksDB peer (first build ~20 minutes). BENCH_DISK_DIR (default
# target/bench-sync) must be on the disk to measure, not on tmpfs.
# Usage: scripts/bench-sync.sh [quick]
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=1
[ "${1:-}" = quick ] && SCALE=5
cargo build --release -p cascade --features rocksdb >/dev/null
cargo build --release -p cascade-bench --bin persist_backends >/dev/null
BIN=./target/release/cascade
DISK=${BENCH_DISK_DIR:-$PWD/target/bench-sync}
mkdir -p "$DISK"
E=cascade,cascade-vb,rocksdb
for t in 1 2 8 32; do
  n=$((t * 3000 / SCALE)); [ "$n" -gt 60000 ] && n=60000
  echo "#### fillrandom 100 B, sync, $t threads"
  echo '```'
  echo "cascade bench --engine $E --dir $DISK --durability sync --workloads fillrandom --num $n --threads $t --value-size 100 --pool-size 2G"
  echo '```'
  "$BIN" bench --quiet --engine $E --dir "$DISK" --durability sync --workloads fillrandom \
    --num "$n" --threads "$t" --value-size 100 --pool-size 2G | grep '^|'
  echo
  echo "#### YCSB A 1 KB, sync, $t threads"
  echo '```'
  echo "cascade bench --engine $E --dir $DISK --durability sync --workloads load,a --num 20000 --duration $((10 / SCALE + 2)) --threads $t --value-size 1000 --pool-size 2G"
  echo '```'
  "$BIN" bench --quiet --engine $E --dir "$DISK" --durability sync --workloads load,a \
    --num 20000 --duration $((10 / SCALE + 2)) --threads "$t" --value-size 1000 \
    --pool-size 2G | grep '^|'
  echo
done
echo "#### persist_backends"
./target/release/persist_backends --dir "$DISK" --threads 1,2,8,32 --ops $((1000 / SCALE))
rm -rf "$DISK"
