//! Benchmarks for CascadeKV.
//!
//! `alloc` provides a counting global allocator (heap bytes now / peak) that the
//! `cascade` binary installs so every benchmark can report DRAM use.

pub mod alloc;
