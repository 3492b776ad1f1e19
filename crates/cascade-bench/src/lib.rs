//! Benchmarks for CascadeKV (`cascade bench`).
//!
//! * [`alloc`] — a counting global allocator (heap bytes now / peak) that the
//!   `cascade` binary installs so every benchmark can report DRAM use.
//! * [`keys`] — key/value generators.
//! * [`micro`] — db_bench-style workloads (`fillseq`, `fillrandom`, `overwrite`,
//!   `readrandom`, `recover`) run with N threads against a store, reporting
//!   throughput, heap and pool bytes.

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
