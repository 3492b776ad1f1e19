//! `cascade`: the CascadeKV command-line tool.
//!
//! One binary for everything a user does with a store: `put`, `get`, `delete`,
//! `scan`, `stats` (and, as they land, `serve` and `bench`).

mod cli;

#[global_allocator]
static ALLOC: cascade_bench::alloc::CountingAlloc = cascade_bench::alloc::CountingAlloc;

fn main() {
    std::process::exit(cli::run());
}
