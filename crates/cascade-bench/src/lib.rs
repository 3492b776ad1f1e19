//! Benchmarks for CascadeKV (`cascade bench`).
//!
//! * [`alloc`] — a counting global allocator (heap bytes now / peak) that the
//!   `cascade` binary installs so every benchmark can report DRAM use.
//! * [`keys`] — key/value generators.
//! * [`micro`] — db_bench-style workloads (`fillseq`, `fillrandom`, `overwrite`,
//!   `readrandom`, `recover`) run with N threads against a store, reporting
//!   throughput, heap and pool bytes.

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
// Counts, bytes and nanoseconds become f64 for rates, ratios and plots everywhere (all far below 2^53).
#![allow(clippy::cast_precision_loss)]

pub mod alloc;
pub mod engine;
pub mod gen;
pub mod keys;
pub mod micro;
pub mod plot;
pub mod report;
pub mod runner;
pub mod ycsb;
pub mod ycsb_run;
