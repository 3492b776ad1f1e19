//! RocksDB as a peer engine for `cascade bench`, behind
//! [`cascade_bench::engine::Engine`], so the same workload code drives CascadeKV and
//! RocksDB in the same process.
//!
//! Everything here needs this crate's `rocksdb` feature, which builds RocksDB from
//! C++ source (about 20 minutes on 2 cores, needs clang/libclang for bindgen). It is
//! off by default so the workspace build and CI never compile it; build the binary
//! with `cargo build --release -p cascade --features rocksdb`. Without the feature
//! the crate is empty.
//!
//! A faster way where the host has it: link Debian's RocksDB 7.8.3 (`apt-get install
//! librocksdb-dev`) with `ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo build
//! --release -p cascade --features rocksdb` (a few minutes). `build.rs` then compiles
//! `compat/rocksdb78.cc`, the seven C functions the crate calls that 7.8 lacks (the
//! statistics level, `wait_for_compact` as a poll of the flush and compaction
//! properties). Results say which RocksDB they measured.
//!
//! Configuration ([`open`]), chosen to be a fair peer, not a tuned one:
//!
//! * WAL on; every write uses `WriteOptions::set_sync(sync)` (`sync` for
//!   `--durability sync`, otherwise the WAL is written but not fsynced).
//! * Block-based tables with a 10 bits/key bloom filter (full filters) and an LRU
//!   block cache of `block_cache_bytes` (the caller passes the DRAM CascadeKV uses).
//!   Index and filter blocks stay outside the block cache (RocksDB's default); they
//!   are counted in `engine_dram_bytes` instead.
//! * No compression at any level: the fair setting for 8-byte values, and the
//!   compression libraries are not even compiled in.
//! * `increase_parallelism(2)`, `set_max_background_jobs(2)`, `create_if_missing`;
//!   everything else is RocksDB 11.8's default (64 MiB memtables, leveled compaction).
//! * Statistics on at `ExceptHistogramOrTimers` (tickers only, per-core counters) to
//!   report write amplification.
//! * With a slow directory ([`open_tiered`], `cascade bench --slow-dir`): `db_paths` =
//!   [(its directory, the fast budget), (the slow directory, unbounded)], the same two
//!   directories CascadeKV is given; leveled compaction then places each level on the
//!   first path with room for it (RocksDB turns `level_compaction_dynamic_level_bytes`
//!   off with several paths).

#![deny(
    missing_docs,
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    clippy::todo,
    clippy::unimplemented,
    clippy::dbg_macro
)]
#![warn(clippy::pedantic)]

#[cfg(feature = "rocksdb")]
mod engine;

#[cfg(feature = "rocksdb")]
pub use engine::{open, open_tiered, RocksEngine};
