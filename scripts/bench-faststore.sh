#!/usr/bin/env bash
# Reproduces the FastStore measurements of docs/benchmarks.md (issue #2):
#   1. index candidates at 2 threads, 8 B and 24 B keys;
#   2. load / read / overwrite of 4M 8 B keys + 8 B values, Buffered, pool on /dev/shm;
#   3. recovery time after SIGKILL with 4M keys in FastStore.
# Not part of CI (takes ~6 minutes). Usage: scripts/bench-faststore.sh [NUM]
set -euo pipefail
cd "$(dirname "$0")/.."
NUM="${1:-4000000}"
DIR=/dev/shm/cascade-bench
cargo build --release -p cascade -p cascade-bench --bins >/dev/null
BIN=./target/release

echo "## Index candidates (num=$NUM, 2 threads)"
echo '```'
echo "$ target/release/index_candidates --num $NUM --threads 2"
echo '```'
"$BIN/index_candidates" --num "$NUM" --threads 2 2>/dev/null | grep '^|'

echo
echo "## Load, read, overwrite (num=$NUM, 2 threads, 8 B keys, 8 B values, Buffered, $DIR)"
echo '```'
echo "$ cascade bench --num $NUM --threads 2 --workloads fillrandom,readrandom,overwrite --dir $DIR"
echo '```'
"$BIN/cascade" bench --num "$NUM" --threads 2 --workloads fillrandom,readrandom,overwrite --dir "$DIR" 2>/dev/null | grep '^|'

echo
echo "## Recovery after SIGKILL with $NUM keys in FastStore"
echo '```'
echo "$ cascade bench --num $NUM --workloads fillrandom --kill-at-end --dir $DIR   # SIGKILLs itself"
echo "$ cascade bench --num $NUM --reuse --workloads readrandom --dir $DIR        # times Db::open"
echo '```'
"$BIN/cascade" bench --num "$NUM" --workloads fillrandom --kill-at-end --dir "$DIR" >/dev/null 2>&1 || true
"$BIN/cascade" bench --num "$NUM" --reuse --workloads readrandom --dir "$DIR" 2>/dev/null | grep '^|'
rm -rf "$DIR"
