#!/usr/bin/env bash
# Reproduces the flush/compaction measurements of docs/benchmarks.md (issue #3):
#   1. 4M and 40M keys (8 B / 8 B, 2 threads, Buffered, pool on /dev/shm, 64 MiB
#      FastStore so flushes and compactions run): load, random reads, heap DRAM at the
#      end and its peak, pool bytes, write amplification;
#   2. DRAM at rest (after everything is compacted) with 50M keys;
#   3. random reads with everything in StableStore vs everything in FastStore.
# Not part of CI (takes ~15 minutes, needs ~6 GiB of /dev/shm). Usage: scripts/bench-stages.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=/dev/shm/cascade-bench
cargo build --release -p cascade >/dev/null
BIN=./target/release/cascade
run() { echo '```'; echo "$ cascade bench $*"; echo '```'; "$BIN" bench "$@" --dir "$DIR" 2>/dev/null | grep '^|'; echo; }

echo "### Load and read with flushes and compactions"
run --num 4000000 --faststore-capacity 64M --pool-size 8G --workloads fillrandom,settle,readrandom
run --num 40000000 --ops 10000000 --faststore-capacity 64M --pool-size 16G --workloads fillrandom,settle,readrandom

echo "### DRAM at rest, 50M keys"
run --num 50000000 --faststore-capacity 64M --pool-size 16G --workloads fillrandom,settle

echo "### Reads: everything in FastStore vs everything in StableStore (4M keys)"
run --num 4000000 --faststore-capacity 4G --keep-faststore --workloads fillrandom,readrandom
run --num 4000000 --faststore-capacity 64M --workloads fillrandom,settle,readrandom
rm -rf "$DIR"
