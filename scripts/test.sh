#!/usr/bin/env bash
# The test command of the README quick start; .ci/run calls exactly this.
# Installs what the tests need, then runs lints and the whole test suite.
# KILL_CYCLES (default 50) sets how many SIGKILL cycles the kill test runs.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) and re-run" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# The benchmark plots render text with DejaVu Sans (Debian's fonts-dejavu-core).
if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq fonts-dejavu-core) >/dev/null 2>&1 || true
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
KILL_CYCLES="${KILL_CYCLES:-50}" cargo test --workspace --release
