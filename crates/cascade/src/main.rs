//! `cascade`: the CascadeKV command-line tool.
//!
//! One binary for everything a user does with a store: `put`, `get`, `delete`,
//! `scan`, `stats` (and, as they land, `serve` and `bench`).

#![deny(
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    clippy::todo,
    clippy::unimplemented,
    clippy::dbg_macro
)]
#![warn(clippy::pedantic)]

mod cli;

/// Counts heap bytes, so `stats` and the benchmarks can report DRAM use. The inner
/// allocator is mimalloc: loads ran 1.2–2× glibc's malloc (docs/benchmarks.md, session
/// 11); jemalloc measured the same with lower RSS, but its C build cost CI ~2 minutes.
#[global_allocator]
static ALLOC: cascade_bench::alloc::CountingAlloc<mimalloc::MiMalloc> =
    cascade_bench::alloc::CountingAlloc(mimalloc::MiMalloc);

/// Runs the command line and exits with its status.
fn main() {
    std::process::exit(cli::run());
}
