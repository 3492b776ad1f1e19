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

# Client tools for crates/cascade/tests/clients.rs: redis-cli and redis-benchmark
# (redis-tools), twemproxy (nutcracker), redis-py, and go-ycsb built into target/tools.
# Unlike the font above these are required: a failed install stops the script.
apt_missing=()
command -v redis-cli >/dev/null 2>&1 || apt_missing+=(redis-tools)
command -v redis-benchmark >/dev/null 2>&1 || apt_missing+=(redis-tools)
command -v nutcracker >/dev/null 2>&1 || apt_missing+=(nutcracker)
if ! python3 -c 'import redis' >/dev/null 2>&1 && ! python3 -m pip --version >/dev/null 2>&1; then
  apt_missing+=(python3-pip)
fi
if [ "${#apt_missing[@]}" -gt 0 ]; then
  mapfile -t apt_missing < <(printf '%s\n' "${apt_missing[@]}" | sort -u)
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing ${apt_missing[*]} (Debian package names) and no apt-get: install them and re-run" >&2
    exit 1
  fi
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
  echo "installing ${apt_missing[*]}"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}"
fi
if ! python3 -c 'import redis' >/dev/null 2>&1; then
  echo "installing the redis package for python3"
  # A Debian system python refuses plain `pip install` (PEP 668); retry past that.
  python3 -m pip install --quiet redis ||
    python3 -m pip install --quiet --break-system-packages redis
  python3 -c 'import redis'
fi
# go-ycsb, pinned. Its module directory is read-only, so the binary goes to target/tools;
# the workload files are copied next to it (the tests read them there).
GO_YCSB_VERSION=v1.0.1
if [ ! -x target/tools/go-ycsb ] || [ "$(cat target/tools/go-ycsb.version 2>/dev/null)" != "$GO_YCSB_VERSION" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "go not found: install Go (https://go.dev/dl) to build go-ycsb for the client tests" >&2
    exit 1
  fi
  echo "building go-ycsb $GO_YCSB_VERSION into target/tools"
  mkdir -p target/tools
  tools="$PWD/target/tools"
  go mod download "github.com/pingcap/go-ycsb@$GO_YCSB_VERSION"
  ycsb_src="$(go env GOMODCACHE)/github.com/pingcap/go-ycsb@$GO_YCSB_VERSION"
  time (cd "$ycsb_src" && go build -buildvcs=false -o "$tools/go-ycsb.tmp" ./cmd/go-ycsb)
  mv -f target/tools/go-ycsb.tmp target/tools/go-ycsb
  rm -rf target/tools/go-ycsb-workloads
  mkdir -p target/tools/go-ycsb-workloads
  for w in a b c d e f; do
    install -m 644 "$ycsb_src/workloads/workload$w" target/tools/go-ycsb-workloads/
  done
  echo "$GO_YCSB_VERSION" > target/tools/go-ycsb.version
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --profile ci -- -D warnings
# The public API of cascadekv is exactly what docs/api.md lists.
python3 scripts/api-listing.py --check
KILL_CYCLES="${KILL_CYCLES:-50}" cargo test --workspace --profile ci
# The FastStore's optimistic index (the one module with `unsafe` outside pool access):
# its loom models, then its stress and property tests under AddressSanitizer (nightly).
# Separate target directories keep these builds from invalidating the release one.
RUSTFLAGS="--cfg loom --cfg crossbeam_loom" CARGO_TARGET_DIR=target/loom \
  cargo test --profile ci -p cascadekv --lib olc::loom
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
RUSTFLAGS=-Zsanitizer=address CARGO_TARGET_DIR=target/asan \
  cargo +nightly test --target x86_64-unknown-linux-gnu -p cascadekv --lib olc
